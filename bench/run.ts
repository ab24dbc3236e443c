// `npm run bench [-- name...]`: runs every benchmark in bench/ (or those whose file name contains one
// of the given words), one after the other so they do not compete for the CPU, and prints one table.
// A benchmark that fails is reported as a row, and the others still run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchRow } from './report.ts';

const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
// Helpers, and tools that measure nothing on their own (profile-one-change writes a CPU profile).
const HELPERS = new Set([
  'run.ts',
  'report.ts',
  'stats.ts',
  'net.ts',
  'compiled.ts',
  'proc-stat.ts',
  'open-loop.ts',
  'sless-dev.ts',
  'kube-env.ts',
  'profile-one-change.ts',
]);

const filters = process.argv.slice(2);
const benches = readdirSync(BENCH_DIR)
  .filter((f) => f.endsWith('.ts') && !HELPERS.has(f) && !f.endsWith('.test.ts'))
  .filter((f) => filters.length === 0 || filters.some((w) => f.includes(w)))
  .sort();
const dir = mkdtempSync(join(tmpdir(), 'sless-bench-'));
const reportFile = join(dir, 'rows.jsonl');
const failed: BenchRow[] = [];
try {
  for (const file of benches) {
    process.stdout.write(`\n=== bench/${file}\n`);
    const started = performance.now();
    const result = spawnSync(process.execPath, ['--import', 'tsx', join(BENCH_DIR, file)], {
      stdio: 'inherit',
      env: { ...process.env, SLESS_BENCH_REPORT: reportFile },
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(0);
    process.stdout.write(`=== bench/${file}: exit ${result.status ?? result.signal} after ${seconds} s\n`);
    if (result.status !== 0)
      failed.push({
        bench: file.replace(/\.ts$/, ''),
        measure: 'FAILED',
        value: `exit ${result.status ?? result.signal}`,
      });
  }
  let rows: BenchRow[] = [];
  try {
    rows = readFileSync(reportFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as BenchRow);
  } catch {}
  rows.push(...failed);
  console.log(`\nsless benchmarks (node ${process.version}; ratios are measured within one run)`);
  console.table(
    rows.map((r) => ({
      bench: r.bench,
      measure: r.measure,
      value: r.value,
      baseline: r.baseline ?? '',
      ratio: r.ratio === undefined ? '' : Number(r.ratio.toFixed(2)),
      target: r.target ?? '',
      met: r.met === undefined ? '' : r.met ? 'yes' : 'NO',
    })),
  );
  process.exitCode = failed.length > 0 ? 1 : 0;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
