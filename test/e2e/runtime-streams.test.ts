/**
 * Python and Go functions stream and accept WebSockets through `/fn/` on a real node: built by kaniko
 * with their libraries (`websockets` from PyPI, `github.com/coder/websocket` from the Go module proxy)
 * fetched by the build's install step through the package mirrors an air-gapped cluster sets
 * (`SLESS_BUILD_PACKAGE_MIRRORS`: build pods reach nothing beyond the node, so the mirrors run on the
 * host), then run as pods. For each: an SSE stream's first event reaches the client while the
 * handler still waits for a gate only the test opens, a client that leaves a held stream cancels the
 * handler, which observes it, and a WebSocket echoes text and binary messages. The Node runtime's
 * streams and WebSocket on the node are node-behaviour.test.ts's.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { POD } from '../../src/platform/kube/resource-types.js';
import {
  expectFirstEventBeforeTheLast,
  expectLeavingCancelsTheHandler,
  expectWebSocketEcho,
} from '../helpers/stream-cases.js';
import { STREAM_RUNTIMES, type StreamRuntime, streamFunction } from '../helpers/stream-functions.js';
import { type E2eEnv, servedBody, startE2e } from './harness.ts';
import { startGoMirror, startPypiMirror, testCacheRoot } from './package-mirror.ts';

const BUILD_MS = Number(process.env.SLESS_E2E_BUILD_MS ?? 10 * 60_000);
const NAME: Record<StreamRuntime, string> = { 'python3.11': 'py-streams', 'go1.21': 'go-streams' };
const progress = (message: string) => process.stderr.write(`[node-runtime-streams] ${message}\n`);

describe('e2e on a real node: Python and Go stream and accept WebSockets through /fn/', () => {
  let env: E2eEnv;
  const url = (runtime: StreamRuntime, path: string) =>
    `${env.system.url}/fn/${env.ns}/${NAME[runtime]}${path}`;
  const json = async (runtime: StreamRuntime, path: string) => {
    const res = await fetch(url(runtime, path), { signal: AbortSignal.timeout(30_000) });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as Record<string, unknown> };
  };

  beforeAll(async () => {
    const files: Record<string, string> = {};
    for (const runtime of STREAM_RUNTIMES) Object.assign(files, streamFunction(NAME[runtime], runtime));
    const started = Date.now();
    env = await startE2e('e2e-rs', files, {
      // The Go toolchain's image is among the node's extra images.
      extras: true,
      withNode: async (node) => {
        const pypi = await startPypiMirror(node.gatewayIp, join(testCacheRoot(), 'pypi-files'));
        const go = await startGoMirror(node.gatewayIp, join(testCacheRoot(), 'go-modules'));
        return {
          env: {
            SLESS_BUILD_PACKAGE_MIRRORS: [
              `GOPROXY=${go.url}`,
              `PIP_INDEX_URL=${pypi.url}simple/`,
              `PIP_TRUSTED_HOST=${node.gatewayIp}`,
            ].join(';'),
          },
          close: async () => {
            await pypi.close();
            await go.close();
          },
        };
      },
    });
    try {
      await Promise.all(
        STREAM_RUNTIMES.map((runtime) => servedBody(env, NAME[runtime], '"ok":', BUILD_MS, '/')),
      );
    } catch (error) {
      // What kept a function from serving: its status, and the last lines of its build's pods.
      for (const runtime of STREAM_RUNTIMES) {
        const fn = await env.system.store.get('Function', env.ns, NAME[runtime]);
        progress(`${NAME[runtime]} status: ${JSON.stringify(fn?.status)}`);
      }
      const pods = await listObjects<KubeObject>(env.http, POD, { namespace: env.controllerNs });
      for (const pod of pods.items)
        for (const container of ['install', 'kaniko']) {
          const log = await env.http
            .raw(
              'GET',
              `/api/v1/namespaces/${env.controllerNs}/pods/${pod.metadata.name}/log?container=${container}&tailLines=30`,
            )
            .catch((e: Error) => e.message);
          progress(`${pod.metadata.name}/${container}:\n${String(log)}`);
        }
      throw error;
    }
    progress(`both functions built and serving in ${Date.now() - started} ms (node lock wait included)`);
  }, 60 * 60_000);

  afterAll(async () => {
    await env?.close();
  }, 300_000);

  const target = (runtime: StreamRuntime) => ({
    url: (path: string) => url(runtime, path),
    json: (path: string) => json(runtime, path),
  });

  it.each(STREAM_RUNTIMES)(
    '%s: the first SSE event reaches the client while the handler still runs',
    (runtime) => expectFirstEventBeforeTheLast(target(runtime)),
  );

  it.each(STREAM_RUNTIMES)(
    '%s: a client that leaves a stream cancels the handler, which observes it',
    (runtime) => expectLeavingCancelsTheHandler(target(runtime), 15_000),
  );

  it.each(STREAM_RUNTIMES)('%s: a WebSocket echoes text and binary messages', (runtime) =>
    expectWebSocketEcho(target(runtime), `hello ${runtime}`),
  );
});
