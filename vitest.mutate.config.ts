import { defineConfig } from 'vitest/config';

/**
 * The fast unit tests of the modules that hold sless's invariants, for `npm run mutate` (Stryker).
 * No global setup: mutation testing reruns these tests hundreds of times and must never start the
 * test cluster, child runtimes or git servers.
 */
export default defineConfig({
  test: {
    include: [
      'src/core/*.test.ts',
      'src/reconcile/plan.test.ts',
      'src/manifest/validate.test.ts',
      'src/api/webhooks/*.test.ts',
      'src/api/auth/*.test.ts',
      'src/proxy/hop-by-hop.test.ts',
    ],
    testTimeout: 10_000,
    pool: 'forks',
    maxWorkers: 1,
    // Every run starts from fresh modules, so state a module caches (the compiled validators) is
    // rebuilt under each mutant instead of carried over from an earlier run.
    isolate: true,
  },
});
