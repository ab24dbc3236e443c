// Every temporary directory a test run makes lives under one directory of the run, which the run
// removes at its end. Tests make hundreds (repositories, caches, state directories); removing each
// in its own afterAll is easy to forget, and a killed run would leave them all behind. A later run
// removes the directory of a run whose process is gone.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { leftBehind } from '../../src/core/left-behind.ts';

const PREFIX = 'sless-tests-';
const OWNED = /^sless-tests-(\d+)-/;

/** Where the machine's own temporary directory is, for what must not move into the run's. */
export const HOST_TMPDIR_KEY = 'SLESS_TEST_HOST_TMPDIR';

/**
 * Points TMPDIR (read by `os.tmpdir()` in this process and in the workers it starts) at a new
 * directory of this run; returns what removes it.
 */
export function enterRunTempDir(): () => void {
  const host = process.env[HOST_TMPDIR_KEY] ?? tmpdir();
  for (const entry of readdirSync(host)) if (leftBehind(entry, OWNED)) removeRunDir(join(host, entry));
  const dir = mkdtempSync(join(host, `${PREFIX}${process.pid}-`));
  // Like /tmp itself: sandboxed function processes run under other uids and reach sockets in here.
  chmodSync(dir, 0o1777);
  process.env[HOST_TMPDIR_KEY] = host;
  process.env.TMPDIR = dir;
  return () => {
    removeRunDir(dir);
    if (process.env.TMPDIR === dir) process.env.TMPDIR = host;
  };
}

/**
 * Removes a run's directory, and first every bubblewrap sandbox still bound to something in it: a
 * test that kills sless with -9 mid-build can leave the sandbox's outer bwrap behind, reparented to
 * init and waiting for ever (seen once in a CI run), and the run must leave no process behind.
 */
export function removeRunDir(dir: string): void {
  for (const pid of sandboxesUnder(dir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

/** bwrap processes with an argument inside `dir`, and every process under them. */
export function sandboxesUnder(dir: string): number[] {
  const children = new Map<number, number[]>();
  const sandboxes: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let argv: string[];
    let ppid: number;
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      // The parent pid is the second field after the command name, which may hold spaces.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      continue;
    }
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
    if (basename(argv[0] ?? '') === 'bwrap' && argv.some((arg) => arg === dir || arg.startsWith(`${dir}/`)))
      sandboxes.push(pid);
  }
  const all: number[] = [];
  const visit = (pid: number) => {
    if (all.includes(pid)) return;
    all.push(pid);
    for (const child of children.get(pid) ?? []) visit(child);
  };
  for (const pid of sandboxes) visit(pid);
  return all;
}
