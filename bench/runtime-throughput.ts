// Requests per second per runtime, calling the runtime server directly (no proxy) with a trivial
// handler: autocannon, 50 keep-alive connections, ~5 s per runtime after a 1 s warm-up.
// Run: npx tsx bench/runtime-throughput.ts   (DURATION=10 CONNECTIONS=100 to override)
// Note: autocannon runs on the same machine and competes for CPU with the runtime under test.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  prepareTrivialFunctions,
  REPO_ROOT,
  type RuntimeName,
  runToExit,
  startRuntime,
} from '../test/runtimes/harness.ts';
import { report } from './report.ts';

const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const AUTOCANNON = path.join(REPO_ROOT, 'node_modules/autocannon/autocannon.js');

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { average: number; p50: number; p99: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}

async function autocannon(url: string, seconds: number): Promise<AutocannonResult> {
  const res = await runToExit(
    process.execPath,
    [AUTOCANNON, '-c', String(CONNECTIONS), '-d', String(seconds), '-j', url],
    {},
    (seconds + 30) * 1000,
  );
  if (res.code !== 0) throw new Error(`autocannon failed (${res.code}):\n${res.stderr}`);
  return JSON.parse(res.stdout) as AutocannonResult;
}

const dir = mkdtempSync(path.join(tmpdir(), 'sless-throughput-'));
try {
  const launches = await prepareTrivialFunctions(dir);
  const rows: Record<string, string | number>[] = [];
  for (const name of Object.keys(launches) as RuntimeName[]) {
    const server = await startRuntime(launches[name], { SLESS_FUNCTION_NAME: 'bench' });
    try {
      const url = `${server.url}/bench?x=1`;
      await autocannon(url, 1); // warm-up (JIT, thread pools), not reported
      const r = await autocannon(url, DURATION);
      rows.push({
        runtime: name,
        'req/s': Math.round(r.requests.average),
        'p50 ms': r.latency.p50,
        'p99 ms': r.latency.p99,
        'avg ms': Number(r.latency.average.toFixed(2)),
        requests: r.requests.total,
        'errors+timeouts+non2xx': r.errors + r.timeouts + r.non2xx,
      });
      report({
        bench: 'runtime-throughput',
        measure: `${name} direct, autocannon -c ${CONNECTIONS}`,
        value: `${Math.round(r.requests.average)} req/s, p99 ${r.latency.p99} ms`,
      });
    } finally {
      await server.stop();
    }
  }
  console.log(
    `runtime throughput: autocannon -c ${CONNECTIONS} -d ${DURATION}, keep-alive, trivial handler (node ${process.version})`,
  );
  console.table(rows);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
