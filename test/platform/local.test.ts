/**
 * The platform contract on the embedded local platform: a real sless system (startTestSystem) on a
 * git repository made with the git CLI, real builds and real runtime processes behind the real proxy.
 * Nothing is played here: builds, crashes and job runs happen because of the code the contract commits.
 *
 * Unsandboxed (`--sandbox off`, single-user mode): the FunctionJob's handler appends each run to a
 * file of the test's, which a sandboxed function could not write (test/security covers sandboxed runs).
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { TestRepo, tempDir } from '../helpers/git.js';
import { startTestSystem } from '../helpers/local-system.js';
import { CRASH_MESSAGE, type PlatformUnderTest, platformContract, served } from './contract.js';

const NAMESPACE = 'default';

async function localPlatform(): Promise<PlatformUnderTest> {
  const runLog = join(await tempDir('contract-runs'), 'runs.txt');
  const repo = await TestRepo.create({ 'README.md': 'the platform contract commits here\n' });
  const system = await startTestSystem({ url: repo.dir, sandbox: 'off' });
  /** Successful builds: one directory per build key (fewer than the history limit of 5 here). */
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
  return {
    namespace: NAMESPACE,
    sourceName: 'test',
    jobEnv: { RUN_LOG: runLog },
    commit: (files) => repo.commit(files),
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
    api: async (method, path, body) =>
      served(
        await system.call(path, {
          method,
          ...(body === undefined
            ? {}
            : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        }),
      ),
    // The build runs by itself; a failing one fails because of the code committed.
    finishBuild: async () => undefined,
    failBuild: async () => 'npm install failed',
    // A crashing handler crashes by itself.
    rollouts: async () => CRASH_MESSAGE,
    builds: async (name) => (await succeeded(name)).length + (await failed(name)).length,
    workloadGone: async (name) =>
      system.platform.currentRevision(NAMESPACE, name) === undefined &&
      (await succeeded(name)).length === 0 &&
      (await failed(name)).length === 0,
    // A run ends by itself.
    finishJobRun: async () => undefined,
    jobRuns: async () => (await readFile(runLog, 'utf8').catch(() => '')).split('\n').filter(Boolean).length,
    settle: () => system.controller.idle(),
    stop: async () => {
      await system.close();
      await repo.remove();
      await rm(dirname(runLog), { recursive: true, force: true });
    },
  };
}

platformContract('local', localPlatform);
