// Start-up of `sless dev` with a warm build cache (the second start on the same state directory):
// from spawning `node bin/sless.js dev` to its port accepting connections ("listening"), and to every
// cached function answering through /fn/ ("serving"). Baseline in the same run: `node -e` starting a
// bare node:http server, spawn → listening. Median of RUNS (default 7).
// Run: npx tsx bench/startup.ts   (FUNCTIONS=4 by default)
// BASELINE_ROOT=/path/to/another/checkout (compiled) also starts that checkout's sless in every round,
// on its own state directory, so a change is measured against what it replaces in the same run.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { ensureCompiled } from './compiled.ts';
import { accepts } from './net.ts';
import { report } from './report.ts';
import { median, ms } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 7);
const FUNCTIONS = Number(process.env.FUNCTIONS ?? 4);

const pause = (msecs: number) => new Promise((r) => setTimeout(r, msecs));

async function until(what: string, child: ChildProcess, check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 60_000;
  while (!(await check())) {
    if (child.exitCode !== null) throw new Error(`${what}: the process exited with ${child.exitCode}`);
    if (performance.now() > deadline) throw new Error(`${what}: not within 60 s`);
    await pause(2);
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

async function allServing(port: number, names: string[]): Promise<boolean> {
  for (const name of names) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/fn/default/${name}`);
      await response.arrayBuffer();
      if (response.status !== 200) return false;
    } catch {
      return false;
    }
  }
  return true;
}

async function startSless(repo: string, stateDir: string, names: string[], root = PACKAGE_ROOT) {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin', 'sless.js'),
      'dev',
      '--repo',
      repo,
      '--port',
      String(port),
      '--state-dir',
      stateDir,
      '--json',
    ],
    { stdio: 'ignore', env: { ...process.env, SLESS_LOG_LEVEL: 'warn' } },
  );
  try {
    await until('listening', child, () => accepts(port));
    const listening = performance.now() - started;
    await until('serving', child, () => allServing(port, names));
    return { listening, serving: performance.now() - started };
  } finally {
    await stop(child);
  }
}

async function bareNode(): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(
    process.execPath,
    ['-e', `require('node:http').createServer((q, s) => s.end()).listen(${port}, '127.0.0.1')`],
    { stdio: 'ignore' },
  );
  try {
    await until('bare node listening', child, () => accepts(port));
    return performance.now() - started;
  } finally {
    await stop(child);
  }
}

const names = Array.from({ length: FUNCTIONS }, (_, i) => `fn-${i}`);
const files: Record<string, string> = {};
for (const name of names) {
  files[`${name}/function.yaml`] = functionManifest(name);
  files[`${name}/handler.js`] = nodeHandler(`return '${name}';`);
}
const repo = await TestRepo.create(files);
const stateDir = await tempDir('bench-startup');
const baselineRoot = process.env.BASELINE_ROOT;
const baselineStateDir = await tempDir('bench-startup-baseline');
try {
  ensureCompiled();
  await startSless(repo.dir, stateDir, names); // fills the build cache
  if (baselineRoot) await startSless(repo.dir, baselineStateDir, names, baselineRoot);
  const listening: number[] = [];
  const serving: number[] = [];
  const bare: number[] = [];
  const baselineServing: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    bare.push(await bareNode());
    const run = await startSless(repo.dir, stateDir, names);
    listening.push(run.listening);
    serving.push(run.serving);
    if (baselineRoot)
      baselineServing.push((await startSless(repo.dir, baselineStateDir, names, baselineRoot)).serving);
  }
  const base = median(bare);
  const l = median(listening);
  const s = median(serving);
  console.log(`sless dev, warm build cache, ${FUNCTIONS} Node functions, median of ${RUNS}:`);
  console.log(`  spawn → listening          ${ms(l)}  (${(l / base).toFixed(1)}x bare node)`);
  console.log(`  spawn → all ${FUNCTIONS} serving     ${ms(s)}  (${(s / base).toFixed(1)}x bare node)`);
  console.log(`  bare node -e http server   ${ms(base)}`);
  if (baselineRoot) {
    const b = median(baselineServing);
    console.log(
      `  ${baselineRoot}: spawn → all ${FUNCTIONS} serving ${ms(b)}; this checkout ÷ it: ${(s / b).toFixed(2)}`,
    );
  }
  report(
    {
      bench: 'startup',
      measure: 'sless dev (warm cache) spawn → listening',
      value: ms(l),
      baseline: `bare node -e ${ms(base)}`,
      ratio: l / base,
      target: '< 300 ms',
      met: l < 300,
    },
    {
      bench: 'startup',
      measure: `sless dev (warm cache) spawn → all ${FUNCTIONS} functions serving`,
      value: ms(s),
      baseline: `bare node -e ${ms(base)}`,
      ratio: s / base,
      target: '< 1000 ms',
      met: s < 1000,
    },
  );
} finally {
  await repo.remove();
  await rm(stateDir, { recursive: true, force: true });
  await rm(baselineStateDir, { recursive: true, force: true });
}
