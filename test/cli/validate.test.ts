/**
 * `sless validate [dir]` run as users run it: the real CLI (bin/sless.js) as a child process over a
 * working tree on disk, checked by its output lines and exit code. The last test commits the same
 * broken tree and compares with what the controller writes into the GitSource status.
 */
import { execFile } from 'node:child_process';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endOfLifeWarning } from '../../src/core/runtimes.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem } from '../helpers/local-system.js';
import { testToolchainEnv } from '../runtimes/harness.ts';

const CLI = resolve('bin/sless.js');

function runValidate(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return runValidateWith(process.env, ...args);
}

function runValidateWith(
  env: NodeJS.ProcessEnv,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [CLI, 'validate', ...args], { env }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

async function writeTree(root: string, files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), content);
  }
}

const BROKEN: Record<string, string> = {
  'a/function.yaml': [
    'apiVersion: sless.dev/v1alpha1',
    'kind: Function',
    'metadata: { name: Alpha }',
    'spec: { runtime: ruby, entrypoint: handler.handle, memoryMb: 5000 }',
    '---',
    'apiVersion: sless.dev/v1alpha1',
    'kind: Trigger',
    'metadata: { name: every }',
    'spec: { type: cron, function: b, schedule: "not a schedule" }',
    '',
  ].join('\n'),
  'b/function.yaml': functionManifest('b', { source: { path: '../..' } }),
  'c/fn.yml': 'apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: {name: c\n',
  'd/function.yaml': functionManifest('d', { timeout: 3 }),
  'e/function.yaml': `${functionManifest('e')}---\napiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata: {name: j}\nspec: {function: missing}\n`,
  // Not ours: ignored, as the controller ignores it.
  'ci/workflow.yaml': 'on: push\njobs: {}\n',
  'e/node_modules/pkg/bad.yaml': 'apiVersion: sless.dev/v1alpha1\nkind: Nope\n',
};

const BROKEN_LINES = [
  'a/function.yaml#0 metadata.name: must be a DNS-1123 label (lowercase letters, digits and "-")',
  'a/function.yaml#0 spec.runtime: must be one of: nodejs20, python3.11, go1.21, nodejs22, nodejs24, python3.12, python3.13, go1.25, go1.26, go1.27',
  'a/function.yaml#0 spec.memoryMb: must be <= 4096',
  "a/function.yaml#1 spec.schedule: invalid cron schedule: CronPattern: invalid configuration format ('not a schedule'), exactly five, six, or seven space separated parts are required.",
  'b/function.yaml#0 spec.source.path: must stay inside the repository',
  'c/fn.yml#0: invalid YAML at line 4: Flow map in block collection must be sufficiently indented and end with a } at line 4, column 1:',
  'd/function.yaml#0 spec.timeout: unknown field',
  'e/function.yaml#1 spec.function: function "missing" is not defined in this repository',
];

// Each CLI run starts Node with tsx's loader: seconds on a busy machine, so the tests get a budget that
// fits several runs (a budget, not a timed assertion).
describe('sless validate', { timeout: 240_000 }, () => {
  let dir: string;

  beforeAll(async () => {
    dir = await tempDir('validate');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('accepts the examples repository with exit code 0 and a summary', async () => {
    const result = await runValidate('examples-repo');
    expect(result.stderr).toBe('');
    // Past their end of life, nodejs20 and go1.21 are warned about, never refused.
    expect(
      result.stdout
        .split('\n')
        .filter(
          (l) => !/^warning: .* spec\.runtime: runtime (nodejs20|go1\.21) is past its end of life/.test(l),
        ),
    ).toEqual([
      `7 documents valid (5 Function, 1 Trigger, 1 FunctionJob) in ${resolve('examples-repo')}`,
      '',
    ]);
    expect(result.stdout).toMatch(
      /^warning: functions\/hello-node\/function\.yaml#0 spec\.runtime: runtime nodejs20 is past its end of life \(2026-04-30\): it still builds and runs, but gets no upstream fixes; move to nodejs22 or nodejs24$/m,
    );
    expect(result.code).toBe(0);
  });

  it('prints every problem as file#doc field: reason and exits 1', async () => {
    const tree = join(dir, 'broken');
    await writeTree(tree, BROKEN);
    const result = await runValidate(tree);
    expect(result.stdout.trimEnd().split('\n')).toEqual(BROKEN_LINES);
    expect(result.code).toBe(1);
  });

  it('defaults to the current directory and honours --path', async () => {
    const tree = join(dir, 'paths');
    await writeTree(tree, {
      'functions/ok/function.yaml': functionManifest('ok'),
      'functions/ok/handler.js': nodeHandler('return 1;'),
      'other/bad.yaml': 'apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: {name: bad}\nspec: {}\n',
    });
    const whole = await new Promise<{ code: number; stdout: string }>((done) => {
      execFile(process.execPath, [CLI, 'validate'], { cwd: tree }, (error, stdout) =>
        done({ code: error ? Number(error.code) : 0, stdout }),
      );
    });
    expect(whole.stdout).toBe(
      'other/bad.yaml#0 spec.runtime: is required\nother/bad.yaml#0 spec.entrypoint: is required\n',
    );
    expect(whole.code).toBe(1);
    const scoped = await runValidate(tree, '--path', 'functions');
    expect(scoped.stdout.split('\n')[0]).toBe(`1 documents valid (1 Function) in ${tree}`);
    expect(scoped.code).toBe(0);
  });

  it("warns, without failing, when this machine lacks a runtime's toolchain for the local platform", async () => {
    const tree = join(dir, 'toolchains');
    await writeTree(tree, {
      'new/function.yaml': functionManifest('new', { runtime: 'nodejs24' }),
      'new/handler.js': nodeHandler('return 1;'),
    });
    // A PATH with no other node than the one running the CLI, and no SLESS_NODE24_BINARY.
    const { SLESS_NODE24_BINARY: _unset, ...env } = process.env;
    const bare = { ...env, PATH: dirname(process.execPath) };
    const missing = await runValidateWith(bare, tree);
    expect(missing.stdout.split('\n')).toEqual([
      `1 documents valid (1 Function) in ${tree}`,
      `warning: new/function.yaml#0 spec.runtime: the local platform cannot run it here: runtime nodejs24 needs Node.js 24 on this machine: set SLESS_NODE24_BINARY to its node binary or put node24 on PATH (found node: ${process.versions.node})`,
      '',
    ]);
    expect(missing.code).toBe(0);
    // The same tree where the toolchain is there: no warning at all (nodejs24 is supported).
    // The real Node.js 24 that test/pretest.sh unpacks from npm.
    const node24 = testToolchainEnv().SLESS_NODE24_BINARY;
    if (!node24) throw new Error('no Node.js 24 in ~/.cache/sless/toolchains: run test/pretest.sh');
    const found = await runValidateWith({ ...bare, SLESS_NODE24_BINARY: node24 }, tree);
    expect(found.stdout).toBe(`1 documents valid (1 Function) in ${tree}\n`);
  });

  it('warns about the Go lines past their end of life and says what a missing or too old go needs', async () => {
    const tree = join(dir, 'go');
    const lines = ['go1.21', 'go1.25', 'go1.26', 'go1.27'] as const;
    const files: Record<string, string> = {};
    for (const runtime of lines) {
      const name = `g${runtime.slice(2).replace('.', '')}`;
      files[`${name}/function.yaml`] = functionManifest(name, { runtime, entrypoint: 'handler.Handle' });
      files[`${name}/handler.go`] = 'package handler\n';
    }
    await writeTree(tree, files);
    const where = (runtime: (typeof lines)[number]) =>
      `warning: g${runtime.slice(2).replace('.', '')}/function.yaml#0 spec.runtime:`;
    // The words and dates are pinned by src/core/runtimes.test.ts; here, the day the test runs.
    const today = new Date().toISOString().slice(0, 10);
    const endOfLife = (runtime: (typeof lines)[number]) => {
      const eol = endOfLifeWarning(runtime, today);
      return eol ? [`${where(runtime)} ${eol}`] : [];
    };
    const valid = `4 documents valid (4 Function) in ${tree}`;

    // This machine's go builds every line (itself, or the pinned release through GOTOOLCHAIN).
    const here = await runValidate(tree);
    expect(here.stdout.split('\n')).toEqual([valid, ...lines.flatMap(endOfLife), '']);
    expect(here.stdout).toMatch(/spec\.runtime: runtime go1\.25 is past its end of life \(2026-08-31\)/);
    expect(here.code).toBe(0);

    // A PATH with no go on it, inside the suite's directory (removed with it).
    const noGo = join(dir, 'path-without-go');
    await mkdir(noGo);
    const missing = await runValidateWith({ ...process.env, PATH: noGo }, tree);
    const pinnedFetch = (line: string, pinned: string) =>
      `needs Go ${line} (or any Go from 1.21 on, which fetches ${pinned} through GOTOOLCHAIN) on this machine`;
    const cannot = 'the local platform cannot run it here: runtime';
    expect(missing.stdout.split('\n')).toEqual([
      valid,
      ...endOfLife('go1.21'),
      `${where('go1.21')} ${cannot} go1.21 needs Go on this machine: put go on PATH`,
      ...endOfLife('go1.25'),
      `${where('go1.25')} ${cannot} go1.25 ${pinnedFetch('1.25', 'go1.25.4')}: put go on PATH`,
      ...endOfLife('go1.26'),
      `${where('go1.26')} ${cannot} go1.26 ${pinnedFetch('1.26', 'go1.26.11')}: put go on PATH`,
      ...endOfLife('go1.27'),
      `${where('go1.27')} ${cannot} go1.27 ${pinnedFetch('1.27', 'go1.27.4')}: put go on PATH`,
      '',
    ]);
    expect(missing.code).toBe(0);

    // A go from before toolchain switching: go1.21 builds with it, the newer lines cannot.
    await writeFile(join(noGo, 'go'), '#!/bin/sh\necho "go version go1.20.14 linux/amd64"\n', {
      mode: 0o755,
    });
    const old = await runValidateWith({ ...process.env, PATH: noGo }, tree);
    expect(old.stdout.split('\n')).toEqual([
      valid,
      ...endOfLife('go1.21'),
      ...endOfLife('go1.25'),
      `${where('go1.25')} ${cannot} go1.25 ${pinnedFetch('1.25', 'go1.25.4')}: found go 1.20.14`,
      ...endOfLife('go1.26'),
      `${where('go1.26')} ${cannot} go1.26 ${pinnedFetch('1.26', 'go1.26.11')}: found go 1.20.14`,
      ...endOfLife('go1.27'),
      `${where('go1.27')} ${cannot} go1.27 ${pinnedFetch('1.27', 'go1.27.4')}: found go 1.20.14`,
      '',
    ]);
    expect(old.code).toBe(0);
  });

  it('checks metadata.namespace only when --namespace names the source namespace', async () => {
    const tree = join(dir, 'namespaced');
    await writeTree(tree, {
      'function.yaml':
        'apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: {name: n, namespace: shop}\nspec: {runtime: nodejs20, entrypoint: h.handle}\n',
    });
    expect((await runValidate(tree)).code).toBe(0);
    const wrong = await runValidate(tree, '--namespace', 'default');
    expect(wrong.stdout).toBe(
      'function.yaml#0 metadata.namespace: must be omitted or "default" (the source\'s namespace)\n',
    );
    expect(wrong.code).toBe(1);
    expect((await runValidate(tree, '--namespace', 'shop')).code).toBe(0);
  });

  it('never follows a symlink out of the tree', async () => {
    const outside = join(dir, 'outside');
    await writeTree(outside, { 'evil.yaml': BROKEN['a/function.yaml'] as string });
    const tree = join(dir, 'linked');
    await writeTree(tree, { 'f/function.yaml': functionManifest('f') });
    await symlink(join(outside, 'evil.yaml'), join(tree, 'f/linked.yaml'));
    await symlink(outside, join(tree, 'linked-dir'));
    const result = await runValidate(tree);
    expect(result.stdout.split('\n')[0]).toBe(`1 documents valid (1 Function) in ${tree}`);
    expect(result.code).toBe(0);
  });

  it('refuses a missing directory and extra arguments with exit code 2', async () => {
    const missing = await runValidate(join(dir, 'nope'));
    expect(missing.stderr).toContain(`sless: ${join(dir, 'nope')} is not a directory`);
    expect(missing.code).toBe(2);
    expect((await runValidate('a', 'b')).code).toBe(2);
    expect((await runValidate('--bogus')).code).toBe(2);
  });

  it('reports exactly what the controller reports for the same commit', async () => {
    const repo = await TestRepo.create(BROKEN);
    const system = await startTestSystem({ url: repo.dir });
    try {
      const status = await eventually(
        async () => {
          const s = await system.sourceStatus();
          return s?.conditions?.some((c) => c.type === 'Stalled' && c.status === 'True') ? s : undefined;
        },
        30_000,
        'the source to reject the commit',
      );
      const stalled = status.conditions?.find((c) => c.type === 'Stalled');
      expect(stalled?.message).toBe(BROKEN_LINES.join('; '));
      const cli = await runValidate(repo.dir);
      expect(cli.stdout.trimEnd().split('\n')).toEqual(BROKEN_LINES);
    } finally {
      await system.close();
      await repo.remove();
    }
  });
});
