/**
 * The rollout verdicts and the pod reasons a Function's status quotes, against Deployment and Pod
 * statuses as the controllers and the kubelet write them, with golden wording.
 */
import { describe, expect, it } from 'vitest';
import type { KubeObject } from './objects.js';
import { podFailureReason, rolloutProgress } from './rollout.js';

const deployment = (status: Record<string, unknown>, replicas = 1): KubeObject =>
  ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'fn', generation: 2 },
    spec: { replicas },
    status: { observedGeneration: 2, ...status },
  }) as KubeObject;

const pod = (name: string, status: Record<string, unknown>): KubeObject =>
  ({ apiVersion: 'v1', kind: 'Pod', metadata: { name }, status }) as KubeObject;

describe('rolloutProgress', () => {
  it('words each stage as kubectl rollout status decides it', () => {
    expect(rolloutProgress({ ...deployment({}), status: { observedGeneration: 1 } } as KubeObject)).toEqual({
      state: 'progressing',
      message: 'waiting for the Deployment controller to see generation 2',
    });
    expect(rolloutProgress(deployment({ replicas: 2, updatedReplicas: 0 }, 2))).toEqual({
      state: 'progressing',
      message: '0 of 2 replicas updated',
    });
    // The old pod still serves while the new one is not available: it is not said to terminate.
    expect(rolloutProgress(deployment({ replicas: 2, updatedReplicas: 1, availableReplicas: 1 }))).toEqual({
      state: 'progressing',
      message: '1 replicas of the previous revision still running',
    });
    expect(rolloutProgress(deployment({ replicas: 1, updatedReplicas: 1, availableReplicas: 0 }))).toEqual({
      state: 'progressing',
      message: '0 of 1 updated replicas available',
    });
    expect(rolloutProgress(deployment({ replicas: 1, updatedReplicas: 1, availableReplicas: 1 }))).toEqual({
      state: 'done',
    });
    expect(
      rolloutProgress(
        deployment({
          conditions: [
            {
              type: 'Progressing',
              status: 'False',
              reason: 'ProgressDeadlineExceeded',
              message: 'took too long',
            },
          ],
        }),
      ),
    ).toEqual({ state: 'failed', message: 'took too long' });
  });
});

describe('podFailureReason', () => {
  const crashed = { terminated: { reason: 'Error', exitCode: 3 } };

  it("quotes the kubelet's waiting reason with the last exit", () => {
    expect(
      podFailureReason([
        pod('fn-b', {}),
        pod('fn-a', {
          containerStatuses: [
            {
              name: 'function',
              state: {
                waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s restarting failed container' },
              },
              lastState: crashed,
              restartCount: 2,
            },
          ],
        }),
      ]),
    ).toBe('pod fn-a: CrashLoopBackOff: back-off 10s restarting failed container (last exit: Error, code 3)');
  });

  it('names a crash-looping container caught running between two crashes by its restarts and last exit', () => {
    expect(
      podFailureReason([
        pod('fn-a', {
          containerStatuses: [
            { name: 'function', state: { running: {} }, lastState: crashed, restartCount: 4 },
          ],
        }),
      ]),
    ).toBe('pod fn-a: restarted 4 times (last exit: Error, code 3)');
  });

  it('says nothing of a pod that is only starting, and names one that cannot be scheduled', () => {
    const starting = pod('fn-a', {
      containerStatuses: [
        { name: 'function', state: { waiting: { reason: 'ContainerCreating' } }, restartCount: 0 },
      ],
    });
    expect(podFailureReason([starting])).toBe('');
    expect(
      podFailureReason([
        pod('fn-a', {
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/1 nodes are available',
            },
          ],
        }),
      ]),
    ).toBe('pod fn-a: Unschedulable: 0/1 nodes are available');
    expect(
      podFailureReason([
        pod('fn-a', {
          containerStatuses: [
            { name: 'function', state: { terminated: { reason: 'OOMKilled', exitCode: 137 } } },
          ],
        }),
      ]),
    ).toBe('pod fn-a: OOMKilled (exit code 137)');
  });
});
