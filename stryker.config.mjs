// Mutation testing of the modules that hold sless's invariants (`npm run mutate`, not part of
// `npm test`). Mutants run against the fast unit tests only (vitest.mutate.config.ts), never the
// cluster; two processes at most because the machine is shared.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutate.config.ts' },
  // 'all', not 'perTest': the validators are compiled once and cached, so per-test coverage would
  // credit schema code only to the first test that compiled it and skip the tests that depend on it.
  coverageAnalysis: 'all',
  concurrency: 2,
  mutate: [
    // Build keys and planning.
    'src/reconcile/plan.ts',
    'src/core/hash.ts',
    // Manifest validation and repository path rules.
    'src/manifest/validate.ts',
    'src/core/paths.ts',
    // Webhook signatures.
    'src/api/webhooks/signature.ts',
    // Hop-by-hop headers.
    'src/proxy/hop-by-hop.ts',
    // Tenant naming and authorisation.
    'src/core/naming.ts',
    'src/api/auth/jwt.ts',
    'src/api/auth/plugin.ts',
    // The work queue and status conditions.
    'src/core/work-queue.ts',
    'src/core/conditions.ts',
  ],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  timeoutMS: 3_000,
  thresholds: { high: 90, low: 80, break: null },
};
