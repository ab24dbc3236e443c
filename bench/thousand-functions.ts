// A thousand functions on the local platform: a generated repository of FUNCTIONS (default 1000) Node
// functions without dependencies, served by `node bin/sless.js dev --scale-to-zero-after 5m`.
// Measures the first sync (spawn → every Function Ready, → the first request served), one-function
// commits to serving (a parked function, and one that is running), and the memory of sless and of all
// its runtime processes. Baseline in the same run: the same one-function commit in a 4-function
// repository. ROUNDS (default 3) one-function commits of each kind; medians. Run: npx tsx bench/thousand-functions.ts
import { readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../test/helpers/git.js';
import { ensureCompiled } from './compiled.ts';
import { cpuSeconds } from './proc-stat.ts';
import { report } from './report.ts';
import { type Sless, startSlessDev } from './sless-dev.ts';
import { median, ms } from './stats.js';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
/** One-function commits per kind (running, parked) and scenario; the median is reported. */
const ROUNDS = Number(process.env.ROUNDS ?? 3);
// Each round parks a function not touched before (the last ones, counting down), and the 4-function
// baseline has only three besides fn-0; a round past them would commit to a function that does not exist
// and wait for it for ever.
if (!(Number.isInteger(ROUNDS) && ROUNDS >= 1 && ROUNDS <= 3))
  throw new Error(
    `ROUNDS must be 1, 2 or 3 (the 4-function baseline has 3 functions to park); got ${process.env.ROUNDS}`,
  );
const pause = (msecs: number) => new Promise((r) => setTimeout(r, msecs));
const IDLE_MS = 30_000;

/** Resident memory of a process and all its descendants, in MB, from /proc. */
function treeRssMb(root: number): { self: number; children: number; processes: number } {
  const parentOf = new Map<number, number>();
  const rss = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parentOf.set(Number(entry), Number(fields[1]));
      rss.set(Number(entry), (Number(fields[21]) * 4096) / 1024 / 1024);
    } catch {}
  }
  const inTree = (pid: number): boolean => {
    for (let p = parentOf.get(pid); p !== undefined && p > 1; p = parentOf.get(p))
      if (p === root) return true;
    return false;
  };
  let children = 0;
  let processes = 0;
  for (const [pid, mb] of rss)
    if (inTree(pid)) {
      children += mb;
      processes++;
    }
  return { self: rss.get(root) ?? 0, children, processes };
}

async function json<T>(url: string): Promise<T> {
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
  return (await response.json()) as T;
}

async function bodyOf(url: string): Promise<string> {
  try {
    const response = await fetch(url);
    return await response.text();
  } catch {
    return '';
  }
}

function files(count: number, version: (i: number) => string): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < count; i++) {
    out[`functions/fn-${i}/function.yaml`] = functionManifest(`fn-${i}`);
    out[`functions/fn-${i}/handler.js`] = nodeHandler(`return 'fn-${i} ${version(i)}';`);
  }
  return out;
}

async function until(what: string, sless: Sless, check: () => Promise<boolean>, everyMs: number) {
  const deadline = performance.now() + 30 * 60_000;
  while (!(await check())) {
    if (sless.child.exitCode !== null) throw new Error(`${what}: sless exited with ${sless.child.exitCode}`);
    if (performance.now() > deadline) throw new Error(`${what}: not within 30 minutes`);
    await pause(everyMs);
  }
}

async function readyCount(sless: Sless): Promise<number> {
  try {
    const list = await json<{ items: { status?: { phase?: string } }[] }>(
      `${sless.url}/v1/namespaces/default/functions`,
    );
    // A parked function serves too (its phase is ScaledToZero).
    return list.items.filter((f) => f.status?.phase === 'Ready' || f.status?.phase === 'ScaledToZero').length;
  } catch {
    return -1;
  }
}

/** CPU time (user + system) sless itself has used, in ms; its runtimes are not counted. */
function cpuMs(pid: number): number {
  return cpuSeconds(pid) * 1000;
}

/**
 * Commit a new body for one function and time until /fn/ serves it. Also the CPU time sless spent
 * meanwhile: on a loaded machine wall time mostly measures the queue for a core, CPU time the work.
 */
async function commitToServing(
  sless: Sless,
  repo: TestRepo,
  name: string,
  tag: string,
): Promise<{ wall: number; cpu: number }> {
  const cpuBefore = cpuMs(sless.child.pid ?? 0);
  const started = performance.now();
  await repo.commit({ [`functions/${name}/handler.js`]: nodeHandler(`return '${name} ${tag}';`) });
  const expected = JSON.stringify(`${name} ${tag}`);
  await until(
    `${name} ${tag}`,
    sless,
    async () => (await bodyOf(`${sless.url}/fn/default/${name}`)) === expected,
    5,
  );
  return { wall: performance.now() - started, cpu: cpuMs(sless.child.pid ?? 0) - cpuBefore };
}

async function scenario(count: number) {
  const repo = await TestRepo.create(files(count, () => 'v0'));
  const stateDir = await tempDir('bench-thousand');
  const sless = await startSlessDev({ repo: repo.dir, stateDir, functions: count });
  try {
    const started = performance.now();
    await until('all Ready', sless, async () => (await readyCount(sless)) === count, count > 10 ? 250 : 10);
    const allReady = performance.now() - started;
    const afterSync = treeRssMb(sless.child.pid ?? 0);
    const firstCall = performance.now();
    const body = await bodyOf(`${sless.url}/fn/default/fn-0`);
    if (body !== JSON.stringify('fn-0 v0')) throw new Error(`fn-0 answered ${body}`);
    const firstRequest = performance.now() - firstCall;
    // fn-0 runs now (idle stop after 5 min); the last functions are parked, a new one each round.
    // Rounds are 2 s apart, so what one commit leaves running (build GC) is not timed in the next.
    const runningTimes: { wall: number; cpu: number }[] = [];
    const parkedTimes: { wall: number; cpu: number }[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      runningTimes.push(await commitToServing(sless, repo, 'fn-0', `v${round}`));
      await pause(2000);
      parkedTimes.push(await commitToServing(sless, repo, `fn-${count - round}`, `v${round}`));
      await pause(2000);
    }
    const running = median(runningTimes.map((t) => t.wall));
    const parked = median(parkedTimes.map((t) => t.wall));
    const runningCpu = median(runningTimes.map((t) => t.cpu));
    const parkedCpu = median(parkedTimes.map((t) => t.cpu));
    const each = (times: { wall: number; cpu: number }[]) =>
      times.map((t) => `${ms(t.wall)} (cpu ${t.cpu} ms)`).join(', ');
    console.error(`${count} functions: running ${each(runningTimes)}; parked ${each(parkedTimes)}`);
    const end = treeRssMb(sless.child.pid ?? 0);
    // What a quiet sless keeps: V8 gives back heap pages only after some idle time (its memory
    // reducer), so right after the commits RSS still holds their garbage.
    await pause(IDLE_MS);
    const idle = treeRssMb(sless.child.pid ?? 0);
    return { allReady, firstRequest, running, parked, runningCpu, parkedCpu, afterSync, end, idle };
  } finally {
    await sless.stop();
    await repo.remove();
    await rm(stateDir, { recursive: true, force: true });
  }
}

ensureCompiled();
const small = await scenario(4);
const big = await scenario(FUNCTIONS);
const mb = (x: number) => `${x.toFixed(0)} MB`;
console.log(
  `${FUNCTIONS} Node functions, sless dev --scale-to-zero-after 5m (baseline: 4 functions, same run)`,
);
console.table({
  'spawn → all Ready': { [FUNCTIONS]: ms(big.allReady), 4: ms(small.allReady) },
  'first request (lazy start)': { [FUNCTIONS]: ms(big.firstRequest), 4: ms(small.firstRequest) },
  [`commit → serving, running fn (median of ${ROUNDS})`]: {
    [FUNCTIONS]: ms(big.running),
    4: ms(small.running),
  },
  [`commit → serving, parked fn (median of ${ROUNDS})`]: { [FUNCTIONS]: ms(big.parked), 4: ms(small.parked) },
  'sless CPU per commit, running fn': { [FUNCTIONS]: ms(big.runningCpu), 4: ms(small.runningCpu) },
  'sless CPU per commit, parked fn': { [FUNCTIONS]: ms(big.parkedCpu), 4: ms(small.parkedCpu) },
  'sless RSS after sync': { [FUNCTIONS]: mb(big.afterSync.self), 4: mb(small.afterSync.self) },
  'runtimes RSS after sync': { [FUNCTIONS]: mb(big.afterSync.children), 4: mb(small.afterSync.children) },
  'sless RSS at end': { [FUNCTIONS]: mb(big.end.self), 4: mb(small.end.self) },
  [`sless RSS ${IDLE_MS / 1000} s idle after`]: { [FUNCTIONS]: mb(big.idle.self), 4: mb(small.idle.self) },
  'runtimes at end (count, RSS)': {
    [FUNCTIONS]: `${big.end.processes}, ${mb(big.end.children)}`,
    4: `${small.end.processes}, ${mb(small.end.children)}`,
  },
});
report(
  {
    bench: 'thousand-functions',
    measure: `first sync of ${FUNCTIONS} functions: spawn → all Ready`,
    value: ms(big.allReady),
    baseline: `4 functions ${ms(small.allReady)}`,
    ratio: big.allReady / small.allReady,
  },
  {
    bench: 'thousand-functions',
    measure: `one-function commit → serving (running fn, ${FUNCTIONS} functions)`,
    value: ms(big.running),
    baseline: `4 functions ${ms(small.running)}`,
    ratio: big.running / small.running,
    target: '< 1000 ms',
    met: big.running < 1000,
  },
  {
    bench: 'thousand-functions',
    measure: `one-function commit → serving (parked fn, lazy start, ${FUNCTIONS} functions)`,
    value: ms(big.parked),
    baseline: `4 functions ${ms(small.parked)}`,
    ratio: big.parked / small.parked,
    target: '< 1000 ms',
    met: big.parked < 1000,
  },
  {
    bench: 'thousand-functions',
    measure: `memory, sless + runtimes (${big.end.processes} running) after the changes`,
    value: mb(big.end.self + big.end.children),
    baseline: `4 functions ${mb(small.end.self + small.end.children)}`,
    ratio: (big.end.self + big.end.children) / (small.end.self + small.end.children),
    target: 'a few hundred MB',
    met: big.end.self + big.end.children < 500,
  },
  {
    bench: 'thousand-functions',
    measure: `memory, sless + runtimes (${big.idle.processes} running), ${IDLE_MS / 1000} s idle after the changes`,
    value: mb(big.idle.self + big.idle.children),
    baseline: `4 functions ${mb(small.idle.self + small.idle.children)}`,
    ratio: (big.idle.self + big.idle.children) / (small.idle.self + small.idle.children),
    target: 'a few hundred MB',
    met: big.idle.self + big.idle.children < 500,
  },
);
