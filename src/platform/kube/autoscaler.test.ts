import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ActivityBoard } from '../../core/activity-board.js';
import type { SlessFunction } from '../../core/resources.js';
import { KubeAutoscaler } from './autoscaler.js';
import type { KubeHttp } from './http.js';
import type { KubeObject } from './objects.js';
import type { KubeRouteCache } from './route-cache.js';

const fn = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: { name: 'busy', namespace: 'shop' },
  spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', scale: { min: 1, max: 10, target: 1 } },
} as unknown as SlessFunction;

const deployment: KubeObject = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'busy', namespace: 'shop', resourceVersion: '7' },
  spec: { replicas: 1 },
  status: { readyReplicas: 1, availableReplicas: 1 },
} as KubeObject;

/** The autoscaler over a board another thread (a second view of its memory) counts on. */
function autoscalerOn(
  board: ActivityBoard,
  extra: Partial<ConstructorParameters<typeof KubeAutoscaler>[0]> = {},
  scaledTo = deployment,
) {
  const patches: Array<{ path: string; replicas: number }> = [];
  const http = {
    request: async (_method: string, path: string, options: { body?: { spec?: { replicas?: number } } }) => {
      patches.push({ path, replicas: options.body?.spec?.replicas ?? -1 });
      return {};
    },
  } as unknown as KubeHttp;
  const cache = { deployment: () => scaledTo } as unknown as KubeRouteCache;
  const autoscaler = new KubeAutoscaler({
    http,
    cache,
    functions: () => [fn],
    logger: pino({ level: 'silent' }),
    activity: board,
    ...extra,
  });
  return { autoscaler, patches };
}

describe('KubeAutoscaler and the activity board', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('counts requests another thread served in its slot by how long they lasted, even when none is in flight at the tick', async () => {
    vi.useFakeTimers({ now: 10_000_000 });
    const board = new ActivityBoard();
    const { autoscaler, patches } = autoscalerOn(board);
    const thread = new ActivityBoard(board.memory);
    const slot = autoscaler.slotOf(fn) as number;
    expect(slot).toBeTypeOf('number');
    // Four requests over most of the second, all ended before the tick: an average of 3.6 in flight.
    for (let i = 0; i < 4; i++) thread.begin(slot);
    vi.setSystemTime(10_000_900);
    for (let i = 0; i < 4; i++) thread.end(slot);
    vi.setSystemTime(10_001_000);
    expect(autoscaler.inflightOf('shop', 'busy')).toBe(0);
    await autoscaler.tick(Date.now());
    // Target 1 per instance: four instances, decided from the time-weighted average.
    expect(patches).toEqual([{ path: '/apis/apps/v1/namespaces/shop/deployments/busy/scale', replicas: 4 }]);
  });

  it("counts the main thread's requests in the same slot", async () => {
    vi.useFakeTimers({ now: 20_000_000 });
    const board = new ActivityBoard();
    const { autoscaler } = autoscalerOn(board);
    const release = autoscaler.requestStarted(fn);
    expect(board.inflightOf(autoscaler.slotOf(fn) as number)).toBe(1);
    expect(autoscaler.inflightOf('shop', 'busy')).toBe(1);
    release();
    release();
    expect(autoscaler.inflightOf('shop', 'busy')).toBe(0);
  });
});

describe('KubeAutoscaler with other replicas', () => {
  const SCALE = '/apis/apps/v1/namespaces/shop/deployments/busy/scale';
  afterEach(() => {
    vi.useRealTimers();
  });

  it("adds the other replicas' counts to its own while it leads, and hands a follower's own samples on", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    let leading = true;
    const asked: string[][] = [];
    const sampled: Array<[string, number][]> = [];
    const { autoscaler, patches } = autoscalerOn(new ActivityBoard(), {
      isLeader: () => leading,
      peers: {
        totals: (_now, functions) => {
          asked.push([...functions]);
          return new Map([['shop/busy', 2.5]]);
        },
      },
      onSampled: (own) => sampled.push([...own]),
    });
    const release = autoscaler.requestStarted(fn);
    vi.setSystemTime(1_001_000);
    await autoscaler.tick(Date.now());
    // One of its own (in flight the whole second) and 2.5 elsewhere at target 1: four instances.
    expect(patches).toEqual([{ path: SCALE, replicas: 4 }]);
    expect(asked).toEqual([['shop/busy']]);
    expect(sampled).toEqual([[['shop/busy', 1]]]);
    // A follower asks nobody for peers and decides nothing; it still hands its samples on.
    leading = false;
    vi.setSystemTime(1_002_000);
    await autoscaler.tick(Date.now());
    release();
    expect(patches).toHaveLength(1);
    expect(asked).toHaveLength(1);
    expect(sampled).toEqual([[['shop/busy', 1]], [['shop/busy', 1]]]);
  });

  it('a new leader scales out at once but in only after a whole stable window of its term', async () => {
    let leading = false;
    const atFour = { ...deployment, spec: { replicas: 4 }, status: { readyReplicas: 4 } } as KubeObject;
    const { autoscaler, patches } = autoscalerOn(
      new ActivityBoard(),
      { isLeader: () => leading, peers: { totals: () => new Map() } },
      atFour,
    );
    // No load anywhere, 4 instances: a follower decides nothing.
    await autoscaler.tick(5_000_000);
    leading = true;
    // Its term began at 5_001_000; the stable window (60 s) runs until 5_061_000.
    for (let at = 5_001_000; at < 5_061_000; at += 1000) await autoscaler.tick(at);
    expect(patches).toEqual([]);
    await autoscaler.tick(5_061_000);
    // The scale-down rate halves the ready instances at most.
    expect(patches).toEqual([{ path: SCALE, replicas: 2 }]);
  });

  it('without other replicas (no election), a lone leader scales in from its first decision', async () => {
    const atFour = { ...deployment, spec: { replicas: 4 }, status: { readyReplicas: 4 } } as KubeObject;
    const { autoscaler, patches } = autoscalerOn(new ActivityBoard(), {}, atFour);
    await autoscaler.tick(6_000_000);
    expect(patches).toEqual([{ path: SCALE, replicas: 2 }]);
  });
});
