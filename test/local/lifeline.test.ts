/**
 * Function processes never outlive sless: killed with SIGKILL (no chance to clean up), the parent's
 * runtimes see their stdin close and exit. Each runtime is checked as a real process.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/config/config.js';
import { freePort } from '../../src/platform/local/ports.js';
import { RuntimeProcess } from '../../src/platform/local/runtime-process.js';
import { TestRepo, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';

const exec = promisify(execFile);

async function childPids(parent: number): Promise<number[]> {
  const { stdout } = await exec('pgrep', ['-P', String(parent)]).catch(() => ({ stdout: '' }));
  return stdout.split('\n').filter(Boolean).map(Number);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('runtime lifeline', () => {
  const node = {
    runtime: 'nodejs20',
    file: 'handler.js',
    code: 'exports.handle = () => process.pid;\n',
  } as const;
  const python = {
    runtime: 'python3.11',
    file: 'handler.py',
    code: 'import os\n\ndef handle(event, context):\n    return os.getpid()\n',
  } as const;
  // SIGKILL gives sless no chance to clean up (the lifeline does it); SIGTERM/SIGINT are its own shutdown.
  it.each([
    { ...node, signal: 'SIGKILL' },
    { ...python, signal: 'SIGKILL' },
    { ...node, signal: 'SIGTERM' },
    { ...python, signal: 'SIGINT' },
  ] as const)('a $runtime runtime exits when sless gets $signal', async ({ runtime, file, code, signal }) => {
    const repo = await TestRepo.create({
      'f/function.yaml': `apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: { name: f }\nspec: { runtime: ${runtime}, entrypoint: handler.handle }\n`,
      [`f/${file}`]: code,
    });
    const stateDir = await tempDir(`${runtime}-state`);
    const sless = spawn(
      process.execPath,
      [
        join(PACKAGE_ROOT, 'bin/sless.js'),
        'dev',
        '--repo',
        repo.dir,
        '--port',
        '0',
        '--state-dir',
        stateDir,
        '--json',
      ],
      {
        cwd: PACKAGE_ROOT,
        stdio: 'ignore',
      },
    );
    const pid = await eventually(
      async () => {
        const children = await childPids(sless.pid ?? 0);
        for (const child of children) {
          const cmdline = await readFile(`/proc/${child}/cmdline`, 'utf8').catch(() => '');
          if (cmdline.includes(`runtimes/${runtime}/server`)) return child;
        }
        return undefined;
      },
      60_000,
      'runtime started',
    );
    expect(alive(pid)).toBe(true);
    sless.kill(signal);
    const [exitCode] = await once(sless, 'exit');
    if (signal !== 'SIGKILL') expect(exitCode).toBe(0);
    await eventually(async () => !alive(pid), 5_000, 'runtime exited');
    await repo.remove();
    await rm(stateDir, { recursive: true, force: true });
  });
});

describe('graceful stop', () => {
  it.each([
    ['nodejs20', 'handler.js', 'exports.handle = () => 1;\n'],
    ['python3.11', 'handler.py', 'def handle(event, context):\n    return 1\n'],
  ])(
    'a %s runtime with a lifeline exits on SIGTERM by itself, without needing SIGKILL',
    async (runtime, file, code) => {
      const dir = await tempDir('graceful');
      await writeFile(join(dir, file), code);
      const server = join(
        PACKAGE_ROOT,
        'runtimes',
        runtime,
        runtime === 'nodejs20' ? 'server.js' : 'server.py',
      );
      const proc = new RuntimeProcess(
        {
          command: runtime === 'nodejs20' ? process.execPath : 'python3',
          args: [server],
          cwd: dir,
          env: { PATH: process.env.PATH ?? '', SLESS_ENTRYPOINT: 'handler.handle', SLESS_CODE_DIR: dir },
        },
        await freePort(),
        pino({ level: 'silent' }),
      );
      await proc.start(10_000);
      const exited = new Promise<[number | null, string | null]>((resolve) =>
        proc.once('exit', (c, s) => resolve([c, s])),
      );
      await proc.stop(5_000);
      const [exitCode, signal] = await exited;
      expect(signal).not.toBe('SIGKILL');
      expect(exitCode === 0 || signal === 'SIGTERM').toBe(true);
    },
  );
});
