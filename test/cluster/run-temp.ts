// Every temporary directory a test run makes lives under one directory of the run, which the run
// removes at its end. Tests make hundreds (repositories, caches, state directories); removing each
// in its own afterAll is easy to forget, and a killed run would leave them all behind. A later run
// removes the directory of a run whose process is gone.
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leftBehind } from '../../src/sandbox/stale.ts';

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
  for (const entry of readdirSync(host))
    if (leftBehind(entry, OWNED)) rmSync(join(host, entry), { recursive: true, force: true });
  const dir = mkdtempSync(join(host, `${PREFIX}${process.pid}-`));
  // Like /tmp itself: sandboxed function processes run under other uids and reach sockets in here.
  chmodSync(dir, 0o1777);
  process.env[HOST_TMPDIR_KEY] = host;
  process.env.TMPDIR = dir;
  return () => {
    rmSync(dir, { recursive: true, force: true });
    if (process.env.TMPDIR === dir) process.env.TMPDIR = host;
  };
}
