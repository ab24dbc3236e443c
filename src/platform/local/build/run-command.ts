/**
 * Runs one build step through the process launcher and keeps its output for the build log, bounded
 * in size and time. A sandbox that failed to start before anything of the tenant's ran is tried
 * again rather than blamed on the tenant's code.
 */
import type { LaunchSpec, ProcessLauncher } from '../../../core/interfaces.js';

export interface CommandResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

const OUTPUT_LIMIT = 64 * 1024;

/** Tries of a step whose sandbox failed to start, before the step counts as failed. */
const SANDBOX_START_TRIES = 3;

/**
 * bubblewrap's own error, printed before it runs anything: under load, setting up the new network
 * namespace's loopback now and then fails (`bwrap: loopback: Failed RTM_NEWADDR`). Nothing of the
 * tenant's ran, so the step is tried again rather than failing the build on the tenant's account.
 */
export function sandboxFailedToStart(result: CommandResult): boolean {
  const lines = result.output.trim().split('\n');
  return result.exitCode === 1 && lines.length === 1 && /^bwrap: /.test(lines[0] ?? '');
}

/** Runs a build step through the launcher, keeping the last 64 KiB of combined output for the build log. */
export async function runCommand(
  launcher: ProcessLauncher,
  spec: Omit<LaunchSpec, 'stdio'>,
  options: { timeoutMs: number },
): Promise<CommandResult> {
  let notes = '';
  for (let attempt = 1; ; attempt++) {
    const result = await runOnce(launcher, spec, options);
    if (attempt >= SANDBOX_START_TRIES || !sandboxFailedToStart(result))
      return { ...result, output: notes + result.output };
    notes += `${result.output.trim()}\n[sless] the sandbox failed to start; trying again (${attempt + 1}/${SANDBOX_START_TRIES})\n`;
    await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
  }
}

function runOnce(
  launcher: ProcessLauncher,
  spec: Omit<LaunchSpec, 'stdio'>,
  options: { timeoutMs: number },
): Promise<CommandResult> {
  return new Promise((resolve) => {
    let output = '';
    const append = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.length > OUTPUT_LIMIT * 2) output = output.slice(-OUTPUT_LIMIT);
    };
    const child = launcher.launch({ ...spec, stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => {
      append(Buffer.from(`\n[sless] build step timed out after ${options.timeoutMs} ms\n`));
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({ exitCode: null, signal: null, output: `${output}\n${error.message}` });
    });
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      resolve({ exitCode, signal, output: output.slice(-OUTPUT_LIMIT) });
    });
  });
}

export function tail(text: string, bytes = 4096): string {
  return text.length <= bytes ? text : text.slice(-bytes);
}
