/**
 * The CronJob a cron Trigger becomes: its pinned curl image, through the builds' registry map when one
 * applies, and where a run calls the function: its Service within its timeout when it runs all the
 * time, or /fn/ (which starts it) with the activation wait added when it scales to zero.
 */
import { describe, expect, it } from 'vitest';
import type { SlessFunction, Trigger } from '../../core/resources.js';
import { type CronJobOptions, cronJobFor } from './cron-scheduler.js';

const trigger = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Trigger',
  metadata: { name: 'tick', namespace: 'team-a', uid: 'u1' },
  spec: { type: 'cron', function: 'hello', schedule: '* * * * *', event: { n: 1 } },
} as unknown as Trigger;
const fn = {
  metadata: { name: 'hello', namespace: 'team-a' },
  spec: { runtime: 'nodejs20', entrypoint: 'handler.handle' },
} as unknown as SlessFunction;
const lazy = {
  ...fn,
  spec: { ...fn.spec, timeoutSec: 10, scaleToZero: { idleSeconds: 60 } },
} as unknown as SlessFunction;
const activator = { url: 'http://sless-api.sless-system.svc', timeoutMs: 60_000 };

interface JobSpec {
  activeDeadlineSeconds: number;
  template: { spec: { containers: { image: string; args: string[] }[] } };
}
const jobSpec = (f: SlessFunction, options?: CronJobOptions) =>
  (cronJobFor(trigger, f, options) as unknown as { spec: { jobTemplate: { spec: JobSpec } } }).spec
    .jobTemplate.spec;
const image = (registryMap?: string[]) =>
  jobSpec(fn, registryMap ? { registryMap } : {}).template.spec.containers[0]?.image;

describe('cron CronJob image', () => {
  it('is the pinned curl image from its origin without a registry map', () => {
    expect(image()).toBe('curlimages/curl:8.10.1');
    expect(image(['gcr.io=mirror.example.com'])).toBe('curlimages/curl:8.10.1');
  });

  it("goes through the builds' registry map, as the build pod's images do", () => {
    expect(image(['index.docker.io=10.254.77.1:5000'])).toBe('10.254.77.1:5000/curlimages/curl:8.10.1');
    expect(image(['docker.io=mirror.example.com/hub'])).toBe('mirror.example.com/hub/curlimages/curl:8.10.1');
  });
});

describe('where a cron run calls the function', () => {
  const curl = (url: string, maxTime: number) => [
    '-sS',
    '--fail-with-body',
    '--max-time',
    String(maxTime),
    '-X',
    'POST',
    '-H',
    'content-type: application/json',
    '-H',
    'x-sless-trigger: tick',
    '--data',
    '{"n":1}',
    url,
  ];

  it('a function that runs all the time: at its Service, within its timeout', () => {
    const spec = jobSpec(fn, { activator });
    expect(spec.template.spec.containers[0]?.args).toEqual(curl('http://hello.team-a.svc:8080/', 35));
    expect(spec.activeDeadlineSeconds).toBe(60);
  });

  it('a function that scales to zero: through /fn/, which starts it, within its timeout plus the activation wait', () => {
    const spec = jobSpec(lazy, { activator });
    expect(spec.template.spec.containers[0]?.args).toEqual(
      curl('http://sless-api.sless-system.svc/fn/team-a/hello/', 75),
    );
    expect(spec.activeDeadlineSeconds).toBe(100);
  });
});
