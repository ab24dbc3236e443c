// CPU profile of one one-function commit in a FUNCTIONS-function repository (default 1000): starts
// `node --cpu-prof bin/sless.js dev`, waits until every function
// serves, commits one handler change, waits until /fn/ serves it, stops sless and prints the window
// (ms since spawn; the profile starts a little later) to cut the profile at. SETTLE_MS (default
// 3000) pause after the first request. Run: PROF_DIR=/tmp/prof npx tsx bench/profile-one-change.ts
import { rm } from 'node:fs/promises';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { startSlessDev } from './sless-dev.ts';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
const PROF_DIR = process.env.PROF_DIR ?? '/tmp/sless-prof';
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const files: Record<string, string> = {};
for (let i = 0; i < FUNCTIONS; i++) {
  files[`functions/fn-${i}/function.yaml`] = functionManifest(`fn-${i}`);
  files[`functions/fn-${i}/handler.js`] = nodeHandler(`return 'fn-${i} v0';`);
}
const repo = await TestRepo.create(files);
const stateDir = await tempDir('prof-one-change');
const spawned = performance.now();
const sless = await startSlessDev({
  repo: repo.dir,
  stateDir,
  functions: FUNCTIONS,
  nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${PROF_DIR}`],
});
const url = sless.url;
const body = async (path: string) => {
  try {
    return await (await fetch(`${url}${path}`)).text();
  } catch {
    return '';
  }
};
for (;;) {
  const text = await body('/v1/namespaces/default/functions');
  try {
    const list = JSON.parse(text) as { items: { status?: { phase?: string } }[] };
    if (
      list.items.filter((f) => f.status?.phase === 'Ready' || f.status?.phase === 'ScaledToZero').length ===
      FUNCTIONS
    )
      break;
  } catch {}
  await pause(250);
}
console.log(`all serving at ${(performance.now() - spawned).toFixed(0)} ms`);
await body('/fn/default/fn-0');
await pause(Number(process.env.SETTLE_MS ?? 3000));
for (const [round, name] of [
  ['v1', 'fn-0'],
  ['v2', 'fn-0'],
  ['v1', `fn-${FUNCTIONS - 1}`],
] as const) {
  const from = performance.now();
  await repo.commit({ [`functions/${name}/handler.js`]: nodeHandler(`return '${name} ${round}';`) });
  while ((await body(`/fn/default/${name}`)) !== JSON.stringify(`${name} ${round}`)) await pause(5);
  const to = performance.now();
  console.log(
    `window ${name} ${round}: ${(from - spawned).toFixed(0)} ${(to - spawned).toFixed(0)} (${(to - from).toFixed(0)} ms)`,
  );
  await pause(1000);
}
await sless.stop();
await repo.remove();
await rm(stateDir, { recursive: true, force: true });
