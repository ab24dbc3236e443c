// Restart to serving with warm caches: `sless dev` (a real child process) is killed with SIGKILL and
// started again on the same state directory; measured from the spawn, and from the moment the API
// answers /healthz, to the moment every function answers 200 with its body. Three functions, a
// repository over smart HTTP (git http-backend). Median and p90 of RUNS (default 5) per scenario:
//
// - warm:           the state files and the builds from the last run are there;
// - warm, git down: the same while the git server answers 503 (serving must not wait for git);
// - baseline:       the builds are there but the state files are not, which is how every restart
//                   went before the state was kept: nothing serves until git is read and synced.
//
// /healthz is polled every 25 ms (SlessProcess), the functions every 2 ms.
// Run: npx tsx bench/restart-to-serving.ts
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, nodeHandler, tempDir } from '../test/helpers/git.js';
import { startRemoteRepo } from '../test/helpers/remote-repo.js';
import { SlessProcess } from '../test/helpers/sless-process.js';
import { median, ms, percentile } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 5);
const NAMES = ['one', 'two', 'three'];

async function allServing(sless: SlessProcess): Promise<boolean> {
  for (const name of NAMES) {
    const response = await sless.call(`/fn/default/${name}`).catch(() => undefined);
    if (!response) return false;
    const text = await response.text();
    if (response.status !== 200 || text !== `"${name}"`) return false;
  }
  return true;
}

interface Sample {
  toListening: number;
  toServing: number;
  listeningToServing: number;
}

async function main(): Promise<void> {
  const files: Record<string, string> = {};
  for (const name of NAMES) {
    files[`${name}/function.yaml`] = functionManifest(name);
    files[`${name}/handler.js`] = nodeHandler(`return '${name}';`);
  }
  const repo = await startRemoteRepo(files);
  const stateDir = await tempDir('bench-restart');
  const port = await freePort();
  const start = () => SlessProcess.start({ repo: repo.url, stateDir, port });
  let sless = await start();
  while (!(await allServing(sless))) await new Promise((r) => setTimeout(r, 20));

  const restart = async (): Promise<Sample> => {
    await sless.stop('SIGKILL');
    const spawned = performance.now();
    sless = await start();
    const listening = performance.now();
    while (!(await allServing(sless))) await new Promise((r) => setTimeout(r, 2));
    const serving = performance.now();
    return {
      toListening: listening - spawned,
      toServing: serving - spawned,
      listeningToServing: serving - listening,
    };
  };

  const scenarios: Record<string, Sample[]> = { warm: [], 'warm, git down': [], baseline: [] };
  for (let i = 0; i < RUNS; i++) {
    scenarios.warm?.push(await restart());
    repo.server.setAvailable(false);
    scenarios['warm, git down']?.push(await restart());
    repo.server.setAvailable(true);
    await sless.settled();
    await sless.stop('SIGKILL');
    await rm(join(stateDir, 'state'), { recursive: true, force: true });
    sless = await start();
    while (!(await allServing(sless))) await new Promise((r) => setTimeout(r, 20));
    // The baseline restarts from builds only: the state files are removed again right before it.
    await sless.stop('SIGKILL');
    await rm(join(stateDir, 'state'), { recursive: true, force: true });
    const spawned = performance.now();
    sless = await start();
    const listening = performance.now();
    while (!(await allServing(sless))) await new Promise((r) => setTimeout(r, 2));
    const serving = performance.now();
    scenarios.baseline?.push({
      toListening: listening - spawned,
      toServing: serving - spawned,
      listeningToServing: serving - listening,
    });
  }
  await sless.stop('SIGKILL');
  await repo.close();
  await rm(stateDir, { recursive: true, force: true });

  const row = (name: string, samples: Sample[]) => {
    const pick = (f: (s: Sample) => number) => samples.map(f);
    return `${name.padEnd(16)} spawn→listening ${ms(median(pick((s) => s.toListening)))}  spawn→serving ${ms(median(pick((s) => s.toServing)))} (p90 ${ms(
      percentile(
        pick((s) => s.toServing),
        90,
      ),
    )})  listening→serving ${ms(median(pick((s) => s.listeningToServing)))} (max ${ms(Math.max(...pick((s) => s.listeningToServing)))})`;
  };
  console.log(`restart to serving, ${NAMES.length} functions, median of ${RUNS} SIGKILL restarts`);
  for (const [name, samples] of Object.entries(scenarios)) console.log(row(name, samples));
  const warm = median((scenarios.warm ?? []).map((s) => s.toServing));
  const base = median((scenarios.baseline ?? []).map((s) => s.toServing));
  console.log(`ratio warm / baseline (spawn→serving): ${(warm / base).toFixed(2)}`);
}

await main();
