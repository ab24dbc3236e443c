// The fixture must leave no server process and no temp dir behind, even when its owner crashes.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { assertKubeTestsEnabled } from './shared.ts';

const CHILD = fileURLToPath(new URL('./cleanup-child.ts', import.meta.url));

/** PIDs of processes whose command line mentions the cluster's temp dir (supervisors and servers). */
function processesUsing(dir: string): number[] {
  const res = spawnSync('pgrep', ['-f', dir], { encoding: 'utf8' });
  return res.stdout
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((pid) => pid !== process.pid);
}

function startChild(mode: 'wait' | 'throw'): { child: ChildProcess; ready: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    err += c;
  });
  const ready = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const m = /READY (\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`child exited (${code}) before READY:\n${out}\n${err}`)));
  });
  return { child, ready };
}

async function until(what: string, cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('test cluster cleanup', () => {
  beforeAll(() => assertKubeTestsEnabled());

  it('removes servers and temp dir when the owning process is SIGKILLed', async () => {
    const { child, ready } = startChild('wait');
    const dir = await ready;
    expect(existsSync(dir)).toBe(true);
    // etcd, kube-apiserver, versitygw and registry, each under its supervisor.
    expect(processesUsing(dir).length).toBeGreaterThanOrEqual(8);
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    // Supervisors poll their owner every second and give servers 2 s to stop before SIGKILL.
    await until(`no process uses ${dir}`, () => processesUsing(dir).length === 0, 20_000);
    await until(`${dir} removed`, () => !existsSync(dir), 5_000);
  }, 90_000);

  it('removes servers and temp dir when the owner dies of an uncaught error', async () => {
    const { child, ready } = startChild('throw');
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const dir = await ready;
    expect(await exited).not.toBe(0);
    // The 'exit' handler kills synchronously, so this holds at once (a little slack for the kernel).
    await until(`no process uses ${dir}`, () => processesUsing(dir).length === 0, 2_000);
    expect(existsSync(dir)).toBe(false);
  }, 90_000);
});
