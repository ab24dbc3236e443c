/**
 * The per-run temporary directory of the test workers: it holds this worker's temporary directories
 * inside the machine's, it goes when the run leaves, a killed run's is removed by the next, and a real
 * bubblewrap sandbox left bound to it is stopped, with the command under it, before it is removed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { MINIMAL_BWRAP_ROOT } from '../helpers/bwrap-root.ts';
import { enterRunTempDir, HOST_TMPDIR_KEY, removeRunDir, sandboxesUnder } from './run-temp.ts';

describe('the test run temporary directory', () => {
  it('is where this worker makes temporary directories, inside the machine one', () => {
    const host = process.env[HOST_TMPDIR_KEY];
    expect(host).toBeDefined();
    expect(dirname(tmpdir())).toBe(host);
    expect(basename(tmpdir())).toMatch(/^sless-tests-\d+-/);
    expect(statSync(tmpdir()).mode & 0o7777).toBe(0o1777);
  });

  it('is removed when left, and a dead run’s directory is removed by the next run', () => {
    const saved = { tmp: process.env.TMPDIR, host: process.env[HOST_TMPDIR_KEY] };
    // A run killed with -9: its pid is gone, its directory stays until the next run starts.
    const dead = join(tmpdir(), 'sless-tests-999999999-x');
    mkdirSync(join(dead, 'repo'), { recursive: true });
    process.env[HOST_TMPDIR_KEY] = tmpdir();
    try {
      const leave = enterRunTempDir();
      const mine = tmpdir();
      expect(existsSync(dead)).toBe(false);
      expect(existsSync(mine)).toBe(true);
      mkdirSync(join(mine, 'sless-repo-abc'));
      leave();
      expect(existsSync(mine)).toBe(false);
    } finally {
      process.env.TMPDIR = saved.tmp;
      process.env[HOST_TMPDIR_KEY] = saved.host;
    }
  });

  it('stops a bubblewrap sandbox left bound to the directory before removing it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sless-tests-sandbox-'));
    mkdirSync(join(dir, 'work'));
    // A real bwrap with a command under it and nothing left to end them (a minimal root, not the
    // builder's full sandbox: what counts here is a bwrap argument inside the directory).
    const sandbox = spawn(
      'bwrap',
      [...MINIMAL_BWRAP_ROOT, '--bind', join(dir, 'work'), '/work', '--', 'sleep', '600'],
      { stdio: 'ignore', detached: true },
    );
    const exited = new Promise<number | null>((resolve) =>
      sandbox.once('exit', (code, signal) => resolve(signal ? -1 : code)),
    );
    // The positive signal first: it runs, and it is found with the command it runs.
    const found = await vi.waitFor(() => {
      const pids = sandboxesUnder(dir);
      expect(pids[0]).toBe(sandbox.pid);
      expect(pids).toHaveLength(2);
      return pids;
    });
    const command = found[1] as number;
    removeRunDir(dir);
    expect(await exited).toBe(-1);
    expect(existsSync(dir)).toBe(false);
    // The command under it is gone too (killed, then reaped by init).
    await vi.waitFor(() =>
      expect(
        existsSync(`/proc/${command}/cmdline`) && readFileSync(`/proc/${command}/cmdline`, 'utf8'),
      ).toBeFalsy(),
    );
  });
});
