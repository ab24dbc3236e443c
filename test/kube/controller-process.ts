/**
 * `sless controller` (the compiled CLI, bin/sless.js) as a child process configured by env, as it runs
 * in a pod: so that "the controller is killed" can be a real SIGKILL, with nothing flushed or released.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PACKAGE_ROOT } from '../../src/config/config.js';
import type { LeaderInfo } from '../../src/core/leadership.js';
import { eventually, type KubeEnv } from './harness.js';

/** A lease that a killed holder loses after 4 s. */
export const FAST_LEASE = {
  SLESS_LEASE_DURATION: '4s',
  SLESS_LEASE_RENEW_DEADLINE: '3s',
  SLESS_LEASE_RETRY_PERIOD: '500ms',
};

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

export async function readyz(url: string): Promise<{ status: string; leader: LeaderInfo } | undefined> {
  const res = await fetch(`${url}/readyz`).catch(() => undefined);
  return res?.ok ? ((await res.json()) as { status: string; leader: LeaderInfo }) : undefined;
}

/**
 * Starts a controller process whose functions' pods are all `upstream` (a server of the test's, listening)
 * and adds it to `processes`, the list the suite disposes of and prints the logs of.
 */
export async function startAgainst(
  env: KubeEnv,
  upstream: Server,
  processes: ControllerProcess[],
  identity: string,
  extraEnv: Record<string, string>,
): Promise<ControllerProcess> {
  const { port } = upstream.address() as AddressInfo;
  const p = new ControllerProcess(env, identity, await freePort(), extraEnv, `http://127.0.0.1:${port}`);
  processes.push(p);
  return p;
}

/** Writes each process's last log lines to stderr: what a failed test needs to see. */
export function printTails(processes: readonly ControllerProcess[]): void {
  for (const p of processes)
    process.stderr.write(`--- last log lines of ${p.identity} ---\n${p.tail.join('\n')}\n`);
}

export class ControllerProcess {
  readonly url: string;
  /** The last 200 lines it logged, for a failing test to print. */
  readonly tail: string[] = [];
  readonly exited: Promise<unknown>;
  private readonly child: ChildProcess;

  constructor(
    env: KubeEnv,
    readonly identity: string,
    port: number,
    extraEnv: Record<string, string> = {},
    /**
     * The one origin that plays every function's pods: then test/kube/controller-entry.mjs runs
     * instead of bin/sless.js, the same controller with that origin (and no gateway thread).
     */
    functionOrigin?: string,
  ) {
    this.url = `http://127.0.0.1:${port}`;
    const c = env.config;
    this.child = spawn(
      process.execPath,
      [
        ...(functionOrigin
          ? [join(PACKAGE_ROOT, 'test/kube/controller-entry.mjs')]
          : [join(PACKAGE_ROOT, 'bin/sless.js'), 'controller']),
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--namespace',
        env.controllerNs,
        '--watch-namespaces',
        env.ns,
      ],
      {
        cwd: PACKAGE_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          // The run's temp directory, which the run removes: a controller killed mid-build leaves its
          // build-context staging there, not in the machine's /tmp.
          TMPDIR: tmpdir(),
          KUBECONFIG: env.cluster.kubeconfigPath,
          POD_NAME: identity,
          SLESS_REGISTRY: c.registry,
          SLESS_REGISTRY_INSECURE: 'true',
          SLESS_S3_ENDPOINT: c.s3.endpoint,
          SLESS_S3_BUCKET: c.s3.bucket,
          SLESS_S3_REGION: c.s3.region,
          AWS_ACCESS_KEY_ID: c.s3.accessKeyId,
          AWS_SECRET_ACCESS_KEY: c.s3.secretAccessKey,
          SLESS_EXTERNAL_URL: c.externalUrl,
          SLESS_STATE_DIR: `${c.stateDir}-${identity}`,
          SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
          ...(functionOrigin ? { SLESS_TEST_FUNCTION_ORIGIN: functionOrigin } : {}),
          ...extraEnv,
        },
      },
    );
    this.exited = once(this.child, 'exit');
    for (const stream of [this.child.stdout, this.child.stderr])
      if (stream)
        createInterface({ input: stream }).on('line', (line) => {
          this.tail.push(line);
          if (this.tail.length > 200) this.tail.shift();
          if (process.env.SLESS_TEST_LOG) process.stderr.write(`[${identity}] ${line}\n`);
        });
  }

  /** Resolves once it serves /readyz and holds the Lease (it reconciles only then). */
  async leading(timeoutMs = 60_000): Promise<void> {
    await eventually(
      `${this.identity} leads`,
      async () => (await readyz(this.url))?.leader.isLeader,
      timeoutMs,
    );
  }

  /** Resolves once it serves /readyz, leader or not: who leads, as it sees it. */
  async ready(): Promise<LeaderInfo> {
    const started = Date.now();
    const info = (await eventually(`${this.url} ready`, () => readyz(this.url), 60_000)).leader;
    process.stdout.write(`${info.identity} ready after ${Date.now() - started} ms\n`);
    return info;
  }

  /** `POST …/sources/{name}/sync`: the sync's outcome. */
  async sync(namespace: string, source: string): Promise<string | undefined> {
    const res = await fetch(`${this.url}/v1/namespaces/${namespace}/sources/${source}/sync`, {
      method: 'POST',
    });
    return ((await res.json()) as { outcome?: string }).outcome;
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Killed (SIGKILL) unless it exited already; resolves once it has. */
  async dispose(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}
