// Autoscaling under a ramp on the real node (test/cluster/node.ts; root only): the ramp of
// test/e2e/autoscale-ramp.test.ts (test/e2e/ramp.ts) once, with its figures printed in full.
// A function of 100 ms per request (a sleep) with spec.scale { min 1, max 10, target 5, stable window
// 20 s } gets closed-loop clients through the controller's /fn/ proxy, from 1 to PEAK (default 60)
// in steps of 5 every 2 s, held for HOLD_S (default 20) seconds, then stopped. Printed:
//   time to 8 pods   load start → the first 500 ms sample with 8 pods Ready (not terminating),
//   p99 ramp/steady  p99 of requests started while clients were still being added, and of those in
//                    the last 10 s of the hold (full load; the pods the ramp brought are up by then),
//   back to min      load stop → replicas and ready pods at 1, and → no other pod left,
//   per pod          which pods answered the full-load requests (the proxy keeps its connections to
//                    the Service's ClusterIP alive, and kube-proxy balances connections, not requests),
//   pods over time   one line a second: requests in flight (clients and the proxy's own count, which
//                    the decisions follow), the Deployment's replicas, pods ready/live/terminating,
//   decisions        the autoscaler's ScaledOut/ScaledIn Events with the concurrency behind each.
// Run: npx tsx bench/node-autoscale-ramp.ts

import { callFunction, startE2e } from '../test/e2e/harness.ts';
import {
  describeRamp,
  RAMP_HANDLER_BODY,
  rampFigures,
  rampLevels,
  runRamp,
  scaleDecisions,
} from '../test/e2e/ramp.ts';
import { functionManifest, nodeHandler } from '../test/helpers/git.js';
import { report } from './report.ts';

const PEAK = Number(process.env.PEAK ?? 60);
const HOLD_S = Number(process.env.HOLD_S ?? 20);
const PODS = 8;
const NAME = 'ramp';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const t0 = performance.now();
  const env = await startE2e('bench', {
    [`${NAME}/function.yaml`]: functionManifest(NAME, {
      scale: { min: 1, max: 10, target: 5, stableWindowSec: 20 },
    }),
    [`${NAME}/handler.js`]: nodeHandler(RAMP_HANDLER_BODY),
  });
  try {
    const startMs = performance.now() - t0;
    const deadline = Date.now() + 600_000;
    for (;;) {
      const [code, body] = await callFunction(env, NAME).catch(() => [0, ''] as const);
      if (code === 200 && body.includes('ramp')) break;
      if (Date.now() > deadline) throw new Error(`${NAME} not served`);
      await sleep(200);
    }
    const servedMs = performance.now() - t0 - startMs;
    const options = {
      levels: rampLevels(PEAK, 5),
      stepMs: 2000,
      holdMs: HOLD_S * 1000,
      steadyMs: Math.min(10_000, HOLD_S * 500),
      settleMs: 120_000,
      min: 1,
    };
    const run = await runRamp(env, NAME, options);
    const figures = rampFigures(run, options, PODS);
    const decisions = await scaleDecisions(env, NAME, run.start);
    console.log(
      `node fixture start ${(startMs / 1000).toFixed(1)} s, first build and serve ${(servedMs / 1000).toFixed(1)} s`,
    );
    console.log(
      `ramp 1 → ${PEAK} clients over ${((run.fullAt - run.start) / 1000).toFixed(1)} s, hold ${HOLD_S} s`,
    );
    for (const line of describeRamp(run, figures, PODS)) console.log(line);
    console.log("the autoscaler's decisions:");
    for (const line of decisions) console.log(`  ${line}`);
    for (const [at, end, code, what] of figures.failures.slice(0, 20))
      console.log(
        `failed: +${((at - run.start) / 1000).toFixed(1)} s ${code} after ${Math.round(end - at)} ms: ${what}`,
      );
    const sec = (ms: number | undefined) => (ms === undefined ? 'never' : `${(ms / 1000).toFixed(1)} s`);
    report(
      {
        bench: 'node-autoscale-ramp',
        measure: `load start → ${PODS} ready pods`,
        value: sec(figures.toPodsMs),
      },
      {
        bench: 'node-autoscale-ramp',
        measure: 'p99 at full load (last 10 s)',
        value: `${figures.steadyP99Ms.toFixed(0)} ms`,
        baseline: `ramp ${figures.rampP99Ms.toFixed(0)} ms`,
        ratio: figures.steadyP99Ms / figures.rampP99Ms,
      },
      {
        bench: 'node-autoscale-ramp',
        measure: 'failed requests',
        value: `${figures.failures.length} of ${figures.requests}`,
        target: '0',
        met: figures.failures.length === 0,
      },
      { bench: 'node-autoscale-ramp', measure: 'load stop → 1 pod', value: sec(figures.toOnlyMinMs) },
    );
  } finally {
    await env.close();
  }
}

await main();
