/**
 * A real git host end to end: Gitea (built from its Go module) holds the repository, created through
 * its API and pushed to over HTTP; its own signed webhook makes sless sync; sless posts the deploy
 * status with the source's token and the test reads it back through Gitea's API: `success` with the
 * function's URL, `failure` naming the file for a broken manifest, and with Gitea down while a commit
 * deploys, the commit serves anyway and its status lands once Gitea is back.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { Gitea, giteaAvailable } from '../helpers/gitea.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const HOOK_SECRET = 'gitea-hook-secret-41d2';

/** Gitea answers with the state under `status`. */
interface GiteaStatus {
  status: string;
  description: string;
  target_url: string;
  context: string;
}

describe.skipIf(!giteaAvailable)(
  'Gitea: push → signed webhook → deploy → commit status',
  { timeout: 4 * 60_000 },
  () => {
    let gitea: Gitea;
    let system: TestSystem;
    let emptyServer: Awaited<ReturnType<typeof startGitHttpServer>>;
    let work: TestRepo;
    let logs = '';

    const statuses = async (sha: string) =>
      (await gitea.api<GiteaStatus[]>('GET', `/repos/${gitea.user}/site/statuses/${sha}`)).body;
    const push = async (files: Record<string, string>, message: string) => {
      const sha = await work.commit(files, message);
      await git(work.dir, 'push', '--quiet', 'origin', 'main');
      return sha;
    };

    beforeAll(async () => {
      gitea = await Gitea.start();
      const created = await gitea.api('POST', '/user/repos', {
        name: 'site',
        default_branch: 'main',
        auto_init: false,
      });
      expect(created.status).toBe(201);
      work = await TestRepo.create({ 'README.md': 'site\n' });
      await git(work.dir, 'remote', 'add', 'origin', gitea.pushUrl('site'));
      await git(work.dir, 'push', '--quiet', 'origin', 'main');

      const root = await tempDir('gitea-empty');
      await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'empty.git');
      emptyServer = await startGitHttpServer(root);
      const sink = new Writable({
        write(chunk, _encoding, done) {
          logs += chunk.toString();
          done();
        },
      });
      system = await startTestSystem({
        url: `${emptyServer.url}/empty.git`,
        logger: pino({ level: 'info' }, sink),
        env: {
          SLESS_SECRET_DEFAULT__GITEA_TOKEN: gitea.token,
          SLESS_WEBHOOK_SECRET_DEFAULT__SITE: HOOK_SECRET,
        },
      });
      const registered = await system.call('/v1/namespaces/default/sources', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          name: 'site',
          spec: {
            url: `${gitea.url}/${gitea.user}/site.git`,
            secretRef: { name: 'gitea' },
            interval: '1h',
            commitStatus: { provider: 'gitea' },
          },
        }),
      });
      expect(registered.status).toBe(201);
      const hook = await gitea.api('POST', `/repos/${gitea.user}/site/hooks`, {
        type: 'gitea',
        active: true,
        events: ['push'],
        config: {
          url: `${system.url}/v1/webhooks/default/site`,
          content_type: 'json',
          secret: HOOK_SECRET,
        },
      });
      expect(hook.status).toBe(201);
    }, 3 * 60_000);

    afterAll(async () => {
      await system?.close();
      await emptyServer?.close();
      await gitea?.close();
      await work?.remove();
    });

    test('a push is deployed through the webhook and gets success with the URL on its commit', async () => {
      const sha = await push(
        { 'web/function.yaml': functionManifest('web'), 'web/handler.js': nodeHandler("return 'v1';") },
        'web v1',
      );
      const success = await eventually(
        async () => (await statuses(sha)).find((s) => s.status === 'success'),
        90_000,
        'success on the commit in Gitea',
      );
      const fn = (await (await system.call('/v1/namespaces/default/functions/web')).json()) as {
        status: { url: string; servingCommit: string };
      };
      expect(fn.status.servingCommit).toBe(sha);
      expect(success).toMatchObject({
        context: 'sless',
        description: 'web serving',
        target_url: fn.status.url,
      });
      expect((await statuses(sha)).map((s) => s.status)).toContain('pending');
      // The sync came from Gitea's signed webhook: the poll interval is an hour.
      expect(logs).toContain('"msg":"source synced"');
      expect(logs).not.toContain(gitea.token);
    });

    test('a broken manifest gets failure naming the file', async () => {
      const sha = await push(
        { 'web/function.yaml': functionManifest('web', { memoryMb: 99999 }) },
        'too big',
      );
      const failure = await eventually(
        async () => (await statuses(sha)).find((s) => s.status === 'failure'),
        60_000,
        'failure on the commit in Gitea',
      );
      expect(failure.description).toContain('web/function.yaml');
      expect(failure.description).toContain('spec.memoryMb');
      await push({ 'web/function.yaml': functionManifest('web') }, 'fixed');
    });

    test('with Gitea down while a commit deploys, the commit serves, and its status lands once Gitea is back', async () => {
      const sha = await push({ 'web/handler.js': nodeHandler("return 'v3';") }, 'web v3');
      // Once sless has the commit (fetched through the webhook's sync), the host goes away.
      await eventually(
        async () => {
          const source = (await (await system.call('/v1/namespaces/default/sources/site')).json()) as {
            status?: { lastSyncedCommit?: string };
          };
          return source.status?.lastSyncedCommit === sha;
        },
        60_000,
        'synced the new commit',
      );
      await gitea.down();
      await eventually(
        async () => (await (await system.call('/fn/default/web')).json()) === 'v3',
        60_000,
        'v3 serves',
      );
      await eventually(
        async () => logs.includes('commit status: host unreachable; retrying'),
        30_000,
        'a failed post',
      );
      await gitea.up();
      await eventually(
        async () => (await statuses(sha)).find((s) => s.status === 'success'),
        90_000,
        'the late success',
      );
      expect(logs).not.toContain(gitea.token);
    });
  },
);
