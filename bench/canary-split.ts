// What a canary and a commit URL cost on the local platform, for a Node function without
// dependencies. Throughput of REQUESTS requests, CONCURRENCY at a time, while a canary splits the
// function 50/50 (the main thread picks each request's revision and counts its answer), against the
// same function before the canary in the same run (served by the proxy thread alone). Then the first
// request to `/fn/…@{sha}` of an older commit (its process starts for it) and the next ones, against
// a request to the serving revision. Median of RUNS. Run: npx tsx bench/canary-split.ts
import { Agent, request } from 'undici';
import { functionManifest, git, nodeHandler, TestRepo } from '../test/helpers/git.js';
import { eventually, startTestSystem } from '../test/helpers/local-system.js';
import { report } from './report.js';
import { median, ms } from './stats.js';

const REQUESTS = Number(process.env.REQUESTS ?? 4000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);
const RUNS = Number(process.env.RUNS ?? 3);

const agent = new Agent({ connections: CONCURRENCY, pipelining: 1 });

async function load(url: string): Promise<number> {
  let left = REQUESTS;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) {
        const response = await request(url, { dispatcher: agent });
        await response.body.dump();
        if (response.statusCode !== 200) throw new Error(`${url} answered ${response.statusCode}`);
      }
    }),
  );
  return (REQUESTS * 1000) / (performance.now() - started);
}

async function timed(url: string): Promise<number> {
  const started = performance.now();
  const response = await request(url, { dispatcher: agent });
  await response.body.dump();
  if (response.statusCode !== 200) throw new Error(`${url} answered ${response.statusCode}`);
  return performance.now() - started;
}

async function main(): Promise<void> {
  const manifest = functionManifest('c', {
    rollout: { canary: { steps: [50], stepSeconds: 3600, maxErrorRate: 0.5 } },
  });
  // `d` has no canary: its first commit's build is an older build once the second commit serves.
  const repo = await TestRepo.create({
    'c/function.yaml': manifest,
    'c/handler.js': nodeHandler(`return 'v1';`),
    'd/function.yaml': functionManifest('d'),
    'd/handler.js': nodeHandler(`return 'd1';`),
  });
  const first = await git(repo.dir, 'rev-parse', 'HEAD');
  const system = await startTestSystem({ url: repo.dir });
  const url = `${system.url}/fn/default/c`;
  await eventually(async () => (await system.functionStatus('c'))?.phase === 'Ready', 60_000, 'ready');
  await timed(url);

  const plain: number[] = [];
  for (let i = 0; i < RUNS; i++) plain.push(await load(url));

  await repo.commit({
    'c/handler.js': nodeHandler(`return 'v2';`),
    'd/handler.js': nodeHandler(`return 'd2';`),
  });
  await system.controller.syncNow('default', 'test');
  await eventually(
    async () => (await system.functionStatus('c'))?.canary?.phase === 'Progressing',
    60_000,
    'canary',
  );
  const split: number[] = [];
  for (let i = 0; i < RUNS; i++) split.push(await load(url));

  // Commit URLs: d's first build runs for its first request, then stays up.
  const d = `${system.url}/fn/default/d`;
  await eventually(
    async () => {
      const servingCommit = (await system.functionStatus('d'))?.servingCommit;
      return servingCommit !== undefined && servingCommit !== first;
    },
    60_000,
    'd2',
  );
  const serving: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < 20; i++) serving.push(await timed(d));
  const cold = await timed(`${d}@${first.slice(0, 12)}`);
  for (let i = 0; i < 20; i++) warm.push(await timed(`${d}@${first.slice(0, 12)}`));

  await system.close();
  await repo.remove();
  await agent.close();

  const plainRate = median(plain);
  const splitRate = median(split);
  console.log(`requests: ${REQUESTS} x ${RUNS}, ${CONCURRENCY} at a time`);
  console.log(`no canary (proxy thread):     ${Math.round(plainRate)} req/s`);
  console.log(
    `50/50 canary (main thread):   ${Math.round(splitRate)} req/s (${(splitRate / plainRate).toFixed(2)}x)`,
  );
  console.log(`commit URL, first request:    ${ms(cold)} (its process starts)`);
  console.log(`commit URL, warm (median):    ${ms(median(warm))}; serving revision ${ms(median(serving))}`);
  report(
    {
      bench: 'canary-split',
      measure: 'throughput during a 50/50 canary',
      value: `${Math.round(splitRate)} req/s`,
      baseline: `no canary ${Math.round(plainRate)} req/s`,
      ratio: splitRate / plainRate,
    },
    {
      bench: 'canary-split',
      measure: 'commit URL warm request (median)',
      value: ms(median(warm)),
      baseline: `serving revision ${ms(median(serving))}`,
      ratio: median(warm) / median(serving),
    },
    { bench: 'canary-split', measure: 'commit URL first request (process starts)', value: ms(cold) },
  );
}

void main();
