/**
 * Keeps a few of Node's own `process.nextTick` queue entries alive for the life of the process.
 *
 * Why: every proxied request schedules several ticks inside node:http and node:stream. Node builds
 * each tick entry as an object literal with computed symbol keys, and V8 starts such a literal from a
 * per-property-count map that it caches only weakly. Between bursts no tick entry is alive, so a full
 * garbage collection frees that map and the next tick starts from a new one. After a few such
 * collections the literal's property stores have seen too many maps: V8 stops caching them, and every
 * tick entry is built through the runtime's slow path, for the rest of the process's life.
 *
 * A long-running server with a larger heap (sless: its start-up sync, the API, the schemas) has
 * those collections early, so `/fn/` paid about 7 µs more CPU per request than the same proxy in a
 * small process (about a fifth of its cost), measured with perf against the same function. Holding
 * one entry keeps the map, and everything the entry was built from, alive, so the stores stay cached.
 */
import { executionAsyncResource } from 'node:async_hooks';

const kept: object[] = [];
let keeping: Promise<readonly object[]> | undefined;

/** Idempotent; resolves with the entries kept once the ticks it scheduled have run. */
export function keepTickObjectShapes(): Promise<readonly object[]> {
  keeping ??= new Promise((resolve) => {
    const keep = () => kept.push(executionAsyncResource());
    // Both kinds of entry: `args` is undefined without arguments and an array with them.
    process.nextTick(keep);
    process.nextTick((_unused: number) => {
      keep();
      resolve(kept);
    }, 0);
  });
  return keeping;
}
