import { describe, expect, it } from 'vitest';
import type { SlessFunction, Trigger } from '../../core/resources.js';
import { cronJobFor } from './cron-scheduler.js';

const trigger = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Trigger',
  metadata: { name: 'tick', namespace: 'team-a', uid: 'u1' },
  spec: { type: 'cron', function: 'hello', schedule: '* * * * *' },
} as unknown as Trigger;
const fn = {
  metadata: { name: 'hello', namespace: 'team-a' },
  spec: { runtime: 'nodejs20', entrypoint: 'handler.handle' },
} as unknown as SlessFunction;

const image = (registryMap?: string[]) =>
  (
    cronJobFor(trigger, fn, registryMap) as unknown as {
      spec: { jobTemplate: { spec: { template: { spec: { containers: { image: string }[] } } } } };
    }
  ).spec.jobTemplate.spec.template.spec.containers[0]?.image;

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
