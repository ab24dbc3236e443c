/**
 * A real RabbitMQ broker (Debian's rabbitmq-server) per test run: its own node name, free ports, its
 * own epmd and HOME (the Erlang cookie), and its data and logs in a temporary directory. `stop()`
 * ends the broker's process group and its epmd, both started here, and removes the directory, so
 * nothing is left behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import amqp, { type Channel, type GetMessage } from 'amqplib';
import { freePort } from '../../src/platform/local/ports.js';
import { tempDir } from './git.js';
import { pollUntil } from './poll-until.js';

const SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server';

export interface RabbitMq {
  /** amqp://guest:guest@127.0.0.1:PORT/ (guest may connect from loopback). */
  url: string;
  port: number;
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<unknown> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : once(child, 'exit');
}

/** A start that failed because a process exited early: worth one more try on fresh ports. */
class StartFailed extends Error {}

/** Waits for `ready`, but fails at once (with the process's last output) if `child` exits first. */
async function unlessExited<T>(
  ready: Promise<T>,
  child: ChildProcess,
  what: string,
  output: () => string,
): Promise<T> {
  let onExit: (() => void) | undefined;
  const died = new Promise<never>((_, reject) => {
    onExit = () => reject(new StartFailed(`${what} exited before it was ready: ${output()}`));
    if (child.exitCode !== null || child.signalCode !== null) onExit();
    else child.once('exit', onExit);
  });
  try {
    return await Promise.race([ready, died]);
  } finally {
    if (onExit) child.off('exit', onExit);
    died.catch(() => undefined);
  }
}

function acceptsTcp(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', reject);
  });
}

/**
 * One start on fresh ports. epmd is waited for before the broker starts, because the broker's
 * prelaunch registers with it at once and stops with `nodistribution` if nothing answers yet.
 */
async function startOnce(): Promise<RabbitMq> {
  const dir = await tempDir('rabbitmq');
  const [port, distPort, epmdPort] = [await freePort(), await freePort(), await freePort()];
  const home = join(dir, 'home');
  await mkdir(home, { recursive: true });
  await writeFile(join(dir, 'enabled_plugins'), '[].\n');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: home,
    ERL_EPMD_PORT: String(epmdPort),
    RABBITMQ_NODENAME: `sless-test-${port}@localhost`,
    RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
    RABBITMQ_NODE_PORT: String(port),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: join(dir, 'log'),
    RABBITMQ_LOGS: join(dir, 'log', 'rabbit.log'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
    RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq'),
    RABBITMQ_ADVANCED_CONFIG_FILE: join(dir, 'advanced.config'),
    RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
    // epmd is this helper's own child below, so the broker must not start (and leave) another.
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-start_epmd false',
  };
  const epmd = spawn('epmd', ['-port', String(epmdPort)], { env, stdio: 'ignore' });
  try {
    await unlessExited(
      pollUntil(`epmd listens on ${epmdPort}`, () => acceptsTcp(epmdPort), 20_000, 50),
      epmd,
      'epmd',
      () => '',
    );
  } catch (error) {
    epmd.kill('SIGKILL');
    await exited(epmd);
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  let output = '';
  const broker = spawn(SERVER, [], { env, cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  broker.stdout?.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  });
  broker.stderr?.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  });
  const url = `amqp://guest:guest@127.0.0.1:${port}/`;
  const stop = async () => {
    if (broker.pid !== undefined && broker.exitCode === null && broker.signalCode === null) {
      // The process group: the start script and the beam.smp it runs (with its erl_child_setup).
      try {
        process.kill(-broker.pid, 'SIGTERM');
      } catch {
        // Already gone.
      }
      const killed = setTimeout(() => {
        try {
          if (broker.pid !== undefined) process.kill(-broker.pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }, 20_000);
      await exited(broker);
      clearTimeout(killed);
    }
    epmd.kill('SIGKILL');
    await exited(epmd);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await unlessExited(
      pollUntil(
        'rabbitmq accepts AMQP connections',
        async () => {
          const connection = await amqp.connect(url);
          await connection.close();
          return true;
        },
        90_000,
        250,
      ),
      broker,
      'rabbitmq-server',
      () => output,
    );
  } catch (error) {
    await stop();
    if (error instanceof StartFailed) throw error;
    throw new Error(`${(error as Error).message}\n${output}`);
  }
  return { url, port, stop };
}

/**
 * Starts a broker; a start whose process exits early (a port taken between choosing and binding
 * it, say) is tried again on fresh ports, twice at most, with the reason on stderr.
 */
export async function startRabbitMq(): Promise<RabbitMq> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce();
    } catch (error) {
      if (!(error instanceof StartFailed) || attempt === 3) throw error;
      process.stderr.write(
        `[rabbitmq] start ${attempt} failed, trying fresh ports: ${error.message.slice(0, 300)}\n`,
      );
    }
  }
}

/** Every message in `queue`, taken (and acknowledged) by the test, in order. */
export async function drainQueue(channel: Channel, queue: string): Promise<GetMessage[]> {
  const taken: GetMessage[] = [];
  for (;;) {
    const message = await channel.get(queue, { noAck: true });
    if (!message) return taken;
    taken.push(message);
  }
}

/**
 * An amqp Trigger of the function `worker`, as a repository holds it, whose broker URL is the `url` of
 * the Secret `rabbit` in its namespace.
 */
export function amqpTriggerYaml(name: string, spec: Record<string, unknown>): string {
  return `apiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: ${name}\nspec: ${JSON.stringify({
    type: 'amqp',
    function: 'worker',
    secretRef: { name: 'rabbit' },
    ...spec,
  })}\n`;
}
