/**
 * Limits a tenant's repository runs into, on the real local system: the function quota refuses a
 * commit as a whole, the process quota keeps functions past it built but stopped, a YAML alias bomb
 * is refused naming its file, and an oversized manifest blob is refused by its size.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FunctionStatus, GitSourceStatus } from '../../src/core/resources.js';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

let repo: TestRepo;
let system: TestSystem;

const fn = (name: string) => ({
  [`${name}/function.yaml`]: functionManifest(name),
  [`${name}/handler.js`]: nodeHandler(`return '${name}';`),
});

beforeAll(async () => {
  repo = await TestRepo.create({ ...fn('one') });
  system = await startTestSystem({
    url: repo.dir,
    env: { SLESS_QUOTA_FUNCTIONS: '3', SLESS_QUOTA_PROCESSES: '2' },
  });
  await eventually(async () => (await bodyOf(system, '/fn/default/one')).text === '"one"', 30_000, 'deploy');
});

afterAll(async () => {
  await system?.close();
  await repo?.remove();
});

async function rejectedWith(commit: string): Promise<string> {
  return eventually(
    async () => {
      const status = (await system.sourceStatus()) as GitSourceStatus | undefined;
      const ready = status?.conditions?.find((c) => c.type === 'Ready');
      return status?.lastAttemptedCommit === commit && ready?.status === 'False' ? ready.message : undefined;
    },
    30_000,
    'the commit to be rejected',
  );
}

describe('repository limits', () => {
  test('a commit past the function quota is refused whole; what runs keeps running', async () => {
    const commit = await repo.commit({ ...fn('two'), ...fn('three'), ...fn('four') });
    const message = await rejectedWith(commit);
    expect(message).toContain(
      'quota: namespace default may hold 3 functions; this commit defines 4 (SLESS_QUOTA_FUNCTIONS)',
    );
    expect(await system.store.get('Function', 'default', 'two')).toBeUndefined();
    expect((await bodyOf(system, '/fn/default/one')).text).toBe('"one"');
  });

  test('past the process quota a function is built but not started, and says why', async () => {
    await repo.commit({ 'four/function.yaml': null, 'four/handler.js': null });
    const third = await eventually(
      async () => {
        const statuses = await Promise.all(['one', 'two', 'three'].map((n) => system.functionStatus(n)));
        const refused = statuses.filter((s) => s?.conditions?.some((c) => c.reason === 'QuotaExceeded'));
        const ready = statuses.filter((s) => s?.phase === 'Ready');
        return refused.length === 1 && ready.length === 2 ? (refused[0] as FunctionStatus) : undefined;
      },
      60_000,
      'two running and one refused',
    );
    expect(third.lastError).toContain('already runs 2 of its 2 processes');
    expect(third.lastBuild?.result).toBe('Succeeded');
  });

  test('a YAML alias bomb is refused naming its file, and nothing else breaks', async () => {
    const bomb = [
      'apiVersion: sless.dev/v1alpha1',
      'kind: Function',
      'metadata: {name: bomb}',
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      ...Array.from(
        { length: 12 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10)
            .fill(`*${String.fromCharCode(97 + i)}`)
            .join(', ')}]`,
      ),
    ].join('\n');
    const commit = await repo.commit({ 'bomb/function.yaml': `${bomb}\n` });
    const message = await rejectedWith(commit);
    expect(message).toContain('bomb/function.yaml#0: invalid YAML');
    expect(message).toContain('at most 100 aliases');
    expect((await bodyOf(system, '/fn/default/one')).text).toBe('"one"');
    await repo.commit({ 'bomb/function.yaml': null });
  });

  test('a manifest blob over 1 MiB is refused by its header size, naming the file', async () => {
    const size = 8 * 1024 * 1024;
    const big = `apiVersion: sless.dev/v1alpha1\nkind: Function\n# ${'x'.repeat(size - 50)}\n`;
    const commit = await repo.commit({ 'big/function.yaml': big });
    const message = await rejectedWith(commit);
    expect(message).toContain(
      `big/function.yaml#0: file is ${Buffer.byteLength(big)} bytes; YAML files under the source path may be at most 1048576 bytes`,
    );
    expect((await bodyOf(system, '/fn/default/one')).text).toBe('"one"');
    await repo.commit({ 'big/function.yaml': null });
  });
});
