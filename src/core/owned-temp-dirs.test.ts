/**
 * OwnedTempDirs.removeAll on real directories: it removes what is left and waits for a removal already
 * under way, as a stopping platform's exit listeners start them.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { OwnedTempDirs } from './owned-temp-dirs.js';

it('removeAll removes what is left and waits for removals already under way', async () => {
  const root = await mkdtemp(join(tmpdir(), 'owned-temp-dirs-'));
  try {
    const dirs = new OwnedTempDirs('sless-test-', root);
    const [leaving, staying] = [await dirs.create(), await dirs.create()];
    // An exit listener's removal, started and not awaited, as a stopping platform's are.
    void dirs.remove(leaving);
    await dirs.removeAll();
    expect([existsSync(leaving), existsSync(staying)]).toEqual([false, false]);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
