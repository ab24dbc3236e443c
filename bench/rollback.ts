// Instant rollback: from `POST …/sources/{name}/pin` (an earlier commit) to the first proxied response
// that carries that commit's body, for a Node function without dependencies; the pin is then removed
// and the head served again before the next run. Median of RUNS (default 5).
// Baseline in the same run: a new commit with new code (commit → serving, which builds), the path a
// "revert" commit would take without pinning. Run: npx tsx bench/rollback.ts
import { request } from 'undici';
import { functionManifest, git, nodeHandler, TestRepo } from '../test/helpers/git.js';
import { startTestSystem } from '../test/helpers/local-system.js';
import { median, ms, percentile } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 5);

async function bodyOf(url: string): Promise<string> {
  const response = await request(url);
  return response.body.text();
}

async function until(url: string, body: string): Promise<void> {
  while ((await bodyOf(url)) !== body) await new Promise((r) => setTimeout(r, 2));
}

async function main(): Promise<void> {
  const repo = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return 'first';`),
  });
  const first = await git(repo.dir, 'rev-parse', 'HEAD');
  // Every run pins the first commit again: its build must outlive more commits than the default
  // history limit keeps, or the later runs would measure a rebuild instead of a pin.
  const system = await startTestSystem({ url: repo.dir, env: { SLESS_BUILD_HISTORY: String(RUNS + 2) } });
  const url = `${system.url}/fn/default/hello`;
  const pinUrl = `${system.url}/v1/namespaces/default/sources/test/pin`;
  await until(url, '"first"');

  const newCommit: number[] = [];
  const pin: number[] = [];
  for (let i = 1; i <= RUNS; i++) {
    let started = performance.now();
    await repo.commit({ 'hello/handler.js': nodeHandler(`return 'v${i}';`) });
    await until(url, `"v${i}"`);
    newCommit.push(performance.now() - started);

    started = performance.now();
    const pinned = await request(pinUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ commit: first }),
    });
    await pinned.body.dump();
    if (pinned.statusCode !== 200) throw new Error(`pin answered ${pinned.statusCode}`);
    await until(url, '"first"');
    pin.push(performance.now() - started);

    const unpinned = await request(pinUrl, { method: 'DELETE' });
    await unpinned.body.dump();
    await until(url, `"v${i}"`);
  }
  const builds = await system.buildCount('hello');
  await system.close();
  await repo.remove();

  const p = median(pin);
  const base = median(newCommit);
  console.log(
    `pin an earlier commit → its body served, ${RUNS} runs: median ${ms(p)}, p90 ${ms(percentile(pin, 90))}, max ${ms(Math.max(...pin))}`,
  );
  console.log(`baseline (new commit with new code → serving): median ${ms(base)}`);
  console.log(`builds: ${builds} for ${RUNS + 1} distinct code trees (pins built nothing)`);
  console.log(
    `ratio pin / new commit: ${(p / base).toFixed(2)}x; target: about a second -> ${p < 1000 ? 'met' : 'missed'}`,
  );
}

await main();
