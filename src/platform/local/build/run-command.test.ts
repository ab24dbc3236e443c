// A build step whose sandbox failed to start is tried again; a step that ran and failed is not.
// Real child processes stand in for the sandbox: each launch runs the next script of a list.
import { type ChildProcess, spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { LaunchSpec, ProcessLauncher } from '../../../core/interfaces.js';
import { runCommand } from './run-command.js';

const BWRAP_FAILURE = `echo 'bwrap: loopback: Failed RTM_NEWADDR: No child processes' >&2; exit 1`;

function scripted(scripts: string[]): ProcessLauncher & { launches: number } {
  const launcher = {
    launches: 0,
    report: { sandboxed: false, reasons: [] } as unknown as ProcessLauncher['report'],
    grant: async () => undefined,
    launch(spec: LaunchSpec): ChildProcess {
      const script = scripts[Math.min(launcher.launches, scripts.length - 1)] ?? 'exit 0';
      launcher.launches++;
      return spawn('sh', ['-c', script], { stdio: spec.stdio });
    },
  };
  return launcher;
}

const spec = { command: 'npm', args: ['install'], cwd: '/', env: {}, tenant: 't' } as Omit<
  LaunchSpec,
  'stdio'
>;

describe('runCommand', () => {
  it('tries a step again when bubblewrap failed before running it, and says so in the log', async () => {
    const launcher = scripted([BWRAP_FAILURE, 'echo installed']);
    const result = await runCommand(launcher, spec, { timeoutMs: 10_000 });
    expect(launcher.launches).toBe(2);
    expect(result.exitCode).toBe(0);
    expect(result.output).toBe(
      'bwrap: loopback: Failed RTM_NEWADDR: No child processes\n' +
        '[sless] the sandbox failed to start; trying again (2/3)\n' +
        'installed\n',
    );
  });

  it('gives up after three sandbox failures', async () => {
    const launcher = scripted([BWRAP_FAILURE]);
    const result = await runCommand(launcher, spec, { timeoutMs: 10_000 });
    expect(launcher.launches).toBe(3);
    expect(result.exitCode).toBe(1);
  });

  it("never tries again a step that ran and failed (the tenant's failure)", async () => {
    const launcher = scripted([`echo 'npm ERR! missing script' >&2; exit 1`, 'echo installed']);
    const result = await runCommand(launcher, spec, { timeoutMs: 10_000 });
    expect(launcher.launches).toBe(1);
    expect(result).toMatchObject({ exitCode: 1, output: 'npm ERR! missing script\n' });
  });
});
