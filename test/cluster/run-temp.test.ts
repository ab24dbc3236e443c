import { existsSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enterRunTempDir, HOST_TMPDIR_KEY } from './run-temp.ts';

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
});
