// /fn/ through an API-server outage on the real node (test/cluster/node.ts; root only): the outage of
// test/e2e/api-outage.test.ts once, with its figures. Three always-on functions get an open-loop load
// of 20 requests a second each through the controller's /fn/ proxy (test/e2e/outage-load.ts):
// BEFORE_S (default 30) seconds with the API server up, OUTAGE_S (default 60) with kube-apiserver
// SIGKILLed (etcd keeps the data), its restart, and AFTER_S (default 30) once it answers again.
// Printed, per phase: requests sent, failed, p50 and p99 of the right answers; the p99 while the API
// server was down against before, as a ratio.
// Run: npx tsx bench/node-api-outage.ts

import { servedBody, startE2e } from '../test/e2e/harness.ts';
import { describePhases, failed, openLoad } from '../test/e2e/outage-load.ts';
import { percentile } from '../test/e2e/ramp.ts';
import { functionManifest, nodeHandler } from '../test/helpers/git.js';
import { report } from './report.ts';

const BEFORE_S = Number(process.env.BEFORE_S ?? 30);
const OUTAGE_S = Number(process.env.OUTAGE_S ?? 60);
const AFTER_S = Number(process.env.AFTER_S ?? 30);
const FUNCTIONS = ['alpha', 'beta', 'gamma'];
const hello = (name: string) => `"hello":"${name}"`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const files: Record<string, string> = {};
  for (const fn of FUNCTIONS) {
    files[`${fn}/function.yaml`] = functionManifest(fn);
    files[`${fn}/handler.js`] = nodeHandler(`return { hello: '${fn}' };`);
  }
  const env = await startE2e('bench', files);
  try {
    await Promise.all(FUNCTIONS.map((fn) => servedBody(env, fn, hello(fn), 600_000)));
    const load = openLoad(env, FUNCTIONS, { intervalMs: 50, timeoutMs: 30_000, expected: hello });
    await sleep(BEFORE_S * 1000);
    load.setPhase('down');
    const killedAt = Date.now();
    await env.node.apiServer.kill();
    await sleep(OUTAGE_S * 1000);
    load.setPhase('restart');
    await env.node.apiServer.restart();
    const backMs = Date.now() - killedAt;
    load.setPhase('after');
    await sleep(AFTER_S * 1000);
    await load.stop();

    const phases = ['before', 'down', 'restart', 'after'];
    console.log(`API server down ${OUTAGE_S} s, answering again ${backMs} ms after the kill`);
    for (const line of describePhases(load.records, phases)) console.log(line);
    const p99 = (phase: string) =>
      percentile(
        load.records.filter((r) => r.phase === phase && !failed(r)).map((r) => r.ended - r.sent),
        99,
      );
    const of = (phase: string) => load.records.filter((r) => r.phase === phase);
    const outage = [...of('down'), ...of('restart')];
    const outageFailed = outage.filter(failed).length;
    for (const r of load.records.filter(failed).slice(0, 20))
      console.log(
        `failed: ${r.fn} ${r.phase} +${((r.sent - killedAt) / 1000).toFixed(1)} s: ${r.status} ${r.wrong}`,
      );
    report(
      {
        bench: 'node-api-outage',
        measure: 'failed /fn/ requests while the API server was down or restarting',
        value: `${outageFailed} of ${outage.length}`,
        target: '0',
        met: outageFailed === 0,
      },
      {
        bench: 'node-api-outage',
        measure: 'p99 while the API server was down',
        value: `${p99('down')} ms`,
        baseline: `before ${p99('before')} ms`,
        ratio: p99('down') / p99('before'),
      },
      {
        bench: 'node-api-outage',
        measure: 'failed /fn/ requests after the restart',
        value: `${of('after').filter(failed).length} of ${of('after').length}`,
        target: '0',
        met: of('after').filter(failed).length === 0,
      },
    );
  } finally {
    await env.close();
  }
}

await main();
