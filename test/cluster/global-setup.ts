// vitest globalSetup: one shared test cluster for the whole run, started lazily.
//
// Starting etcd + kube-apiserver + S3 + registry costs seconds, so it only happens when a test file
// actually asks for the cluster (getTestCluster() in shared.ts). This module just starts a tiny
// loopback HTTP "broker" and provides its URL to the workers; the first request starts the cluster,
// later requests (from any worker) get the same connection info. Teardown stops the cluster.
// SLESS_KUBE_TESTS=0 disables the cluster: kube tests then fail loudly instead of starting servers.
import { createServer, type Server } from 'node:http';
import type { TestProject } from 'vitest/node';
import { BROKER_KEY, startTestCluster, type TestCluster } from './fixture.ts';
import { enterRunTempDir } from './run-temp.ts';

type State =
  | { kind: 'idle' }
  | { kind: 'starting'; promise: Promise<TestCluster> }
  | { kind: 'ready'; cluster: TestCluster }
  | { kind: 'failed'; error: string };

export default async function setup(project: Pick<TestProject, 'provide'>): Promise<() => Promise<void>> {
  const leaveRunTempDir = enterRunTempDir();
  if (process.env.SLESS_KUBE_TESTS === '0') {
    project.provide(BROKER_KEY, '');
    return async () => leaveRunTempDir();
  }

  let state: State = { kind: 'idle' };
  const begin = (): void => {
    const promise = startTestCluster();
    state = { kind: 'starting', promise };
    promise.then(
      (cluster) => {
        state = { kind: 'ready', cluster };
      },
      (e: unknown) => {
        state = { kind: 'failed', error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
      },
    );
  };

  const server: Server = createServer((req, res) => {
    if (req.url !== '/cluster') {
      res.writeHead(404).end();
      return;
    }
    if (state.kind === 'idle') begin();
    if (state.kind === 'ready') {
      const { kubeConfig: _kc, stop: _stop, ...info } = state.cluster;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(info));
    } else if (state.kind === 'failed') {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(state.error);
    } else {
      res.writeHead(202).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('test cluster broker has no port');
  project.provide(BROKER_KEY, `http://127.0.0.1:${addr.port}/cluster`);

  return async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const s = state as State;
    if (s.kind === 'starting') {
      await s.promise.then(
        (c) => c.stop(),
        () => {},
      );
    } else if (s.kind === 'ready') {
      await s.cluster.stop();
    }
    leaveRunTempDir();
  };
}
