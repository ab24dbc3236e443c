#!/usr/bin/env node
/**
 * `sless dev [--repo PATH|URL] [--branch B] [--previews 'feature/*,…'] [--port P]`: the embedded platform; `sless controller`:
 * the kube platform; `sless validate [dir]`: check manifests without running anything; `sless logs`:
 * a function's output.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { ConfigError, loadLocalConfig } from '../config/config.js';
import type { GitSource } from '../core/resources.js';
import { startupMark } from '../core/startup-marks.js';
import { EarlyListener } from '../server/early-listener.js';
import { Gateway } from '../server/gateway/gateway.js';
import { ensureExamplesRepository } from './examples-repo.js';
import { LOGS_USAGE, printLogs } from './logs.js';
import { SECRET_USAGE } from './secret.js';
import { stopOnSignals } from './stop-on-signals.js';
import { UsageError, VALIDATE_USAGE } from './usage.js';

const USAGE = `usage: sless dev [--repo PATH|URL] [--branch B] [--previews 'feature/*,…'] [--port P] [--host H] [--interval 10s] [--scale-to-zero-after 5m] [--max-stream-duration 1h] [--build-history 5] [--state-dir DIR] [--sandbox auto|off] [--sops-age-key-file FILE] [--json]\n       ${VALIDATE_USAGE}\n       ${LOGS_USAGE}\n       ${SECRET_USAGE}`;

async function currentBranch(path: string): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)('git', ['symbolic-ref', '--short', 'HEAD'], { cwd: path });
    return stdout.trim() || 'main';
  } catch {
    return 'main';
  }
}

/** The repository `sless dev` watches (examples-repo/ copied into a git repository by default). */
async function locateRepository(
  config: ReturnType<typeof loadLocalConfig>,
): Promise<{ repo: string; branch: string; created: boolean }> {
  let repo = config.repo;
  let created = false;
  if (repo === undefined) {
    const made = await ensureExamplesRepository(config.examplesDir, join(config.stateDir, 'examples-repo'));
    repo = made.path;
    created = made.created;
  }
  const branch = config.branch ?? (repo.startsWith('/') ? await currentBranch(repo) : 'main');
  return { repo, branch, created };
}

async function dev(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      repo: { type: 'string' },
      branch: { type: 'string' },
      previews: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      interval: { type: 'string' },
      'scale-to-zero-after': { type: 'string' },
      'build-history': { type: 'string' },
      'state-dir': { type: 'string' },
      namespace: { type: 'string' },
      sandbox: { type: 'string' },
      'proxy-thread': { type: 'string' },
      'max-stream-duration': { type: 'string' },
      'sops-age-key-file': { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  startupMark('cli');
  const config = loadLocalConfig(values);
  // The port first: the rest of sless (the API, the proxy, their schemas) loads behind it, and
  // requests that arrive meanwhile wait for it (see EarlyListener).
  // With the proxy thread, the thread takes the port once it has loaded the proxy, on the other core,
  // while this thread loads the rest.
  const listening = (
    config.proxyThread
      ? Gateway.start(config.host, config.port, { maxStreamMs: config.maxStreamSeconds * 1000 })
      : EarlyListener.listen(config.host, config.port)
  ).then((listener) => {
    startupMark('listening');
    return listener;
  });
  // The repository and its branch (a git child process) are found while the rest of sless loads.
  const located = locateRepository(config);
  const [listener, { createLogger, startLocalSystem }, { repo, branch, created }] = await Promise.all([
    listening,
    import('../main.js'),
    located,
  ]);
  const gateway = listener instanceof Gateway ? listener : undefined;
  startupMark('main loaded');
  const logger = createLogger(config);
  if (created) logger.info({ repo }, 'created a git repository from examples-repo/');
  const source: GitSource = {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name: config.sourceName, namespace: config.namespace },
    spec: {
      url: repo,
      branch,
      path: '.',
      interval: config.interval,
      suspend: false,
      ...previewsFlag(values.previews),
    },
  };
  // Handlers come first: a start serves restored revisions at once, and a signal that arrives while it
  // does must still stop them cleanly rather than kill sless outright.
  const starting = startLocalSystem(config, { logger, source, listener, ...(gateway ? { gateway } : {}) });
  const signals = stopOnSignals({
    logger,
    message: 'stopping: every function process is stopped first',
    stop: () => starting.then((system) => system.stop()),
    gateway,
  });
  const system = await starting;
  if (signals.stopping()) return;

  await system.controller.syncNow(config.namespace, config.sourceName);
  await system.controller.idle();
  const functions = await system.store.list('Function', { namespace: config.namespace });
  const api = `${config.externalUrl}/v1/namespaces/${config.namespace}`;
  const lines = [
    '',
    `sless is serving on ${config.externalUrl}`,
    `  dashboard: ${config.externalUrl}/ui/`,
    `  watching ${repo} (branch ${branch}); commit there and the change is live in about a second`,
    ...functions.map(
      (f) =>
        `  ${f.metadata.name.padEnd(16)} ${(f.status?.phase ?? 'Pending').padEnd(8)} curl ${f.status?.url ?? ''}`,
    ),
    `  status:   curl ${api}/functions`,
    `  triggers: curl ${api}/triggers   (cron: lastRun, nextRun, lastResult)`,
    `  jobs:     curl ${api}/jobs       (FunctionJob results)`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  switch (command) {
    case 'dev':
    case undefined:
      await dev(rest);
      return;
    case 'controller':
      await (await import('./controller.js')).runController(rest);
      return;
    case 'logs':
      process.exitCode = await printLogs(rest, {
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
      });
      return;
    case 'secret':
      process.exitCode = await (await import('./secret.js')).secretCommand(rest, {
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
        readStdin: async () => {
          const chunks: Buffer[] = [];
          for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
          return Buffer.concat(chunks);
        },
      });
      return;
    case 'validate': {
      const outcome = await (await import('./validate.js')).validateWorkingTree(rest);
      process.stdout.write(`${outcome.lines.join('\n')}\n`);
      process.exitCode = outcome.exitCode;
      return;
    }
    default:
      process.stderr.write(`unknown command "${command}"\n${USAGE}\n`);
      process.exit(2);
  }
}

main().catch((error: unknown) => {
  if (
    error instanceof ConfigError ||
    error instanceof UsageError ||
    (error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION'
  ) {
    process.stderr.write(`sless: ${(error as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  // A taken port is the user's to resolve, not a crash: the message says which one.
  if ((error as { code?: string }).code === 'EADDRINUSE') {
    process.stderr.write(`sless: ${(error as Error).message}; choose another with --port\n`);
    process.exit(1);
  }
  process.stderr.write(`sless: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});

/** `--previews 'feature/*,fix/*'`: spec.previews of the source, one pattern per comma-separated part. */
function previewsFlag(flag: string | undefined): Pick<GitSource['spec'], 'previews'> {
  if (flag === undefined) return {};
  const branches = flag
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  // A pattern that is no branch name simply matches nothing; the GitSource schema's check is for manifests.
  if (branches.length === 0) throw new UsageError('--previews needs at least one branch pattern');
  return { previews: { branches } };
}
