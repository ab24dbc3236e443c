// Loaded into a process a benchmark measures (`node --expose-gc --import ./bench/memory-probe.mjs`):
// on SIGUSR2 it collects garbage, then writes process.memoryUsage() as JSON to the file
// SLESS_BENCH_MEMORY_FILE names, and a heap snapshot beside it when the file `{that}.snapshot` exists
// (a snapshot blocks the process for seconds: long enough to lose a Lease, so only when asked). The
// JSON is written whole (rename), so the reader never sees half of it.
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { getHeapSpaceStatistics, writeHeapSnapshot } from 'node:v8';

const file = process.env.SLESS_BENCH_MEMORY_FILE;
let taken = 0;
if (file)
  process.on('SIGUSR2', () => {
    taken++;
    globalThis.gc?.();
    const usage = process.memoryUsage();
    let snapshot;
    if (existsSync(`${file}.snapshot`)) {
      rmSync(`${file}.snapshot`);
      snapshot = writeHeapSnapshot(`${file}.${taken}.heapsnapshot`);
    }
    // Where V8's heap is: the young generation's semi-spaces are sized up under allocation pressure
    // and kept, which shows in RSS but not in heapUsed.
    const spaces = Object.fromEntries(
      getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size }]),
    );
    writeFileSync(`${file}.tmp`, JSON.stringify({ taken, ...usage, spaces, snapshot }));
    renameSync(`${file}.tmp`, file);
  });
