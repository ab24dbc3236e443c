/**
 * One tenant's huge commit next to another tenant's one-line change, on the real local system: the
 * fair-share test and bench/fair-share.ts both drive it. Tenant B (`default`, source `test`) has one
 * running function; tenant A (`tenant-a`, source `big`) commits `count` functions at once, all built
 * from one small code directory (5,000 manifests in one file keep the repository cheap to make).
 */
import type { FunctionStatus, GitSourceStatus } from '../../src/core/resources.js';
import { functionManifest, gitSource, nodeHandler, TestRepo } from './git.js';
import { eventually, startTestSystem, type TestSystem } from './local-system.js';

export const TENANT_A = 'tenant-a';

export interface BacklogScenario {
  system: TestSystem;
  /** Commits tenant A's `count` functions and resolves once they are all applied (the backlog). */
  commitBacklog(): Promise<void>;
  /** Commits a one-line change to B's running function. */
  changeB(version: number): Promise<void>;
  /** B's function answers with this version. */
  bServes(version: number): Promise<boolean>;
  /** How many of A's functions have been reconciled at the backlog commit (built, then run or refused). */
  backlogDone(): Promise<number>;
  close(): Promise<void>;
}

function manyFunctions(count: number): string {
  const docs: string[] = [];
  for (let i = 0; i < count; i++)
    docs.push(functionManifest(`fn-${String(i).padStart(5, '0')}`, { source: { path: 'code' } }));
  return docs.join('---\n');
}

export async function startBacklogScenario(count: number): Promise<BacklogScenario> {
  const repoB = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return 'v0';`),
  });
  const repoA = await TestRepo.create({ 'README.md': 'nothing yet\n' });
  const system = await startTestSystem({
    url: repoB.dir,
    env: {
      SLESS_QUOTA_FUNCTIONS: String(count),
      // Tenant A's backlog is built in full, but only a few of its functions may run.
      SLESS_QUOTA_PROCESSES: '4',
    },
  });
  const bServes = async (version: number) => {
    const response = await system.call('/fn/default/hello');
    return (await response.text()) === `"v${version}"`;
  };
  await eventually(() => bServes(0), 60_000, "tenant B's first deploy");
  await system.store.ensureNamespace(TENANT_A);
  await system.store.apply(gitSource('big', TENANT_A, repoA.dir));
  let backlogCommit = '';
  return {
    system,
    bServes,
    async commitBacklog() {
      backlogCommit = await repoA.commit({
        'functions.yaml': manyFunctions(count),
        'code/handler.js': nodeHandler(`return 'a';`),
      });
      await eventually(
        async () =>
          ((await system.store.get('GitSource', TENANT_A, 'big'))?.status as GitSourceStatus | undefined)
            ?.lastSyncedCommit === backlogCommit,
        600_000,
        "tenant A's commit to be applied",
      );
    },
    async changeB(version: number) {
      await repoB.commit({ 'hello/handler.js': nodeHandler(`return 'v${version}';`) });
    },
    async backlogDone() {
      const functions = await system.store.list('Function', { namespace: TENANT_A });
      return functions.filter((f) => {
        const status = f.status as FunctionStatus | undefined;
        return status?.commit === backlogCommit && (status.phase === 'Ready' || status.phase === 'Failed');
      }).length;
    },
    async close() {
      // Builds in flight finish before their state directory goes.
      await system.controller.stop();
      await system.controller.idle();
      await system.close();
      await repoA.remove();
      await repoB.remove();
    },
  };
}
