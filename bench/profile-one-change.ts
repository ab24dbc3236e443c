// CPU profile of one one-function commit in a FUNCTIONS-function repository (default 1000): starts
// `node --cpu-prof bin/sless.js dev` of ROOT (default this checkout), waits until every function
// serves, commits one handler change, waits until /fn/ serves it, stops sless and prints the window
// (ms since spawn) to cut the profile at. Run: PROF_DIR=/tmp/prof npx tsx bench/profile-one-change.ts
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
const ROOT = process.env.ROOT ?? PACKAGE_ROOT;
const PROF_DIR = process.env.PROF_DIR ?? '/tmp/sless-prof';
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const files: Record<string, string> = {};
for (let i = 0; i < FUNCTIONS; i++) {
  files[`functions/fn-${i}/function.yaml`] = functionManifest(`fn-${i}`);
  files[`functions/fn-${i}/handler.js`] = nodeHandler(`return 'fn-${i} v0';`);
}
const repo = await TestRepo.create(files);
const stateDir = await tempDir('prof-one-change');
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const spawned = performance.now();
const child = spawn(
  process.execPath,
  [
    `--cpu-prof`,
    `--cpu-prof-dir=${PROF_DIR}`,
    join(ROOT, 'bin', 'sless.js'),
    'dev',
    '--repo',
    repo.dir,
    '--port',
    String(port),
    '--state-dir',
    stateDir,
    '--scale-to-zero-after',
    '5m',
    '--json',
  ],
  {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      SLESS_LOG_LEVEL: 'warn',
      SLESS_QUOTA_FUNCTIONS: String(FUNCTIONS + 10),
      SLESS_QUOTA_PROCESSES: String(FUNCTIONS + 10),
    },
  },
);
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
const exited = once(child, 'exit');
child.kill('SIGTERM');
await exited;
await repo.remove();
await rm(stateDir, { recursive: true, force: true });
