// Local config to run only the test cluster's suites, with the shared-cluster globalSetup:
//   SLESS_KUBE_TESTS=1 npx vitest run -c test/cluster/vitest.config.ts
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/cluster/**/*.test.ts'],
    globalSetup: ['test/cluster/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    maxWorkers: 2,
    pool: 'forks',
  },
});
