// Test-side access to the shared test cluster started by global-setup.ts.
//
//   let cluster: SharedTestCluster;
//   beforeAll(async () => { cluster = await getTestCluster(); });
//   afterAll(() => cluster?.release());
//
// Without the globalSetup wired in (e.g. a local vitest config), this starts a private cluster for
// the calling test file instead, and release() stops it.
import { inject } from 'vitest';
import {
  BROKER_KEY,
  kubeConfigFromInfo,
  startTestCluster,
  type TestCluster,
  type TestClusterInfo,
} from './fixture.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the lazy test cluster broker; '' when SLESS_KUBE_TESTS=0 disabled it. */
    slessTestClusterBroker: string;
  }
}

export interface SharedTestCluster extends Omit<TestCluster, 'stop'> {
  /** Stops the cluster if this file owns it; no-op for the run-wide shared cluster. */
  release(): Promise<void>;
}

/** Fails loudly (never skips) when SLESS_KUBE_TESTS=0 disabled the test cluster. */
export function assertKubeTestsEnabled(): void {
  if (inject(BROKER_KEY) === '' || process.env.SLESS_KUBE_TESTS === '0') {
    throw new Error(
      'This test needs the Kubernetes test cluster, but SLESS_KUBE_TESTS=0 disabled it. ' +
        'Unset SLESS_KUBE_TESTS (or exclude test/cluster and the other kube test files).',
    );
  }
}

/**
 * The run-wide cluster, or with `own` a private one for the calling file, stopped by release(). A
 * file whose controller watches every namespace needs its own: on the shared cluster it reconciles
 * other files' objects too, racing their controllers (a cron Job written with the wrong API URL).
 */
export async function getTestCluster(
  timeoutMs = 45 * 60_000,
  options: { own?: boolean } = {},
): Promise<SharedTestCluster> {
  const broker = inject(BROKER_KEY);
  if (options.own) assertKubeTestsEnabled();
  if (broker === undefined || options.own) {
    const own = await startTestCluster();
    const { stop, ...rest } = own;
    return { ...rest, release: stop };
  }
  assertKubeTestsEnabled();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(broker);
    const body = await res.text();
    if (res.status === 200) {
      const info = JSON.parse(body) as TestClusterInfo;
      return { ...info, kubeConfig: kubeConfigFromInfo(info), release: async () => {} };
    }
    if (res.status !== 202) throw new Error(`the shared test cluster failed to start:\n${body}`);
    if (Date.now() > deadline)
      throw new Error(`the shared test cluster did not start within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
