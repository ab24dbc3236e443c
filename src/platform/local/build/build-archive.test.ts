/**
 * LocalBuildArchive.list over a real state directory, with readdir recorded: listing one function reads
 * only that function's directory, and listing without a scope returns every function's builds.
 */
import * as fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LocalBuildArchive } from './build-archive.js';

/** Every directory the archive reads, so a test can say which ones a pass had to look at. */
const readDirs = vi.hoisted(() => [] as string[]);
vi.mock('node:fs/promises', async (original) => {
  const real = await original<typeof import('node:fs/promises')>();
  return {
    ...real,
    readdir: (path: string, options: never) => {
      readDirs.push(String(path));
      return real.readdir(path, options);
    },
  };
});

async function archiveWith(builds: Record<string, string[]>) {
  const stateDir = await fs.mkdtemp(join(tmpdir(), 'sless-build-archive-'));
  for (const [fn, keys] of Object.entries(builds))
    for (const key of keys) {
      const dir = join(stateDir, 'builds', 'default', fn, key);
      await fs.mkdir(dir, { recursive: true });
      await fs.writeFile(
        join(dir, 'build.json'),
        JSON.stringify({ buildKey: key, commit: 'c', result: 'Succeeded' }),
      );
    }
  const archive = new LocalBuildArchive({
    stateDir,
    builder: { isBuilding: () => false, activeStaging: () => new Set() },
    servingDirs: () => new Set(),
    limit: 10,
    logger: pino({ level: 'silent' }),
  });
  return { stateDir, archive };
}

describe('LocalBuildArchive', () => {
  const made: string[] = [];
  afterEach(async () => {
    for (const dir of made.splice(0)) await fs.rm(dir, { recursive: true, force: true });
  });

  it('lists one function without reading any other function’s directory', async () => {
    const { stateDir, archive } = await archiveWith({ a: ['a1', 'a2'], b: ['b1'], c: ['c1'] });
    made.push(stateDir);
    readDirs.length = 0;
    const builds = await archive.list({ namespace: 'default', name: 'a' });
    expect(builds.map((b) => [b.name, b.buildKey]).sort()).toEqual([
      ['a', 'a1'],
      ['a', 'a2'],
    ]);
    expect(readDirs).toEqual([join(stateDir, 'builds', 'default', 'a')]);
  });

  it('lists every function’s builds without a scope', async () => {
    const { stateDir, archive } = await archiveWith({ a: ['a1'], b: ['b1', 'b2'] });
    made.push(stateDir);
    const builds = await archive.list();
    expect(builds.map((b) => `${b.namespace}/${b.name}/${b.buildKey}`).sort()).toEqual([
      'default/a/a1',
      'default/b/b1',
      'default/b/b2',
    ]);
  });
});
