/**
 * With authentication on, sless is multi-tenant and must not start without the sandbox; single-user
 * loopback mode may, and says so. The machine here has bubblewrap, so its absence is simulated the
 * way a machine without it looks: a PATH on which there is no `bwrap`.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, readdir, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLocalConfig, PACKAGE_ROOT } from '../../src/config/config.js';
import { tempDir } from '../helpers/git.js';

interface Run {
  code: number | null;
  output: string;
}

/** Starts `sless dev`; resolves when it exits, or once `ready` appears in its output (then stops it). */
function runSless(env: Record<string, string>, stateDir: string, ready: RegExp): Promise<Run> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(PACKAGE_ROOT, 'src/cli/index.ts'),
      'dev',
      '--repo',
      stateDir,
      '--port',
      '0',
      '--state-dir',
      stateDir,
      '--json',
    ],
    // TMPDIR stays the test run's, which the run removes, whatever else the case leaves out.
    { cwd: PACKAGE_ROOT, env: { TMPDIR: tmpdir(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (ready.test(output)) child.kill('SIGTERM');
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, output }));
}

describe('the sandbox is required in tenant mode', () => {
  let noBwrapPath: string;
  let authEnv: Record<string, string>;
  let root: string;

  beforeAll(async () => {
    root = await tempDir('sandbox-required');
    noBwrapPath = join(root, 'bin');
    await mkdir(noBwrapPath);
    // Only what starting sless needs: node (and git for a repository path).
    await symlink(process.execPath, join(noBwrapPath, 'node'));
    await symlink('/usr/bin/git', join(noBwrapPath, 'git'));
    const { publicKey } = await generateKeyPair('RS256');
    authEnv = {
      SLESS_AUTH_PUBLIC_KEY: await exportSPKI(publicKey),
      SLESS_AUTH_ISSUER: 'https://issuer.test',
      SLESS_AUTH_AUDIENCE: 'sless',
    };
  });

  afterAll(async () => {
    const { rm } = await import('node:fs/promises');
    await rm(root, { recursive: true, force: true });
  });

  it('with auth on and no bubblewrap, sless refuses to start and says how to get the sandbox', async () => {
    const tmp = join(root, 'refused-tmp');
    await mkdir(tmp);
    const run = await runSless(
      { PATH: noBwrapPath, TMPDIR: tmp, ...authEnv },
      join(root, 'refused'),
      /serving on/,
    );
    expect(run.code).toBe(2);
    // The proxy thread's socket directory is gone with the refused start.
    expect((await readdir(tmp)).filter((entry) => entry.startsWith('sless-gw-'))).toEqual([]);
    expect(run.output).toContain('authentication is on');
    expect(run.output).toContain('bwrap (bubblewrap) is not installed');
    expect(run.output).toContain('apt-get install bubblewrap slirp4netns');
  });

  it('with auth on and bubblewrap present, it starts and logs what the sandbox enforces', async () => {
    const run = await runSless(
      { PATH: process.env.PATH ?? '', ...authEnv },
      join(root, 'tenant'),
      /"msg":"tenant code runs sandboxed/,
    );
    expect(run.output).toMatch(/"msg":"tenant code runs sandboxed\\n {2}enforced: sandbox: bubblewrap/);
    expect(run.output).toContain('enforced: memory: memoryMb through cgroup');
    expect(run.output).not.toContain('authentication is on');
  });

  it('--sandbox off is refused with auth on, accepted on loopback without auth, and nothing else is', () => {
    expect(() => loadLocalConfig({ sandbox: 'off' }, authEnv)).toThrow(
      /--sandbox off: with authentication on, tenants' code runs here and must be sandboxed/,
    );
    expect(loadLocalConfig({ sandbox: 'off' }, {}).sandbox).toBe('off');
    expect(loadLocalConfig({}, {}).sandbox).toBe('auto');
    expect(() => loadLocalConfig({ sandbox: 'maybe' }, {})).toThrow(/--sandbox: "maybe" must be auto or off/);
  });

  it('single-user loopback mode without bubblewrap starts, and warns that tenant code is not sandboxed', async () => {
    const run = await runSless({ PATH: noBwrapPath }, join(root, 'loopback'), /TENANT CODE IS NOT SANDBOXED/);
    expect(run.output).toContain('NOT enforced: sandbox: bwrap (bubblewrap) is not installed');
    expect(run.output).toContain('AUTHENTICATION IS OFF');
  });
});
