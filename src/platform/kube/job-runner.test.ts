/**
 * The Kubernetes Job of a FunctionJob run: the function's secrets as its pods get them (secretKeyRef
 * variables, read-only secret volumes), the event in SLESS_EVENT, and no volumes for a function without
 * secrets.
 */
import { describe, expect, it } from 'vitest';
import type { BuildRecord, FunctionJob, SlessFunction } from '../../core/resources.js';
import { runJobFor } from './job-runner.js';
import type { KubeObject } from './objects.js';

const fn = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: { name: 'report', namespace: 'shop' },
  spec: {
    runtime: 'nodejs20',
    entrypoint: 'index.handler',
    env: { MODE: 'nightly', DB_PASSWORD: { secretRef: { name: 'db', key: 'password' } } },
    secrets: [{ name: 'certs', mountPath: '/var/sless/secrets/certs' }],
  },
} as unknown as SlessFunction;
const job = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'FunctionJob',
  metadata: { name: 'nightly', namespace: 'shop', uid: 'u-1' },
  spec: { function: 'report', runId: 3, event: { day: 1 } },
} as unknown as FunctionJob;
const build = { buildKey: 'k', commit: 'c'.repeat(40), image: 'registry.test/r@sha256:abc' } as BuildRecord;

type Pod = {
  volumes?: unknown[];
  containers: { env: { name: string; value?: string; valueFrom?: unknown }[]; volumeMounts?: unknown[] }[];
};

describe('runJobFor', () => {
  it("gives a run the function's secrets as its pods get them: secretKeyRef variables and read-only files", () => {
    const pod = (runJobFor(job, fn, build, []).spec as { template: { spec: Pod } }).template.spec;
    expect(pod.volumes).toEqual([{ name: 'secret-0', secret: { secretName: 'certs', defaultMode: 0o444 } }]);
    const [container] = pod.containers;
    expect(container?.volumeMounts).toEqual([
      { name: 'secret-0', mountPath: '/var/sless/secrets/certs', readOnly: true },
    ]);
    expect(container?.env.find((e) => e.name === 'DB_PASSWORD')).toEqual({
      name: 'DB_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'db', key: 'password' } },
    });
    expect(container?.env.find((e) => e.name === 'SLESS_EVENT')?.value).toBe('{"day":1}');
  });

  it('a run of a function without secrets has no volumes', () => {
    const plain = { ...fn, spec: { runtime: 'nodejs20', entrypoint: 'index.handler' } } as SlessFunction;
    const manifest: KubeObject = runJobFor(job, plain, build, []);
    const pod = (manifest.spec as { template: { spec: Pod } }).template.spec;
    expect(pod.volumes).toBeUndefined();
    expect(pod.containers[0]?.volumeMounts).toBeUndefined();
  });
});
