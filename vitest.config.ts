import { configDefaults, defineConfig } from 'vitest/config';

// Suites on the real node (kubelet, containerd, kaniko; root only): one node at a time on the machine,
// so they run one file after the other; after everything else in one `vitest run`, beside it in
// `npm test` (test/run.sh runs each project on its own).
const NODE_SUITES = ['test/e2e/**/*.test.ts', 'test/cluster/node-cleanup.test.ts'];

// CI reads the pass/fail counts from a JSON report while running exactly `npm test`.
const jsonReport = process.env.SLESS_TEST_REPORT;

// Two cores: integration suites start real servers and child processes, so keep file parallelism low.
export default defineConfig({
  test: {
    // One shared kube-apiserver/etcd/S3/registry per run, started lazily by the first kube test.
    globalSetup: ['test/cluster/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    maxWorkers: 2,
    pool: 'forks',
    ...(jsonReport ? { reporters: ['default', 'json'], outputFile: { json: jsonReport } } : {}),
    projects: [
      {
        extends: true,
        test: {
          name: 'main',
          include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...NODE_SUITES],
        },
      },
      {
        extends: true,
        test: {
          name: 'node',
          include: NODE_SUITES,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
