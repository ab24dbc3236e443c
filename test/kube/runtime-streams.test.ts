/**
 * Streams and WebSockets through the kube `/fn/` proxy, on the main thread and on the gateway thread,
 * against a real kube-apiserver + etcd, with the real runtime server of each runtime (Node, Python,
 * Go) as the pod behind its function's endpoint: an SSE stream's first event reaches the client while
 * the handler still waits, a client that leaves a held stream cancels the handler, which observes it,
 * and a WebSocket echoes, accepted with the language's library (`ws`, `websockets`,
 * `github.com/coder/websocket`).
 *
 * There is no kubelet or pod network: the test writes each function's EndpointSlice and Pod object,
 * and maps each endpoint address to a runtime server it started as a child process
 * (`endpointOrigin`). The Service address is a server that answers 502 and counts: nothing through
 * /fn/ may reach it once the endpoints are in use, so every answer came through the endpoint path.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { apply } from '../../src/platform/kube/objects.js';
import { ENDPOINT_SLICE } from '../../src/platform/kube/resource-types.js';
import { Gateway } from '../../src/server/gateway/gateway.js';
import { functionManifest, git, gitSource } from '../helpers/git.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import {
  expectFirstEventBeforeTheLast,
  expectLeavingCancelsTheHandler,
  expectWebSocketEcho,
} from '../helpers/stream-cases.js';
import { streamFunction } from '../helpers/stream-functions.js';
import { vendoredWs } from '../helpers/vendored-ws.js';
import {
  binaryLaunch,
  buildGo,
  interpretedLaunch,
  type Launch,
  type Running,
  type RuntimeName,
  runToExit,
  startRuntime,
} from '../runtimes/harness.js';
import {
  completeBuild,
  eventually,
  type KubeEnv,
  kubeEnv,
  logger,
  playHealthyKubelet,
  recordResolves,
} from './harness.js';

/** Node's part of the fixture: the same paths as the Python and Go ones (test/helpers/stream-functions.ts). */
const NODE = `
const { WebSocketServer } = require('ws');
const wss = new WebSocketServer({ noServer: true });
const gates = new Map();
const observed = new Map();
const gate = (id) => {
  let g = gates.get(id);
  if (!g) { let open; g = { promise: new Promise((r) => (open = r)), open }; gates.set(id, g); }
  return g;
};
const sse = (body) => ({ statusCode: 200, headers: { 'content-type': 'text/event-stream' }, body });
exports.handle = async (event, context) => {
  const id = String(event.query.id ?? '');
  switch (event.path) {
    case '/release': gate(id).open(); return { released: id };
    case '/observed': return { observed: observed.get(id) ?? null };
    case '/sse':
      return sse((async function* () { yield 'data: first\\n\\n'; await gate(id).promise; yield 'data: last\\n\\n'; })());
    case '/hold':
      return sse((async function* () {
        try {
          yield 'data: first\\n\\n';
          await new Promise((r) => context.signal.addEventListener('abort', r));
          observed.set(id, 'cancelled');
        } finally { if (!observed.has(id)) observed.set(id, 'closed'); }
      })());
    default: return { ok: true };
  }
};
exports.upgrade = (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
};
`;

const RUNTIMES: RuntimeName[] = ['nodejs20', 'python3.11', 'go1.21'];
/** The function of each runtime, and the one endpoint address its slice lists. */
const FN: Record<RuntimeName, { name: string; address: string }> = {
  nodejs20: { name: 'node-streams', address: '10.3.0.1' },
  'python3.11': { name: 'py-streams', address: '10.3.0.2' },
  'go1.21': { name: 'go-streams', address: '10.3.0.3' },
};

/** Writes `files` (keyed by their path under `prefix/`) into `dir`. */
function writeFiles(dir: string, prefix: string, files: Record<string, string>): void {
  for (const [file, text] of Object.entries(files)) {
    if (!file.startsWith(`${prefix}/`) || file.endsWith('function.yaml')) continue;
    const to = path.join(dir, file.slice(prefix.length + 1));
    mkdirSync(path.dirname(to), { recursive: true });
    writeFileSync(to, text);
  }
}

const work = mkdtempSync(path.join(tmpdir(), 'sless-kube-streams-'));
/** Each runtime's server, started once and shared by both threads' suites. */
const servers = new Map<RuntimeName, Running>();
/** Plays the Service address: counts what reaches it, and answers 502. */
let service: Server;
let serviceSeen = 0;

beforeAll(async () => {
  const nodeDir = path.join(work, 'node');
  writeFiles(nodeDir, 'fn', { 'fn/handler.js': NODE, ...vendoredWs('fn') });
  const pyDir = path.join(work, 'python');
  const pyDeps = path.join(work, 'python-deps');
  writeFiles(pyDir, 'fn', streamFunction('fn', 'python3.11'));
  const goDir = path.join(work, 'go');
  const goBinary = path.join(work, 'go-handler');
  writeFiles(goDir, 'fn', streamFunction('fn', 'go1.21'));

  const pyLaunch = interpretedLaunch('python3.11', pyDir, 'handler.handle');
  // As a build installs the function's requirements.txt, and as the image's PYTHONPATH finds them.
  const [installed, built] = await Promise.all([
    runToExit(
      pyLaunch.command,
      [
        '-m',
        'pip',
        'install',
        '--target',
        pyDeps,
        '-r',
        path.join(pyDir, 'requirements.txt'),
        '--no-input',
        '--quiet',
      ],
      {},
      180_000,
    ),
    buildGo(goDir, goBinary, 'handler.Handle'),
  ]);
  expect(installed.code, installed.stderr).toBe(0);
  expect(built.code, built.stderr).toBe(0);

  const launches: Record<RuntimeName, Launch> = {
    nodejs20: interpretedLaunch('nodejs20', nodeDir, 'handler.handle'),
    'python3.11': { ...pyLaunch, env: { ...pyLaunch.env, PYTHONPATH: pyDeps } },
    'go1.21': binaryLaunch(goBinary, 'handler.Handle'),
  };
  for (const runtime of RUNTIMES)
    servers.set(
      runtime,
      await startRuntime(launches[runtime], {
        SLESS_TIMEOUT_SEC: '30',
        SLESS_FUNCTION_NAME: FN[runtime].name,
        SLESS_NAMESPACE: 'streams',
      }),
    );
  service = createServer((req, res) => {
    req.resume();
    serviceSeen++;
    res.writeHead(502).end('service');
  });
  service.on('upgrade', (_req, socket) => {
    serviceSeen++;
    socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  });
  await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
}, 300_000);

afterAll(async () => {
  for (const server of servers.values()) await server.stop();
  if (service) await new Promise((r) => service.close(r));
  rmSync(work, { recursive: true, force: true });
});

for (const thread of [false, true]) {
  describe(`kube /fn/ streams and WebSockets in every runtime, from the ${thread ? 'gateway' : 'main'} thread`, () => {
    let env: KubeEnv;
    let repo: RemoteRepo;
    let gateway: Gateway | undefined;
    let system: KubeSystem;
    let stopKubelet: (() => void) | undefined;
    const resolvedOnMain: string[] = [];
    /** What the Service address had seen once every endpoint was in use. */
    let serviceBefore = 0;

    const url = (runtime: RuntimeName, p: string) => `${system.url}/fn/${env.ns}/${FN[runtime].name}${p}`;
    const json = async (runtime: RuntimeName, p: string) => {
      const res = await fetch(url(runtime, p));
      return {
        status: res.status,
        body: (await res.json().catch(() => undefined)) as Record<string, unknown>,
      };
    };

    beforeAll(async () => {
      env = await kubeEnv(thread ? 'rsthread' : 'rsmain');
      const files: Record<string, string> = {};
      for (const runtime of RUNTIMES) {
        const { name } = FN[runtime];
        files[`${name}/function.yaml`] = functionManifest(name, {
          runtime,
          entrypoint: runtime === 'go1.21' ? 'handler.Handle' : 'handler.handle',
        });
      }
      repo = await startRemoteRepo(files);
      gateway = thread ? await Gateway.start('127.0.0.1', 0) : undefined;
      const byAddress = new Map(RUNTIMES.map((runtime) => [FN[runtime].address, runtime]));
      const servicePort = (service.address() as AddressInfo).port;
      system = await startKubeSystem(
        { ...env.config, leaderElection: { ...env.config.leaderElection, enabled: false } },
        {
          logger,
          kubeConfig: env.cluster.kubeConfig,
          originOf: () => `http://127.0.0.1:${servicePort}`,
          endpointOrigin: (address) => {
            const runtime = byAddress.get(address);
            return `http://127.0.0.1:${runtime ? servers.get(runtime)?.port : servicePort}`;
          },
          pollMs: 100,
          ...(gateway ? { listener: gateway, gateway } : {}),
        },
      );
      recordResolves(system, resolvedOnMain);
      stopKubelet = playHealthyKubelet(env.http, env.ns);
      await system.store.apply(gitSource('repo', env.ns, repo.url));
      const commit = await git(repo.work.dir, 'rev-parse', 'HEAD');
      for (const runtime of RUNTIMES) await completeBuild(env, FN[runtime].name, commit, commit);
      for (const runtime of RUNTIMES) {
        const { name, address } = FN[runtime];
        const status = await eventually(
          `${name} Ready`,
          async () => {
            const found = (await system.store.get('Function', env.ns, name))?.status as
              | FunctionStatus
              | undefined;
            return found?.phase === 'Ready' && found.servingRevision ? found : undefined;
          },
          30_000,
        );
        const pod = `${name}-${address.replaceAll('.', '-')}`;
        // Plays the kubelet: the Pod object, with the revision annotation the pod template gives.
        await env.http.request('POST', `/api/v1/namespaces/${env.ns}/pods`, {
          body: {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: {
              name: pod,
              labels: {
                'app.kubernetes.io/name': name,
                'app.kubernetes.io/component': 'function',
                'sless.dev/function': name,
                'app.kubernetes.io/managed-by': 'sless',
              },
              annotations: { 'sless.dev/revision': status.servingRevision },
            },
            spec: { containers: [{ name: 'function', image: 'function:test' }] },
          },
        });
        // Plays the EndpointSlice controller: the one ready endpoint, that pod.
        await apply(env.http, ENDPOINT_SLICE, {
          apiVersion: 'discovery.k8s.io/v1',
          kind: 'EndpointSlice',
          metadata: {
            name: `${name}-abcde`,
            namespace: env.ns,
            labels: {
              'sless.dev/function': name,
              'app.kubernetes.io/managed-by': 'sless',
              'kubernetes.io/service-name': name,
            },
          },
          addressType: 'IPv4',
          endpoints: [
            {
              addresses: [address],
              conditions: { ready: true },
              targetRef: { kind: 'Pod', namespace: env.ns, name: pod },
            },
          ],
          ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
        });
      }
      for (const runtime of RUNTIMES)
        await eventually(
          `${FN[runtime].name} answered by its endpoint`,
          async () => (await json(runtime, '/observed?id=none')).status === 200,
          30_000,
        );
      if (thread)
        await eventually('served by the thread', async () => {
          const before = resolvedOnMain.length;
          for (const runtime of RUNTIMES)
            if ((await json(runtime, '/observed?id=none')).status !== 200) return false;
          return resolvedOnMain.length === before;
        });
      serviceBefore = serviceSeen;
    }, 180_000);

    afterAll(async () => {
      stopKubelet?.();
      await system?.stop();
      await repo?.close();
      await env?.close();
    });

    /** Nothing went to the Service address, and on the thread path the main thread resolved nothing. */
    const throughEndpointsOnly = (from: number) => {
      expect(serviceSeen).toBe(serviceBefore);
      if (thread) expect(resolvedOnMain.slice(from)).toEqual([]);
    };

    const target = (runtime: RuntimeName) => ({
      url: (p: string) => url(runtime, p),
      json: (p: string) => json(runtime, p),
    });

    it.each(RUNTIMES)(
      '%s: the first SSE event reaches the client while the handler still runs',
      async (runtime) => {
        const from = resolvedOnMain.length;
        await expectFirstEventBeforeTheLast(target(runtime));
        throughEndpointsOnly(from);
      },
    );

    it.each(RUNTIMES)(
      '%s: a client that leaves a stream cancels the handler, which observes it',
      async (runtime) => {
        const from = resolvedOnMain.length;
        await expectLeavingCancelsTheHandler(target(runtime));
        throughEndpointsOnly(from);
      },
    );

    it.each(RUNTIMES)('%s: a WebSocket echoes text and binary messages', async (runtime) => {
      const from = resolvedOnMain.length;
      await expectWebSocketEcho(target(runtime), `hello ${runtime}`);
      throughEndpointsOnly(from);
    });
  });
}
