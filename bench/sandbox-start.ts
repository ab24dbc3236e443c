// What the sandbox costs a function start: the Node runtime started RUNS times (spawn → /healthz
// answers) as a plain child on a loopback port (the baseline), and in the bubblewrap sandbox with its
// cgroups, serving on a unix socket. Also one request's latency through each. Ratios, same run.
// Run: npx tsx bench/sandbox-start.ts   (RUNS=n, default 20; needs root and bubblewrap)
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Client } from 'undici';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { type Endpoint, RuntimeProcess } from '../src/platform/local/runtime-process.js';
import { createLauncher } from '../src/sandbox/probe.js';
import { median, ms, percentile } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 20);
const logger = pino({ level: 'silent' });

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'sless-bench-sandbox-'));
  await writeFile(join(dir, 'handler.js'), 'exports.handle = async () => ({ ok: true });\n');
  // As a build directory is: readable by the tenant's uid.
  await chmod(dir, 0o755);
  const launcher = await createLauncher({ runDir: join(dir, 'run'), logger });
  if (!launcher.report.sandboxed) throw new Error(`no sandbox here: ${launcher.report.notEnforced[0]}`);
  const runtimesDir = join(PACKAGE_ROOT, 'runtimes');
  const command = {
    command: process.execPath,
    args: [join(runtimesDir, 'nodejs20', 'server.js')],
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', SLESS_ENTRYPOINT: 'handler.handle', SLESS_CODE_DIR: dir },
  };
  const plain = { starts: [] as number[], requests: [] as number[] };
  const boxed = { starts: [] as number[], requests: [] as number[] };
  // Interleaved, so that load from elsewhere and warm caches fall on both alike.
  const measure = async (sandboxed: boolean) => {
    const { starts, requests } = sandboxed ? boxed : plain;
    {
      let endpoint: Endpoint = { port: await freePort() };
      let socketDir: string | undefined;
      if (sandboxed) {
        socketDir = await mkdtemp(join(tmpdir(), 'sless-fn-bench-'));
        await launcher.grant('bench', socketDir);
        endpoint = { socketPath: join(socketDir, 'http.sock') };
      }
      const runtime = new RuntimeProcess(
        sandboxed
          ? {
              ...command,
              sandbox: {
                tenant: 'bench',
                readable: [dir, runtimesDir],
                writable: socketDir ? [socketDir] : [],
                memoryMb: 128,
                maxProcesses: 256,
              },
            }
          : command,
        endpoint,
        logger,
        undefined,
        sandboxed ? launcher : undefined,
      );
      const started = performance.now();
      await runtime.start(10_000);
      starts.push(performance.now() - started);
      const client = new Client(runtime.origin, runtime.socketPath ? { socketPath: runtime.socketPath } : {});
      for (let r = 0; r < 20; r++) {
        const t = performance.now();
        const response = await client.request({ path: '/', method: 'GET' });
        await response.body.dump();
        requests.push(performance.now() - t);
      }
      await client.close();
      await runtime.stop();
      if (socketDir) await rm(socketDir, { recursive: true, force: true });
    }
  };
  for (let i = 0; i < RUNS; i++) {
    await measure(false);
    await measure(true);
  }
  await launcher.close();
  await rm(dir, { recursive: true, force: true });
  const line = (name: string, r: { starts: number[]; requests: number[] }) =>
    `${name.padEnd(10)} start median ${ms(median(r.starts))} p90 ${ms(percentile(r.starts, 90))}   request median ${ms(median(r.requests))} p90 ${ms(percentile(r.requests, 90))}`;
  console.log(`${RUNS} starts each, 20 requests per start`);
  console.log(line('plain', plain));
  console.log(line('sandboxed', boxed));
  console.log(
    `ratio sandboxed/plain: start ${(median(boxed.starts) / median(plain.starts)).toFixed(2)}, request ${(median(boxed.requests) / median(plain.requests)).toFixed(2)}`,
  );
}

await main();
