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
function autoscalerOn(board: ActivityBoard) {
  const patches: Array<{ path: string; replicas: number }> = [];
  const http = {
    request: async (_method: string, path: string, options: { body?: { spec?: { replicas?: number } } }) => {
      patches.push({ path, replicas: options.body?.spec?.replicas ?? -1 });
      return {};
    },
  } as unknown as KubeHttp;
  const cache = { deployment: () => deployment } as unknown as KubeRouteCache;
  const autoscaler = new KubeAutoscaler({
    http,
    cache,
    functions: () => [fn],
    logger: pino({ level: 'silent' }),
    activity: board,
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
