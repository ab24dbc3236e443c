// Asynchronous invocation against synchronous /fn/, on `sless dev` (bin/sless.js): the same function,
// the same number of requests and clients. Sync: N POSTs to /fn/, 16 at a time, each answered by the
// function. Async: N POSTs to /fn-async/, 16 at a time, each answered 202 once its record is flushed
// to the state directory; end to end runs until every invocation has ended (the workers deliver 16 at
// a time, spec.async.concurrency). Reports end-to-end throughput as a ratio of the sync one, and the
// 202's latency (p50, p99).
// Run: npx tsc -p tsconfig.build.json && npx tsx bench/async-invocations.ts   (N=1000 by default)
import { rm } from 'node:fs/promises';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { closedLoop } from './closed-loop.js';
import { report } from './report.ts';
import { startSlessDev } from './sless-dev.ts';
import { ms, percentile } from './stats.ts';

const N = Number(process.env.N ?? 1000);
const CLIENTS = 16;
const pause = (time: number) => new Promise((r) => setTimeout(r, time));

async function main(): Promise<void> {
  const repo = await TestRepo.create({
    'echo/function.yaml': functionManifest('echo', { async: { concurrency: CLIENTS } }),
    'echo/handler.js': nodeHandler('return { ok: true, n: event.body.n };'),
  });
  const stateDir = await tempDir('bench-async');
  const sless = await startSlessDev({ repo: repo.dir, stateDir, functions: 1 });
  try {
    const post = (path: string, n: number, headers: Record<string, string> = {}) =>
      fetch(`${sless.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ n }),
      });
    for (let i = 0; ; i++) {
      const response = await post('/fn/default/echo', 0).catch(() => undefined);
      if (response?.status === 200) break;
      if (i > 1200) throw new Error('echo never served');
      await pause(100);
    }
    // Warm-up of both paths.
    await closedLoop(CLIENTS, 200, async (n) => void (await (await post('/fn/default/echo', n)).text()));

    let started = performance.now();
    await closedLoop(CLIENTS, N, async (n) => {
      const response = await post('/fn/default/echo', n);
      if (response.status !== 200) throw new Error(`sync: ${response.status}`);
      await response.text();
    });
    const syncSeconds = (performance.now() - started) / 1000;
    const syncRate = N / syncSeconds;

    const enqueue: number[] = [];
    started = performance.now();
    await closedLoop(CLIENTS, N, async (n) => {
      const sent = performance.now();
      const response = await post('/fn-async/default/echo', n);
      if (response.status !== 202) throw new Error(`async: ${response.status} ${await response.text()}`);
      await response.text();
      enqueue.push(performance.now() - sent);
    });
    const acceptedSeconds = (performance.now() - started) / 1000;
    const open = async (state: string) => {
      const response = await fetch(`${sless.url}/v1/namespaces/default/invocations?state=${state}&limit=1`);
      return ((await response.json()) as { items: unknown[] }).items.length;
    };
    while ((await open('queued')) + (await open('running')) > 0) await pause(20);
    const asyncSeconds = (performance.now() - started) / 1000;
    const asyncRate = N / asyncSeconds;
    const succeeded = await fetch(
      `${sless.url}/v1/namespaces/default/invocations?state=succeeded&limit=1000`,
    ).then(async (r) => ((await r.json()) as { items: unknown[] }).items.length);

    const p50 = percentile(enqueue, 50);
    const p99 = percentile(enqueue, 99);
    console.log(
      `sync /fn/: ${N} in ${syncSeconds.toFixed(2)} s = ${syncRate.toFixed(0)} req/s\n` +
        `async: ${N} accepted in ${acceptedSeconds.toFixed(2)} s (${(N / acceptedSeconds).toFixed(0)}/s), ` +
        `all ended in ${asyncSeconds.toFixed(2)} s = ${asyncRate.toFixed(0)} inv/s end to end ` +
        `(${succeeded} of the last 1000 succeeded)\n` +
        `202 latency: p50 ${ms(p50)}, p99 ${ms(p99)}`,
    );
    report(
      {
        bench: 'async-invocations',
        measure: 'async end-to-end throughput',
        value: `${asyncRate.toFixed(0)} inv/s`,
        baseline: `sync /fn/ ${syncRate.toFixed(0)} req/s`,
        ratio: asyncRate / syncRate,
      },
      { bench: 'async-invocations', measure: 'enqueue (202) p50', value: ms(p50) },
      { bench: 'async-invocations', measure: 'enqueue (202) p99', value: ms(p99) },
    );
  } finally {
    await sless.stop();
    await repo.remove();
    await rm(stateDir, { recursive: true, force: true });
  }
}

await main();
