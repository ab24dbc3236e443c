/**
 * Package caches survive a change of mode: a user who first ran sless unsandboxed (bubblewrap not yet
 * installed, or `--sandbox off`) and then with the sandbox has a cache directory that sless's own
 * user made, and the sandboxed build, which runs as the namespace's own user, must still write there.
 */

import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { functionManifest, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, TEST_BUILD_CACHE, type TestSystem } from '../helpers/local-system.js';

const goHandler = (word: string) => `package handler

import (
	"context"

	sless "sless.dev/runtime"
)

func Handle(ctx context.Context, event sless.Event) (any, error) {
	return map[string]string{"word": "${word}"}, nil
}
`;

function goFunction(name: string, word: string): Record<string, string> {
  return {
    [`${name}/function.yaml`]: functionManifest(name, { runtime: 'go1.21', entrypoint: 'handler.Handle' }),
    [`${name}/handler/handler.go`]: goHandler(word),
  };
}

describe('build caches across sandbox modes', () => {
  let system: TestSystem | undefined;
  afterAll(async () => {
    await system?.close();
  });

  it('a Go build runs sandboxed on a cache that an unsandboxed run created', {
    timeout: 600_000,
  }, async () => {
    const cacheDir = await tempDir('build-cache');
    const repo = await TestRepo.create(goFunction('go-first', 'unsandboxed'));

    system = await startTestSystem({ url: repo.dir, sandbox: 'off', buildCacheDir: cacheDir });
    await eventually(
      async () => (await system?.functionStatus('go-first'))?.phase === 'Ready',
      300_000,
      'go-first Ready',
    );
    expect(await (await system.call('/fn/default/go-first')).json()).toEqual({ word: 'unsandboxed' });
    expect((await system.functionStatus('go-first'))?.isolation).toMatch(/^NOT sandboxed/);
    await system.close();
    system = undefined;

    // What the unsandboxed run left: the namespace's cache, owned by sless's own user. A warm Go build
    // cache copied in as that user (when the shared test cache has one) spares a cold standard
    // library build, and is owned as an unsandboxed Go would have left it.
    const namespaceCache = join(cacheDir, 'default');
    expect((await stat(namespaceCache)).uid).toBe(process.getuid?.());
    const warm = join(TEST_BUILD_CACHE, 'default', 'go-build');
    if (existsSync(warm)) await cp(warm, join(namespaceCache, 'go-build'), { recursive: true });
    else await mkdir(join(namespaceCache, 'go-build'));

    // Go disables a cache it cannot write and builds on without it: only new entries show it was used.
    const cached = async () => (await readdir(join(namespaceCache, 'go-build'), { recursive: true })).length;
    const entriesBefore = await cached();

    await repo.commit(goFunction('go-second', 'sandboxed'));
    system = await startTestSystem({ url: repo.dir, buildCacheDir: cacheDir });
    await system.controller.syncNow('default', 'test');
    const status = await eventually(
      async () => {
        const s = await system?.functionStatus('go-second');
        return s?.phase === 'Ready' || s?.phase === 'Failed' ? s : undefined;
      },
      540_000,
      'go-second built',
    );
    expect(status.phase, JSON.stringify(status.conditions)).toBe('Ready');
    expect(await (await system.call('/fn/default/go-second')).json()).toEqual({ word: 'sandboxed' });
    expect(status.isolation).toMatch(/^sandboxed \(bubblewrap/);
    expect(await cached()).toBeGreaterThan(entriesBefore);
  });
});
