// Start-up of `sless dev` with a warm build cache (the second start on the same state directory):
// from spawning `node bin/sless.js dev` to its port accepting connections ("listening"), and to every
// cached function answering 200 through /fn/ ("serving"), with the time between broken down by
// phase (sless writes a time stamp per phase to SLESS_STARTUP_MARKS: state load, sandbox probe,
// each runtime's spawn, socket, /healthz and route). Baseline in the same run: `node -e` starting a
// bare node:http server, spawn → listening. Median of RUNS (default 7).
// Run: npx tsx bench/startup.ts
//   default: the 4 functions of examples-repo/ (Node ×2, Python, Go), as `npm start` serves them;
//   FUNCTIONS=n: n generated Node functions instead.
// BASELINE_ROOT=/path/to/another/checkout (compiled) also starts that checkout's sless in every round,
// on its own state directory, so a change is measured against what it replaces in the same run.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { ensureCompiled } from './compiled.ts';
import { accepts } from './net.ts';
import { report } from './report.ts';
import { median, ms } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 7);
const GENERATED = process.env.FUNCTIONS ? Number(process.env.FUNCTIONS) : undefined;

const now = () => performance.timeOrigin + performance.now();
const pause = (msecs: number) => new Promise((r) => setTimeout(r, msecs));

async function until(what: string, child: ChildProcess, check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 120_000;
  while (!(await check())) {
    if (child.exitCode !== null) throw new Error(`${what}: the process exited with ${child.exitCode}`);
    if (performance.now() > deadline) throw new Error(`${what}: not within 120 s`);
    await pause(2);
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

/**
 * Epoch ms of the function's first 200. A request sent before the function serves is held by sless
 * until it does, so one request usually measures it; another is sent only after an answer that is not 200.
 */
async function firstOk(child: ChildProcess, port: number, name: string): Promise<number> {
  let at = 0;
  await until(`${name} serving`, child, async () => {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/fn/default/${name}`);
      await response.arrayBuffer();
      at = now();
      return response.status === 200;
    } catch {
      return false;
    }
  });
  return at;
}

interface Mark {
  phase: string;
  subject?: string;
  at: number;
}

/** One start: every time relative to the spawn, in ms. */
interface Start {
  listening: number;
  serving: number;
  /** `phase` or `phase subject` → ms after spawn (the first such mark). */
  phases: Map<string, number>;
}

async function startSless(
  args: string[],
  stateDir: string,
  names: string[],
  root = PACKAGE_ROOT,
): Promise<Start> {
  const port = await freePort();
  const marksFile = join(stateDir, `startup-marks-${port}.jsonl`);
  const spawned = now();
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin', 'sless.js'),
      'dev',
      ...args,
      '--port',
      String(port),
      '--state-dir',
      stateDir,
      '--json',
    ],
    {
      stdio: 'ignore',
      env: { ...process.env, SLESS_LOG_LEVEL: 'warn', SLESS_STARTUP_MARKS: marksFile },
    },
  );
  try {
    await until('listening', child, () => accepts(port));
    const listening = now() - spawned;
    const served = await Promise.all(names.map((name) => firstOk(child, port, name)));
    const phases = new Map<string, number>();
    names.forEach((name, i) => {
      phases.set(`first 200 default/${name}`, (served[i] as number) - spawned);
    });
    let text = '';
    try {
      text = await readFile(marksFile, 'utf8');
    } catch {}
    for (const line of text.split('\n').filter(Boolean)) {
      const mark = JSON.parse(line) as Mark;
      const key = mark.subject ? `${mark.phase} ${mark.subject}` : mark.phase;
      if (!phases.has(key)) phases.set(key, mark.at - spawned);
    }
    await rm(marksFile, { force: true });
    return { listening, serving: Math.max(...served) - spawned, phases };
  } finally {
    await stop(child);
  }
}

async function bareNode(): Promise<number> {
  const port = await freePort();
  const started = now();
  const child = spawn(
    process.execPath,
    ['-e', `require('node:http').createServer((q, s) => s.end()).listen(${port}, '127.0.0.1')`],
    { stdio: 'ignore' },
  );
  try {
    await until('bare node listening', child, () => accepts(port));
    return now() - started;
  } finally {
    await stop(child);
  }
}

/** The functions and the `sless dev` arguments that serve them. */
async function workload(): Promise<{ names: string[]; args: string[]; remove: () => Promise<void> }> {
  if (GENERATED === undefined) {
    // No --repo: sless makes its git repository of examples-repo/ in the state directory, as `npm start`.
    const names = readdirSync(join(PACKAGE_ROOT, 'examples-repo', 'functions')).sort();
    return { names, args: [], remove: async () => undefined };
  }
  const names = Array.from({ length: GENERATED }, (_, i) => `fn-${i}`);
  const files: Record<string, string> = {};
  for (const name of names) {
    files[`${name}/function.yaml`] = functionManifest(name);
    files[`${name}/handler.js`] = nodeHandler(`return '${name}';`);
  }
  const repo = await TestRepo.create(files);
  return { names, args: ['--repo', repo.dir], remove: () => repo.remove() };
}

/** Phases in the order a start goes through them, each with its median (ms after spawn). */
const GLOBAL_PHASES = [
  'cli',
  'listening',
  'main loaded',
  'state loaded',
  'sandbox probed',
  'restored launched',
  'serving path loaded',
  'proxy attached',
];
const PER_FUNCTION = ['spawn', 'socket', 'healthy', 'routed', 'first 200'];
const AFTER = ['restored', 'control plane loading', 'control plane loaded', 'ready'];

function medianOf(starts: Start[], key: string): number {
  const values = starts.map((s) => s.phases.get(key)).filter((v): v is number => v !== undefined);
  return values.length === starts.length ? median(values) : Number.NaN;
}

function printBreakdown(starts: Start[], names: string[]): void {
  const cell = (v: number) => (Number.isNaN(v) ? '—' : v.toFixed(0)).padStart(8);
  console.log('  phase (ms after spawn, median)');
  for (const phase of GLOBAL_PHASES) console.log(`    ${phase.padEnd(28)}${cell(medianOf(starts, phase))}`);
  console.log(`    ${'per function:'.padEnd(28)}${PER_FUNCTION.map((p) => p.padStart(10)).join('')}`);
  for (const name of names)
    console.log(
      `    ${name.padEnd(28)}${PER_FUNCTION.map((p) => `  ${cell(medianOf(starts, `${p} default/${name}`))}`).join('')}`,
    );
  for (const phase of AFTER) console.log(`    ${phase.padEnd(28)}${cell(medianOf(starts, phase))}`);
}

const { names, args, remove } = await workload();
const stateDir = await tempDir('bench-startup');
const baselineRoot = process.env.BASELINE_ROOT;
const baselineStateDir = await tempDir('bench-startup-baseline');
try {
  ensureCompiled();
  await startSless(args, stateDir, names); // fills the build cache
  if (baselineRoot) await startSless(args, baselineStateDir, names, baselineRoot);
  const starts: Start[] = [];
  const bare: number[] = [];
  const baselineServing: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    bare.push(await bareNode());
    starts.push(await startSless(args, stateDir, names));
    if (baselineRoot)
      baselineServing.push((await startSless(args, baselineStateDir, names, baselineRoot)).serving);
  }
  const base = median(bare);
  const l = median(starts.map((s) => s.listening));
  const s = median(starts.map((s) => s.serving));
  const what = GENERATED === undefined ? 'the 4 examples-repo functions' : `${names.length} Node functions`;
  console.log(`sless dev, warm build cache, ${what}, median of ${RUNS}:`);
  console.log(`  spawn → listening          ${ms(l)}  (${(l / base).toFixed(1)}x bare node)`);
  console.log(`  spawn → all ${names.length} serving     ${ms(s)}  (${(s / base).toFixed(1)}x bare node)`);
  console.log(`  bare node -e http server   ${ms(base)}`);
  printBreakdown(starts, names);
  if (baselineRoot) {
    const b = median(baselineServing);
    console.log(
      `  ${baselineRoot}: spawn → all ${names.length} serving ${ms(b)}; this checkout ÷ it: ${(s / b).toFixed(2)}`,
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
      measure: `sless dev (warm cache) spawn → all ${names.length} functions serving`,
      value: ms(s),
      baseline: `bare node -e ${ms(base)}`,
      ratio: s / base,
      target: '< 1000 ms',
      met: s < 1000,
    },
  );
} finally {
  await remove();
  await rm(stateDir, { recursive: true, force: true });
  await rm(baselineStateDir, { recursive: true, force: true });
}
