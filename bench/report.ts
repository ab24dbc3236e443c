// One row per measured figure. Every benchmark prints its own output and, when run by bench/run.ts
// (SLESS_BENCH_REPORT names a file), appends its rows there so that the runner prints one table.
import { appendFileSync } from 'node:fs';

export interface BenchRow {
  bench: string;
  measure: string;
  value: string;
  /** The baseline measured in the same run, e.g. "direct 41.2k req/s". */
  baseline?: string;
  /** value / baseline (or the ratio the target is stated in). */
  ratio?: number;
  target?: string;
  met?: boolean;
}

export function report(...rows: BenchRow[]): void {
  const file = process.env.SLESS_BENCH_REPORT;
  if (file) for (const row of rows) appendFileSync(file, `${JSON.stringify(row)}\n`);
}
