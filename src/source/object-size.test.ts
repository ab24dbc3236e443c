/**
 * ObjectSizeReader on a real git repository: every blob sized as `git cat-file -s` sizes it, loose and
 * again after `git gc` packed them with deltas, and an unknown object has no size.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { git, TestRepo } from '../../test/helpers/git.js';
import { ObjectSizeReader } from './object-size.js';

/** Every blob of a real repository: loose, then packed with deltas (git gc), sized as git sizes them. */
describe('ObjectSizeReader', () => {
  let repo: TestRepo;
  const contents: Record<string, string> = {
    'small.yaml': 'a: 1\n',
    'zeros.yaml': '0'.repeat(3 * 1024 * 1024),
    'random.txt': Array.from({ length: 4000 }, (_, i) => `${i}:${Math.sin(i)}`).join('\n'),
  };

  beforeAll(async () => {
    repo = await TestRepo.create(contents);
    // A second version of each file makes the packed copies deltas of each other.
    await repo.commit(Object.fromEntries(Object.entries(contents).map(([k, v]) => [k, `${v}\nmore`])));
  });
  afterAll(() => repo?.remove());

  const blobs = async () => {
    const listing = await git(repo.dir, 'rev-list', '--objects', '--all');
    const oids = listing.split('\n').map((line) => line.split(' ')[0] as string);
    const out: Array<{ oid: string; size: number }> = [];
    for (const oid of oids)
      if ((await git(repo.dir, 'cat-file', '-t', oid)) === 'blob')
        out.push({ oid, size: Number(await git(repo.dir, 'cat-file', '-s', oid)) });
    return out;
  };

  test('loose and packed (delta) objects: the same size git reports', async () => {
    const loose = await blobs();
    expect(loose.length).toBe(6);
    const reader = new ObjectSizeReader(`${repo.dir}/.git`);
    for (const { oid, size } of loose) expect(await reader.size(oid)).toBe(size);
    await git(repo.dir, 'gc', '--quiet', '--aggressive');
    const packed = new ObjectSizeReader(`${repo.dir}/.git`);
    const deltas = await git(repo.dir, 'verify-pack', '-v', ...(await packIndexes()));
    expect(deltas).toMatch(/ blob .* [0-9a-f]{40}$/m); // at least one blob stored as a delta
    for (const { oid, size } of loose) expect(await packed.size(oid)).toBe(size);
    expect(await packed.size('0'.repeat(40))).toBeUndefined();
  });

  async function packIndexes(): Promise<string[]> {
    const { readdir } = await import('node:fs/promises');
    const dir = `${repo.dir}/.git/objects/pack`;
    return (await readdir(dir)).filter((n) => n.endsWith('.idx')).map((n) => `${dir}/${n}`);
  }
});
