// Loaded into a process a benchmark measures (`node --expose-gc --import ./bench/memory-probe.mjs`):
// on SIGUSR2 it collects garbage, then writes process.memoryUsage() as JSON to the file
// SLESS_BENCH_MEMORY_FILE names, and a heap snapshot beside it when SLESS_BENCH_HEAP_SNAPSHOT=1. The
// file is written whole (rename), so the reader never sees half of it.
import { renameSync, writeFileSync } from 'node:fs';
import { writeHeapSnapshot } from 'node:v8';

const file = process.env.SLESS_BENCH_MEMORY_FILE;
let taken = 0;
if (file)
  process.on('SIGUSR2', () => {
    taken++;
    globalThis.gc?.();
    const usage = process.memoryUsage();
    const snapshot =
      process.env.SLESS_BENCH_HEAP_SNAPSHOT === '1'
        ? writeHeapSnapshot(`${file}.${taken}.heapsnapshot`)
        : undefined;
    writeFileSync(`${file}.tmp`, JSON.stringify({ taken, ...usage, snapshot }));
    renameSync(`${file}.tmp`, file);
  });
