/**
 * A function's Deployment and Service: deterministic whatever the env map order, the image pinned by
 * digest, user env unable to override the runtime's variables, the preStop sleep, probes and grace period,
 * owner references, and Service and CronJob names kept valid and distinct.
 */
import { describe, expect, it } from 'vitest';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import { deploymentFor, serviceFor } from './workload-manifests.js';

const fn = (env: Record<string, string>): SlessFunction => ({
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: { name: 'hello', namespace: 'team', uid: 'u-1' },
  spec: {
    runtime: 'nodejs20',
    entrypoint: 'handler.handle',
    memoryMb: 64,
    timeoutSec: 10,
    replicas: 3,
    env,
    source: { path: '.' },
  },
});
const build: BuildRecord = {
  buildKey: 'k',
  commit: 'a'.repeat(40),
  result: 'Succeeded',
  startedAt: 't',
  image: `reg/team-hello:${'a'.repeat(40)}@sha256:${'b'.repeat(64)}`,
};

describe('workload manifests', () => {
  it('are deterministic whatever the env map order (else every apply would roll the pods)', () => {
    const a = deploymentFor(fn({ B: '2', A: '1' }), build, {
      revision: 'r1',
      enabled: true,
      imagePullSecrets: ['pull'],
    });
    const b = deploymentFor(fn({ A: '1', B: '2' }), build, {
      revision: 'r1',
      enabled: true,
      imagePullSecrets: ['pull'],
    });
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
  });

  it('pin the digest, keep user env from overriding the runtime contract, and honour replicas/enabled', () => {
    const d = deploymentFor(fn({ SLESS_ENTRYPOINT: 'evil.x', Z: 'z' }), build, {
      revision: 'r2',
      enabled: false,
      imagePullSecrets: [],
    });
    const spec = d.spec as {
      replicas: number;
      template: {
        metadata: { annotations: Record<string, string> };
        spec: { containers: { image: string; env: { name: string; value: string }[] }[] };
      };
    };
    expect(spec.replicas).toBe(0);
    expect(spec.template.metadata.annotations['sless.dev/revision']).toBe('r2');
    const c = spec.template.spec.containers[0];
    expect(c?.image).toBe(build.image);
    expect(c?.env.filter((e) => e.name === 'SLESS_ENTRYPOINT')).toEqual([
      { name: 'SLESS_ENTRYPOINT', value: 'handler.handle' },
    ]);
    // Replaced pods keep serving while proxies learn they are gone (the e2e rollout test caught drops).
    const podSpec = spec.template.spec as unknown as {
      terminationGracePeriodSeconds: number;
      containers: { lifecycle: unknown }[];
    };
    expect(podSpec.containers[0]?.lifecycle).toEqual({ preStop: { sleep: { seconds: 5 } } });
    // A new revision is probed every second until it first answers, then readiness is probed at once
    // (the e2e benchmark's "ready" part); steady state keeps the 5 s readiness period.
    const probes = podSpec.containers[0] as unknown as Record<string, unknown>;
    expect(probes.startupProbe).toEqual({
      httpGet: { path: '/healthz', port: 8080 },
      periodSeconds: 1,
      failureThreshold: 70,
    });
    expect(probes.readinessProbe).toEqual({
      httpGet: { path: '/healthz', port: 8080 },
      periodSeconds: 5,
      failureThreshold: 2,
    });
    // The fixture function has timeoutSec 10: the sleep, the timeout, 5 s of slack.
    expect(podSpec.terminationGracePeriodSeconds).toBe(5 + 10 + 5);
    expect(serviceFor(fn({})).metadata.ownerReferences).toEqual([
      { apiVersion: 'sless.dev/v1alpha1', kind: 'Function', name: 'hello', uid: 'u-1', controller: true },
    ]);
  });
});

describe('names', () => {
  it('gives functions whose name starts with a digit a DNS-1035 Service name', async () => {
    const { serviceName } = await import('./workload-manifests.js');
    const { serviceOrigin } = await import('./routes.js');
    expect(serviceName('hello')).toBe('hello');
    expect(serviceName('1st')).toBe('fn-1st');
    expect(serviceOrigin('team', '1st')).toBe('http://fn-1st.team.svc:8080');
  });

  it('keeps CronJob names within 52 characters, distinct for distinct triggers', async () => {
    const { cronJobName } = await import('./cron-scheduler.js');
    expect(cronJobName('tick')).toBe('trigger-tick');
    const a = cronJobName('a'.repeat(60));
    const b = cronJobName(`${'a'.repeat(59)}b`);
    expect(a.length).toBeLessThanOrEqual(52);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  });
});
