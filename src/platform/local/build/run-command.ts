import type { LaunchSpec, ProcessLauncher } from '../../../core/interfaces.js';

export interface CommandResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

const OUTPUT_LIMIT = 64 * 1024;

/** Runs a build step through the launcher, keeping the last 64 KiB of combined output for the build log. */
export function runCommand(
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
