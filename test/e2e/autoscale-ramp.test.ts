/**
 * Concurrency-based autoscaling on a real node: a function of 100 ms per request (a sleep) with
 * `spec.scale: { min: 1, max: 10, target: 5 }`, pushed through git and built by kaniko, gets closed-loop
 * clients through `/fn/` ramping from 1 to 60 over 24 s, held for 20 s. The leader's autoscaler must
 * bring up at least 8 ready pods that the kubelet really starts, every request must answer 200 with
 * the function's body while pods come (and the Service's endpoints change under the proxy), and once
 * the load stops the function must be back at one pod. Nothing is played by the test; the ramp itself
 * is test/e2e/ramp.ts, which bench/node-autoscale-ramp.ts also runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, type ResourceType } from '../../src/platform/kube/resource-types.js';
import { NODE_NAME } from '../cluster/node.ts';
import { functionManifest, nodeHandler } from '../helpers/git.js';
import { eventually } from '../kube/harness.js';
import { type E2eEnv, servedBody, startE2e } from './harness.ts';
import {
  describeRamp,
  RAMP_HANDLER_BODY,
  type RampOptions,
  rampFigures,
  rampLevels,
  runRamp,
  scaleDecisions,
} from './ramp.ts';

const NODE: ResourceType = { apiVersion: 'v1', kind: 'Node', plural: 'nodes', namespaced: false };
const BUILD_MS = 10 * 60_000;
const PODS = 8;
const NAME = 'ramp';
// A 20 s stable window (the default is 60 s) keeps the way back to one pod within the file's budget;
// the panic window, a tenth of it, is then 2 s.
const SCALE = { min: 1, max: 10, target: 5, stableWindowSec: 20 };
const RAMP: RampOptions = {
  levels: rampLevels(60, 5),
  stepMs: 2000,
  holdMs: 20_000,
  steadyMs: 10_000,
  settleMs: 90_000,
  min: SCALE.min,
};

describe('e2e on a real node: autoscaling under a ramp of clients', () => {
  let env: E2eEnv;

  beforeAll(async () => {
    env = await startE2e('ramp', {
      [`${NAME}/function.yaml`]: functionManifest(NAME, { scale: SCALE }),
      [`${NAME}/handler.js`]: nodeHandler(RAMP_HANDLER_BODY),
    });
  }, 15 * 60_000);

  afterAll(async () => {
    await env?.close();
  }, 300_000);

  it(
    `scales out to ${PODS}+ ready pods with no failed request, then back to min`,
    async () => {
      await servedBody(env, NAME, 'ramp', BUILD_MS);
      await eventually(
        'one ready replica before the load',
        async () => {
          const status = (await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, NAME))?.status as
            | { readyReplicas?: number }
            | undefined;
          return status?.readyReplicas === 1;
        },
        60_000,
      );
      const node = await getObject<KubeObject>(env.http, NODE, undefined, NODE_NAME).catch(() => undefined);
      console.log(
        `node allocatable: ${JSON.stringify((node?.status as { allocatable?: unknown })?.allocatable)}`,
      );

      const run = await runRamp(env, NAME, RAMP);
      const figures = rampFigures(run, RAMP, PODS);
      console.log(describeRamp(run, figures, PODS).join('\n'));
      console.log(`the autoscaler's decisions:\n${(await scaleDecisions(env, NAME, run.start)).join('\n')}`);
      if (figures.failures.length)
        console.log(
          `failed requests (${figures.failures.length}):\n${figures.failures
            .slice(0, 30)
            .map(
              ([at, end, code, what]) =>
                `  +${((at - run.start) / 1000).toFixed(1)} s ${code} after ${Math.round(end - at)} ms: ${what}`,
            )
            .join('\n')}`,
        );

      expect(figures.requests).toBeGreaterThan(1000);
      expect(figures.failures.length, 'failed requests').toBe(0);
      expect(figures.unschedulable, 'pods the scheduler could not place').toEqual([]);
      expect(figures.maxReady, `most ready pods while loaded`).toBeGreaterThanOrEqual(PODS);
      expect(figures.maxReplicas, 'never past spec.scale.max').toBeLessThanOrEqual(SCALE.max);
      expect(figures.toMinMs, 'back at min replicas and min ready pods after the load').toBeDefined();
      expect(figures.toOnlyMinMs, 'no pod left but the min').toBeDefined();
    },
    BUILD_MS + 240_000,
  );
});
