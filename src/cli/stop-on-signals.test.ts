/**
 * stopOnSignals in a real child process: SIGTERM (and a SIGINT after it) stops once and exits 0; a failed
 * gateway thread stops and exits 1, so a supervisor starts sless again; a stop that throws still exits.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const MODULE = fileURLToPath(new URL('./stop-on-signals.ts', import.meta.url));

/** Runs a script that installs the handlers, then does `then` ('signal': SIGTERM then SIGINT, 'fail' the gateway). */
async function run(then: 'signal' | 'fail', stopThrows = false) {
  const script = `
    import { pino } from 'pino';
    import { stopOnSignals } from ${JSON.stringify(MODULE)};
    let reports;
    let stops = 0;
    stopOnSignals({
      logger: pino({ level: 'silent' }),
      message: 'stopping',
      stop: async () => { stops++; console.log('stop ' + stops); await new Promise((r) => setTimeout(r, 300)); ${stopThrows ? "throw new Error('boom');" : ''} },
      gateway: { report: (r) => { reports = r; } },
    });
    setInterval(() => {}, 1000);
    console.log('ready');
    if (${JSON.stringify(then)} === 'fail') reports.failed(new Error('worker died'));
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (then === 'signal' && out.includes('ready') && !child.killed) {
      child.kill('SIGTERM');
      child.kill('SIGINT');
    }
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, lines: out.trim().split('\n') };
}

describe('stopOnSignals', () => {
  it('SIGTERM stops once and exits 0, a SIGINT right after it included', async () => {
    expect(await run('signal')).toEqual({ code: 0, lines: ['ready', 'stop 1'] });
  }, 30_000);

  it('a failed gateway thread stops and exits 1', async () => {
    expect(await run('fail')).toEqual({ code: 1, lines: ['ready', 'stop 1'] });
  }, 30_000);

  it('a stop that throws still exits', async () => {
    expect(await run('fail', true)).toEqual({ code: 1, lines: ['ready', 'stop 1'] });
  }, 30_000);
});
