import { defineConfig } from 'vitest/config';

// CI reads the pass/fail counts from a JSON report while running exactly `npm test`.
const jsonReport = process.env.SLESS_TEST_REPORT;

// Two cores: integration suites start real servers and child processes, so keep file parallelism low.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // One shared kube-apiserver/etcd/S3/registry per run, started lazily by the first kube test.
    globalSetup: ['test/cluster/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    maxWorkers: 2,
    pool: 'forks',
    ...(jsonReport ? { reporters: ['default', 'json'], outputFile: { json: jsonReport } } : {}),
  },
});
