/**
 * Secrets on a real node: a kaniko-built function reads a Kubernetes Secret of its namespace as an
 * environment variable (secretKeyRef) and as a file (a read-only Secret volume), the kubelet doing
 * the projecting; a rotation of the Secret rolls the Deployment (a new ReplicaSet, no new build)
 * while a bounded load through /fn/ sees no failed request. Needs root (see test/cluster/node.ts).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { JOB } from '../../src/platform/kube/resource-types.js';
import { functionManifest, nodeHandler } from '../helpers/git.js';
import { eventually } from '../kube/harness.js';
import { callFunction, type E2eEnv, startE2e } from './harness.ts';
import { secretVolumeViews } from './secret-volume-views.ts';

const BUILD_MS = 10 * 60_000;
/** Longer than the kubelet's resync of a Secret volume (a minute), which would bring a late file. */
const FILE_MISSING_MS = 120_000;
const MOUNT_PATH = '/var/sless/secrets/payments';
const FIRST = `first-${randomBytes(8).toString('hex')}`;
const SECOND = `second-${randomBytes(8).toString('hex')}`;

describe('e2e on a real node: secrets', () => {
  let env: E2eEnv;

  const putSecret = (stripe: string) =>
    env.http.request('PATCH', `/api/v1/namespaces/${env.ns}/secrets/payments`, {
      query: { fieldManager: 'test-admin', force: true },
      contentType: 'application/apply-patch+yaml',
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'payments', namespace: env.ns },
        stringData: { stripe },
      },
    });
  const replicaSets = async () =>
    (
      await listObjects<KubeObject>(
        env.http,
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', plural: 'replicasets', namespaced: true },
        { namespace: env.ns, labels: { 'sless.dev/function': 'pay' } },
      )
    ).items;

  beforeAll(async () => {
    env = await startE2e('e2e-sec', {
      'pay/function.yaml': functionManifest('pay', {
        env: { STRIPE: { secretRef: { name: 'payments', key: 'stripe' } } },
        secrets: [{ name: 'payments', mountPath: MOUNT_PATH }],
      }),
      'pay/handler.js': nodeHandler(`
        const fs = require('node:fs');
        return 'env=' + process.env.STRIPE + ' file=' + fs.readFileSync('${MOUNT_PATH}/stripe', 'utf8');
      `),
    });
  }, 15 * 60_000);

  afterAll(async () => {
    await env?.close();
  }, 300_000);

  it(
    'waits for the Secret, then serves it as a variable and as a file',
    async () => {
      await eventually(
        'SecretNotFound',
        async () =>
          (await env.system.store.get('Function', env.ns, 'pay'))?.status?.conditions?.find(
            (c) => c.type === 'Ready',
          )?.reason === 'SecretNotFound',
        BUILD_MS,
      );
      await putSecret(FIRST);
      // A pod that runs but finds no file is not going to: the kubelet wrote the volume before the
      // container started. Waiting out the build time would hide what its mounts looked like.
      let missingSince: number | undefined;
      const outcome = await eventually(
        'the secret served as a variable and as a file',
        async () => {
          const [code, body] = await callFunction(env, 'pay');
          if (code === 200) return body;
          if (!body.includes('ENOENT')) return undefined;
          missingSince ??= Date.now();
          if (Date.now() - missingSince < FILE_MISSING_MS) return undefined;
          return `${code} ${body.slice(0, 200)}\n${secretVolumeViews(env.node.root, MOUNT_PATH)}`;
        },
        BUILD_MS,
      );
      expect(outcome).toContain(`env=${FIRST} file=${FIRST}`);
    },
    BUILD_MS * 2,
  );

  it(
    'a rotation rolls the Deployment with no rebuild, and a bounded load sees no failure',
    async () => {
      const before = (await replicaSets()).length;
      let stop = false;
      const results = { ok: 0, failed: [] as string[], fresh: 0 };
      const worker = async () => {
        while (!stop) {
          try {
            const [code, body] = await callFunction(env, 'pay');
            if (code !== 200) results.failed.push(`${code} ${body.slice(0, 120)}`);
            else {
              results.ok++;
              if (body.includes(`env=${SECOND} file=${SECOND}`)) results.fresh++;
            }
          } catch (error) {
            results.failed.push(String(error));
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      const workers = [worker(), worker()];
      const started = Date.now();
      await putSecret(SECOND);
      await eventually('the new value served', async () => results.fresh > 5, 5 * 60_000);
      const ms = Date.now() - started;
      stop = true;
      await Promise.all(workers);
      console.log(
        `e2e rotation: ${results.ok} requests, ${results.failed.length} failed, new value after ${ms} ms`,
      );
      if (results.failed.length > 0) console.log(secretVolumeViews(env.node.root, MOUNT_PATH));
      expect(results.failed).toEqual([]);
      expect((await replicaSets()).length).toBe(before + 1);
      const jobs = await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': 'pay' },
      });
      expect(jobs.items).toHaveLength(1);
    },
    BUILD_MS,
  );
});
