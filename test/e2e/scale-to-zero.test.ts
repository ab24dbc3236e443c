/**
 * Scale to zero on a real node: kaniko builds the function, the kubelet runs it, the leader scales it
 * to 0 after its idle time (its pod really goes), and 20 concurrent first requests through `/fn/`
 * are held while one scale-up starts a pod, then all answered. Nothing is played by the test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, POD } from '../../src/platform/kube/resource-types.js';
import { functionManifest, nodeHandler } from '../helpers/git.js';
import { eventually } from '../kube/harness.js';
import { type E2eEnv, servedBody, startE2e } from './harness.ts';

const BUILD_MS = 10 * 60_000;
const IDLE_SECONDS = 5;

describe('e2e on a real node: scale to zero', () => {
  let env: E2eEnv;

  const replicas = async () =>
    ((await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'cold'))?.spec as { replicas?: number })
      ?.replicas;
  const pods = async () =>
    (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.ns,
        labels: { 'sless.dev/function': 'cold' },
      })
    ).items;
  const status = async () =>
    (await env.system.store.get('Function', env.ns, 'cold'))?.status as FunctionStatus | undefined;
  /** The PHASE cell of `kubectl get functions` (the Table view the API server renders for it). */
  const phaseColumn = async () => {
    const table = await env.http.request<{
      columnDefinitions: { name: string }[];
      rows: { cells: unknown[] }[];
    }>('GET', `/apis/sless.dev/v1alpha1/namespaces/${env.ns}/functions`, {
      accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
    });
    const column = table.columnDefinitions.findIndex((c) => c.name === 'Phase');
    return table.rows.find((r) => r.cells[0] === 'cold')?.cells[column];
  };
  const atZero = () =>
    eventually(
      'cold scaled to zero with no pod left',
      async () => (await replicas()) === 0 && (await pods()).length === 0,
      120_000,
    );

  beforeAll(async () => {
    env = await startE2e('s2z', {
      'cold/function.yaml': functionManifest('cold', { scaleToZero: { idleSeconds: IDLE_SECONDS } }),
      'cold/handler.js': nodeHandler(`return { hello: 'cold', pod: require('node:os').hostname() };`),
    });
  }, 15 * 60_000);

  afterAll(async () => {
    await env?.close();
  }, 300_000);

  it(
    'serves, then goes back to zero after idleSeconds, and status and kubectl get say ScaledToZero',
    async () => {
      await servedBody(env, 'cold', 'cold', BUILD_MS);
      await atZero();
      await eventually('status ScaledToZero', async () => (await status())?.phase === 'ScaledToZero');
      const s = await status();
      expect(s?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      expect(s?.conditions?.find((c) => c.type === 'ScaledToZero')?.status).toBe('True');
      expect(await phaseColumn()).toBe('ScaledToZero');
    },
    BUILD_MS + 180_000,
  );

  it('answers 20 concurrent first requests from zero with exactly one scale-up, then idles back to zero', async () => {
    await atZero();
    const before = env.system.scaler.scaleUpsOf(env.ns, 'cold');
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await fetch(`${env.system.url}/fn/${env.ns}/cold/`, {
          signal: AbortSignal.timeout(90_000),
        });
        return [res.status, await res.text()] as const;
      }),
    );
    console.log(
      `20 concurrent first requests from zero answered in ${Math.round(performance.now() - started)} ms`,
    );
    expect(results.map(([code]) => code)).toEqual(Array(20).fill(200));
    // One pod served them all: one scale-up started one pod.
    expect(new Set(results.map(([, body]) => (JSON.parse(body) as { pod: string }).pod)).size).toBe(1);
    expect(env.system.scaler.scaleUpsOf(env.ns, 'cold') - before).toBe(1);
    expect(await replicas()).toBe(1);
    await eventually('status Ready again', async () => (await status())?.phase === 'Ready', 60_000);
    await atZero();
  }, 300_000);
});
