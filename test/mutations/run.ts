/**
 * `npm run mutate:guards [-- id ...]`: applies each hand-written mutation of test/mutations/list.ts,
 * one at a time, in a throwaway git worktree of HEAD (never in this checkout, which others may be
 * editing), runs the test files that must catch it, and reports caught or survived.
 *
 * Before any mutation, a baseline run of every listed test file without a mutation must pass: a test
 * that fails anyway proves nothing about a mutation. The run fails when an entry's `from` does not
 * occur exactly once in its file, when a mutated tree does not compile, when the baseline fails, or
 * when any mutation survives.
 *
 *   --uncommitted   copy this checkout's versions of test/mutations/ and of the listed test files into
 *                   the worktree (to try a new test before committing it); HEAD's otherwise.
 *   --keep          leave the worktree in place (its path is printed).
 *   --list          print the guard table (test/mutations/table.ts) and run nothing.
 *
 * The worktree's dist/ is compiled once, and again after each edit whose tests run compiled code (the
 * proxy thread, the CLI): a mutation of src/ must reach dist/ as well. A mutation that then does not
 * compile is reported as such, never as caught.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type GuardMutation, MUTATIONS } from './list.ts';
import { guardTable } from './table.ts';

const here = dirname(fileURLToPath(import.meta.url));
const checkout = resolve(here, '..', '..');
const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a.startsWith('--')));
const only = args.filter((a) => !a.startsWith('--'));
/** One test command may take this long before it counts as a failure (a hang is a catch too, but slow). */
const TEST_TIMEOUT_MS = Number(process.env.SLESS_MUTATE_TEST_TIMEOUT_MS ?? 600_000);

function say(line: string): void {
  process.stdout.write(`[mutate:guards] ${line}\n`);
}

/** Occurrences of `needle` in `text`, without regular expressions. */
function occurrences(text: string, needle: string): number {
  if (needle === '') return 0;
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count++;
  return count;
}

function git(...gitArgs: string[]): string {
  const run = spawnSync('git', gitArgs, { cwd: checkout, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`git ${gitArgs.join(' ')}: ${run.stderr.trim()}`);
  return run.stdout.trim();
}

interface Outcome {
  code: number | null;
  timedOut: boolean;
  output: string;
  failed: string[];
}

/** Runs a command in its own process group, so that a timeout ends everything it started. */
function run(command: string, commandArgs: string[], cwd: string, timeoutMs: number): Promise<Outcome> {
  return new Promise((done) => {
    const child = spawn(command, commandArgs, {
      cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' },
    });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-200_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    }, timeoutMs);
    current = child.pid;
    child.on('close', (code) => {
      clearTimeout(timer);
      current = undefined;
      done({ code, timedOut, output, failed: [] });
    });
  });
}

let current: number | undefined;
let worktree: string | undefined;

function cleanUp(): void {
  if (current) {
    try {
      process.kill(-current, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  if (worktree && !flags.has('--keep')) {
    spawnSync('git', ['worktree', 'remove', '--force', worktree], { cwd: checkout });
    rmSync(worktree, { recursive: true, force: true });
    spawnSync('git', ['worktree', 'prune'], { cwd: checkout });
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    cleanUp();
    process.exit(130);
  });

/** The names of failed tests in a vitest JSON report, "file > test". */
function failedTests(reportPath: string, root: string): string[] {
  if (!existsSync(reportPath)) return [];
  try {
    const report = JSON.parse(readFileSync(reportPath, 'utf8')) as {
      testResults?: {
        name: string;
        status: string;
        message?: string;
        assertionResults?: { fullName: string; status: string }[];
      }[];
    };
    return (report.testResults ?? []).flatMap((file) => {
      const name = file.name.startsWith(root) ? file.name.slice(root.length + 1) : file.name;
      const tests = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
      if (tests.length === 0 && file.status === 'failed') return [`${name} (the file failed to run)`];
      return tests.map((t) => `${name} > ${t.fullName}`);
    });
  } catch {
    return [];
  }
}

/**
 * The vitest projects (vitest.config.ts) that hold the test files: `node` for the suites on the real
 * node (test/e2e/, root only, one file at a time), `main` for the rest.
 */
function projectsOf(tests: string[]): string[] {
  const node = (test: string) => test.startsWith('test/e2e/') || test === 'test/cluster/node-cleanup.test.ts';
  return [...(tests.some((t) => !node(t)) ? ['main'] : []), ...(tests.some(node) ? ['node'] : [])];
}

async function vitest(root: string, tests: string[], timeoutMs = TEST_TIMEOUT_MS): Promise<Outcome> {
  const reportPath = join(root, '.mutate-report.json');
  rmSync(reportPath, { force: true });
  const outcome = await run(
    'npx',
    [
      'vitest',
      'run',
      ...projectsOf(tests).flatMap((project) => ['--project', project]),
      '--reporter=default',
      '--reporter=json',
      `--outputFile.json=${reportPath}`,
      ...tests,
    ],
    root,
    timeoutMs,
  );
  return { ...outcome, failed: failedTests(reportPath, root) };
}

async function compile(root: string): Promise<Outcome> {
  const server = await run('npx', ['tsc', '-p', 'tsconfig.build.json'], root, 300_000);
  if (server.code !== 0) return server;
  // The dashboard's scripts are served from dist/ui: a mutation of ui/ reaches the browser only so.
  const ui = await run('npx', ['tsc', '-p', 'ui/tsconfig.json'], root, 300_000);
  if (ui.code !== 0) return ui;
  return run('node', ['ui/copy-static.mjs'], root, 60_000);
}

/**
 * Whether the entry's tests run compiled code: the proxy thread (every startTestSystem that keeps
 * its default), the CLI (bin/sless.js) or a started sless or controller process. Otherwise vitest runs src/ itself
 * and compiling again would only cost time. `SLESS_MUTATE_COMPILE=1` compiles for every entry.
 */
function needsDist(root: string, m: GuardMutation): boolean {
  if (process.env.SLESS_MUTATE_COMPILE === '1' || m.file.startsWith('ui/')) return true;
  return m.tests.some((test) =>
    /startTestSystem|sless-process|controller-process|bin\/sless|Gateway\.start/.test(
      readFileSync(join(root, test), 'utf8'),
    ),
  );
}

function tail(text: string, lines = 40): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

async function main(): Promise<number> {
  if (flags.has('--list')) {
    process.stdout.write(guardTable(MUTATIONS, readFileSync(join(here, 'list.ts'), 'utf8')));
    return 0;
  }
  const selected: GuardMutation[] = only.length ? MUTATIONS.filter((m) => only.includes(m.id)) : MUTATIONS;
  const unknown = only.filter((id) => !MUTATIONS.some((m) => m.id === id));
  if (unknown.length) {
    say(`unknown mutation ids: ${unknown.join(', ')}`);
    return 2;
  }
  const ids = new Set<string>();
  for (const m of MUTATIONS) {
    if (ids.has(m.id)) throw new Error(`mutation id ${m.id} is listed twice`);
    ids.add(m.id);
  }

  const head = git('rev-parse', 'HEAD');
  worktree = mkdtempSync(join(tmpdir(), 'sless-mut-'));
  rmSync(worktree, { recursive: true, force: true });
  git('worktree', 'add', '--detach', worktree, head);
  symlinkSync(join(checkout, 'node_modules'), join(worktree, 'node_modules'), 'dir');
  say(`worktree ${worktree} at ${head.slice(0, 12)}`);
  if (flags.has('--uncommitted')) {
    const paths = new Set(['test/mutations', ...selected.flatMap((m) => m.tests)]);
    for (const path of paths) {
      if (!existsSync(join(checkout, path))) continue;
      mkdirSync(dirname(join(worktree, path)), { recursive: true });
      cpSync(join(checkout, path), join(worktree, path), { recursive: true });
    }
    say(`copied this checkout's ${[...paths].join(', ')}`);
  }

  // Every `from` must name exactly one place, in the tree that is mutated.
  const originals = new Map<string, string>();
  const mismatched: string[] = [];
  for (const m of selected) {
    const path = join(worktree, m.file);
    const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
    originals.set(m.file, text);
    const count = occurrences(text, m.from);
    if (count !== 1) mismatched.push(`${m.id}: \`from\` occurs ${count} times in ${m.file}`);
    for (const test of m.tests)
      if (!existsSync(join(worktree, test))) mismatched.push(`${m.id}: no test file ${test}`);
  }
  if (mismatched.length) {
    for (const line of mismatched) say(`ERROR ${line}`);
    return 1;
  }

  const built = await compile(worktree);
  if (built.code !== 0) {
    say(`the unmutated tree does not compile:\n${tail(built.output)}`);
    return 1;
  }
  const allTests = [...new Set(selected.flatMap((m) => m.tests))].sort();
  say(`baseline: ${allTests.length} test files without any mutation`);
  const startedBaseline = Date.now();
  const baseline = await vitest(worktree, allTests);
  if (baseline.code !== 0) {
    say(`BASELINE FAILED (exit ${baseline.code}${baseline.timedOut ? ', timed out' : ''}):`);
    for (const name of baseline.failed) say(`  failed: ${name}`);
    process.stdout.write(`${tail(baseline.output, 60)}\n`);
    return 1;
  }
  say(`baseline passed in ${Math.round((Date.now() - startedBaseline) / 1000)}s`);

  const results: {
    m: GuardMutation;
    verdict: 'caught' | 'SURVIVED' | 'NO-COMPILE';
    by: string[];
    s: number;
  }[] = [];
  for (const m of selected) {
    const path = join(worktree, m.file);
    const original = originals.get(m.file) ?? '';
    writeFileSync(
      path,
      original.replace(m.from, () => m.to),
    );
    const started = Date.now();
    const compiled = needsDist(worktree, m) ? await compile(worktree) : { code: 0, output: '' };
    let verdict: 'caught' | 'SURVIVED' | 'NO-COMPILE';
    let by: string[] = [];
    if (compiled.code !== 0) {
      verdict = 'NO-COMPILE';
      by = [tail(compiled.output, 5)];
    } else {
      const outcome = await vitest(worktree, m.tests, m.timeoutMs);
      verdict = outcome.code === 0 ? 'SURVIVED' : 'caught';
      by = outcome.timedOut ? ['(timed out)'] : outcome.failed;
    }
    writeFileSync(path, original);
    const s = Math.round((Date.now() - started) / 1000);
    results.push({ m, verdict, by, s });
    say(`${verdict.padEnd(10)} ${m.id} (${s}s)`);
    for (const name of by.slice(0, 5)) say(`             by ${name}`);
  }
  // The tree is back as it was; dist/ is not compiled again, the worktree goes away.
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], {
    cwd: worktree,
    encoding: 'utf8',
  }).stdout.trim();
  if (dirty && !flags.has('--uncommitted')) say(`WARNING: the worktree did not come back clean:\n${dirty}`);

  const caught = results.filter((r) => r.verdict === 'caught').length;
  const survived = results.filter((r) => r.verdict === 'SURVIVED');
  const broken = results.filter((r) => r.verdict === 'NO-COMPILE');
  say('');
  say('| id | verdict | caught by | s |');
  say('|---|---|---|---|');
  for (const r of results)
    say(`| ${r.m.id} | ${r.verdict} | ${r.verdict === 'caught' ? (r.by[0] ?? '') : ''} | ${r.s} |`);
  say('');
  say(
    `${results.length} mutations: ${caught} caught, ${survived.length} survived, ${broken.length} did not compile`,
  );
  return survived.length || broken.length ? 1 : 0;
}

let status = 1;
try {
  status = await main();
} catch (error) {
  say(`ERROR ${error instanceof Error ? error.message : String(error)}`);
} finally {
  cleanUp();
}
process.exit(status);
