/**
 * The platform contract on the embedded local platform: a real sless system (startTestSystem) on a
 * git repository made with the git CLI, real builds and real runtime processes behind the real proxy.
 * Nothing is played here: builds, crashes and job runs happen because of the code the contract commits.
 *
 * Unsandboxed (`--sandbox off`, single-user mode): the FunctionJob's handler appends each run to a
 * file of the test's, which a sandboxed function could not write (test/security covers sandboxed runs).
 */
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { DEFAULT_BUILD_HISTORY } from '../../src/config/config.js';
import { DEFAULT_AUTOSCALE_TICK_MS } from '../../src/platform/local/local-autoscaler.js';
import { afterTicks } from '../helpers/after-ticks.js';
import { git, TestRepo, tempDir } from '../helpers/git.js';
import { startTestSystem } from '../helpers/local-system.js';
import {
  type ContractServices,
  CRASH_MESSAGE,
  type PlatformUnderTest,
  PREVIEWS,
  platformContract,
  RUN_FAILURE_MESSAGE,
  releaseGateOf,
  served,
} from './contract.js';

const NAMESPACE = 'default';
const OTHER_NAMESPACE = 'other';
/** The build history limit the contract's platform runs with: sless's default. */
const BUILD_HISTORY = DEFAULT_BUILD_HISTORY;

/** Every file under `dir`, depth first. */
async function* walk(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.isFile()) yield path;
  }
}

async function localPlatform({ gate, sops }: ContractServices): Promise<PlatformUnderTest> {
  const runLog = join(await tempDir('contract-runs'), 'runs.txt');
  const repo = await TestRepo.create({ 'README.md': 'the platform contract commits here\n' });
  const logLines: string[] = [];
  const capture = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  const system = await startTestSystem({
    url: repo.dir,
    sandbox: 'off',
    previews: PREVIEWS,
    sopsAgeKeyFile: sops.keyFile,
    env: {
      SLESS_BUILD_HISTORY: String(BUILD_HISTORY),
      SLESS_LLM_ENABLED: 'true',
      LLM_ENDPOINT: gate.url,
      LLM_API_KEY: gate.apiKey,
      LLM_TIMEOUT: '5s',
      SLESS_SOPS_BINARY: sops.binary,
    },
    logger: pino({ level: 'debug' }, capture),
  });
  const request = async (method: string, path: string, body?: unknown) =>
    served(
      await system.call(path, {
        method,
        ...(body === undefined
          ? {}
          : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      }),
    );
  // The other namespace exists before the contract puts a secret there, as a user's would.
  const ensured = await request('POST', `/v1/namespaces/${OTHER_NAMESPACE}/ensure`);
  if (ensured.status >= 300) throw new Error(`ensure ${OTHER_NAMESPACE}: ${JSON.stringify(ensured)}`);
  /** Successful builds: one directory per build key, the history limit's newest and those in use. */
  const succeeded = async (name: string) => {
    const entries = await readdir(join(system.stateDir, 'builds', NAMESPACE, name)).catch(() => []);
    return entries.filter((e) => !e.includes('.staging-'));
  };
  /** Failed builds: their verdicts, written before the failure is reported (state/failed-builds.json). */
  const failed = async (name: string) => {
    const text = await readFile(join(system.stateDir, 'state', 'failed-builds.json'), 'utf8').catch(() => '');
    const data = text ? ((JSON.parse(text) as { data?: Record<string, unknown> }).data ?? {}) : {};
    return Object.keys(data).filter((key) => key.startsWith(`${NAMESPACE}/${name}/`));
  };
  /** What functions wrote to RUN_LOG: job runs' events and instance starts, a JSON object a line. */
  const runLogLines = async () =>
    (await readFile(runLog, 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .map(
        (line) =>
          JSON.parse(line) as {
            job?: string;
            started?: string;
            held?: string;
            delivered?: string;
            tag?: string;
            attempt?: number;
          },
      );
  return {
    namespace: NAMESPACE,
    sourceName: 'test',
    countingEnv: { RUN_LOG: runLog },
    commit: (files) => repo.commit(files),
    // The system reads the repository itself, so a branch is there once its ref is.
    pushBranch: async (branch, files) => {
      if (files) return repo.commitBranch(branch, files);
      await git(repo.dir, 'update-ref', '-d', `refs/heads/${branch}`);
      return undefined;
    },
    sync: async (options) => {
      await system.controller.syncNow(NAMESPACE, 'test', options);
    },
    source: () => system.store.get('GitSource', NAMESPACE, 'test'),
    fn: (name) => system.store.get('Function', NAMESPACE, name),
    trigger: (name) => system.store.get('Trigger', NAMESPACE, name),
    job: (name) => system.store.get('FunctionJob', NAMESPACE, name),
    applyJob: async (name, spec) => {
      if (spec === null) await system.store.delete('FunctionJob', NAMESPACE, name);
      else
        await system.store.apply({
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'FunctionJob',
          metadata: { name, namespace: NAMESPACE },
          spec,
        });
    },
    call: async (name) => served(await system.call(`/fn/${NAMESPACE}/${name}`)),
    api: request,
    otherNamespace: OTHER_NAMESPACE,
    // As `sless secret set` does: the whole secret, through the API, into the sealed store.
    setSecret: async (name, data, namespace = NAMESPACE) => {
      const answer = await request('PUT', `/v1/namespaces/${namespace}/secrets/${name}`, {
        stringData: data,
      });
      if (answer.status >= 300) throw new Error(`set secret ${namespace}/${name}: ${JSON.stringify(answer)}`);
    },
    logged: () => logLines.join(''),
    // The sealed store is under it too: sealed, it holds no value in any form the contract looks for.
    stored: async () => {
      const files: string[] = [];
      for await (const path of walk(system.stateDir))
        files.push(`${path}\n${(await readFile(path)).toString('latin1')}`);
      return files.join('\n');
    },
    // The build runs by itself; a failing one fails because of the code committed.
    finishBuild: async () => undefined,
    failBuild: async () => 'npm install failed',
    // A crashing handler crashes by itself.
    rollouts: async () => CRASH_MESSAGE,
    builds: async (name) => (await succeeded(name)).length + (await failed(name)).length,
    buildHistory: BUILD_HISTORY,
    workloadGone: async (name) =>
      system.platform.currentRevision(NAMESPACE, name) === undefined &&
      (await succeeded(name)).length === 0 &&
      (await failed(name)).length === 0,
    // A run ends by itself, and fails by itself when its handler throws.
    finishJobRun: async () => undefined,
    failJobRun: async () => RUN_FAILURE_MESSAGE,
    // Each run appends its event, which names its FunctionJob, to the one log every job's function shares.
    jobRuns: async (job) => (await runLogLines()).filter((line) => line.job === job).length,
    // A handler written with `instance` logs each start to the same file, naming its function.
    starts: async (name) => (await runLogLines()).filter((line) => line.started === name).length,
    // A handler written with `hold` logs each request it holds, and waits for the gate beside the log.
    held: async (name) => (await runLogLines()).filter((line) => line.held === name).length,
    // A handler written with `answers` logs each tagged request it is sent, naming its function.
    deliveries: async (name) =>
      (await runLogLines())
        .filter((line) => line.delivered === name)
        .map((line) => ({ tag: String(line.tag), attempt: Number(line.attempt) })),
    autoscalerWatched: (ms) => afterTicks(system.autoscaler, Math.ceil(ms / DEFAULT_AUTOSCALE_TICK_MS) + 1),
    release: async () => {
      await writeFile(releaseGateOf(runLog), '');
    },
    // A function that autoscales runs as many processes as it has instances; a parked one none.
    running: async (name) =>
      system.platform.scalable().find((s) => s.key === `${NAMESPACE}/${name}`)?.instances ??
      (!system.platform.isParked(NAMESPACE, name) && system.platform.processId(NAMESPACE, name) !== undefined
        ? 1
        : 0),
    settle: () => system.controller.idle(),
    stop: async () => {
      await system.close();
      await repo.remove();
      await rm(dirname(runLog), { recursive: true, force: true });
    },
  };
}

platformContract('local', localPlatform);
