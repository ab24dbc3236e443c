/**
 * The commit status posts as the git hosts receive them, recorded by a real HTTP server through the
 * same outbound-guarded client sless uses: GitHub's, GitLab's and Gitea's request shapes, retries
 * with backoff on 5xx and on an unreachable host, no retry on a 4xx, a newer report replacing a
 * waiting one, and the token in the header only, never in a log line.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { CommitStatusReporter } from '../../src/commitstatus/reporter.js';
import { senderOver } from '../../src/commitstatus/wire.js';
import {
  ANNOTATION_COMMIT,
  ANNOTATION_MANIFEST,
  type GitSource,
  LABEL_SOURCE,
  type SlessFunction,
} from '../../src/core/resources.js';
import { MemoryStore } from '../../src/platform/local/memory-store.js';
import { guardedGitHttp } from '../../src/source/guarded-http.js';
import { OutboundPolicy } from '../../src/source/outbound.js';
import { pollUntil } from '../helpers/poll-until.js';
import { RecordingServer } from '../helpers/recording-server.js';

const TOKEN = 'tok-3f9a-never-logged';
const SHA = 'a'.repeat(40);
const http = guardedGitHttp(new OutboundPolicy(['127.0.0.1/32'], []));
let host: RecordingServer;
let reporter: CommitStatusReporter | undefined;
let logged = '';

beforeAll(async () => {
  host = await RecordingServer.start();
});
afterAll(async () => {
  await host.stop();
  await http.close();
});
afterEach(async () => {
  await reporter?.stop();
  reporter = undefined;
  host.requests.length = 0;
  host.answers.length = 0;
});

function source(
  provider: 'github' | 'gitlab' | 'gitea',
  url: string,
  status: GitSource['status'],
): GitSource {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name: 'site', namespace: 'team' },
    spec: { url, branch: 'main', commitStatus: { provider, apiUrl: `${host.url}/api`, context: 'deploy' } },
    status,
  } as GitSource;
}

function fn(phase: string, url?: string): SlessFunction {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: {
      name: 'web',
      namespace: 'team',
      labels: { [LABEL_SOURCE]: 'site' },
      annotations: { [ANNOTATION_COMMIT]: SHA, [ANNOTATION_MANIFEST]: 'web/function.yaml#0' },
    },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle' },
    status: { phase, commit: SHA, ...(url ? { url } : {}), conditions: [] },
  } as unknown as SlessFunction;
}

const synced = { lastAttemptedCommit: SHA, lastSyncedCommit: SHA };

/** Applies the object and then its status, as the controller's status writer does. */
async function put(store: MemoryStore, object: GitSource | SlessFunction): Promise<void> {
  const applied = await store.apply(object);
  if (object.status) await store.patchStatus(applied, object.status);
}

function start(store: MemoryStore, options: { maxAttempts?: number } = {}): CommitStatusReporter {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logged += chunk.toString();
      done();
    },
  });
  reporter = new CommitStatusReporter({
    store,
    send: senderOver(http),
    token: async () => TOKEN,
    logger: pino({ level: 'debug' }, sink),
    externalUrl: 'http://sless.example',
    retryDelayMs: 20,
    maxDelayMs: 200,
    settleMs: 10,
    ...options,
  });
  reporter.start();
  return reporter;
}

describe('request shapes', () => {
  test('GitHub: POST /repos/{owner}/{repo}/statuses/{sha} with a Bearer token; pending, then success with the URL', async () => {
    const store = new MemoryStore();
    start(store);
    await put(store, source('github', 'https://github.com/acme/site.git', synced));
    await put(store, fn('Building'));
    await pollUntil('pending', async () => host.requests.length >= 1, 5000, 10);
    await put(store, fn('Ready', 'http://sless.example/fn/team/web'));
    await pollUntil('success', async () => host.requests.length >= 2, 5000, 10);
    const [pending, success] = host.requests;
    expect(pending?.method).toBe('POST');
    expect(pending?.path).toBe(`/api/repos/acme/site/statuses/${SHA}`);
    expect(pending?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(pending?.headers.accept).toBe('application/vnd.github+json');
    expect(pending?.headers['content-type']).toBe('application/json');
    expect(pending?.body).toEqual({ state: 'pending', context: 'deploy', description: 'deploying web' });
    expect(success?.body).toEqual({
      state: 'success',
      context: 'deploy',
      description: 'web serving',
      target_url: 'http://sless.example/fn/team/web',
    });
    expect(host.requests).toHaveLength(2);
    expect(logged).not.toContain(TOKEN);
  });

  test('GitLab: POST /projects/{url-encoded path}/statuses/{sha} with PRIVATE-TOKEN; failure is "failed" with the file', async () => {
    const store = new MemoryStore();
    start(store);
    await put(store, source('gitlab', 'https://gitlab.example/group/sub/site.git', synced));
    const failed = fn('Failed');
    (failed.status as Record<string, unknown>).lastError = 'build failed: npm ci exited 1';
    await put(store, failed);
    await pollUntil('failure', async () => host.requests.length >= 1, 5000, 10);
    const [post] = host.requests;
    expect(post?.path).toBe(`/api/projects/group%2Fsub%2Fsite/statuses/${SHA}`);
    expect(post?.headers['private-token']).toBe(TOKEN);
    expect(post?.headers.authorization).toBeUndefined();
    expect(post?.body).toEqual({
      state: 'failed',
      name: 'deploy',
      description: 'web/function.yaml: web: build failed: npm ci exited 1',
    });
  });

  test('Gitea: POST /repos/{owner}/{repo}/statuses/{sha} with "token"; a rejected commit fails with its reason', async () => {
    const store = new MemoryStore();
    start(store);
    await put(
      store,
      source('gitea', 'https://git.example/acme/site.git', {
        lastAttemptedCommit: SHA,
        lastSyncedCommit: 'b'.repeat(40),
        conditions: [
          {
            type: 'Stalled',
            status: 'True',
            reason: 'ValidationFailed',
            message: 'web/function.yaml#0: spec.memoryMb: must be <= 4096',
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      } as GitSource['status']),
    );
    await pollUntil('failure', async () => host.requests.length >= 1, 5000, 10);
    const [post] = host.requests;
    expect(post?.path).toBe(`/api/repos/acme/site/statuses/${SHA}`);
    expect(post?.headers.authorization).toBe(`token ${TOKEN}`);
    expect(post?.body).toEqual({
      state: 'failure',
      context: 'deploy',
      description: 'rejected: web/function.yaml#0: spec.memoryMb: must be <= 4096',
    });
  });
});

describe('delivery', () => {
  test('a 5xx is retried with backoff until the host takes it; a 4xx is not retried', async () => {
    const store = new MemoryStore();
    host.answers.push(503, 502);
    start(store);
    await put(store, source('github', 'https://github.com/acme/site.git', synced));
    await pollUntil('third attempt', async () => host.requests.length >= 3, 5000, 10);
    expect(host.requests.map((r) => (r.body as { state: string }).state)).toEqual([
      'success',
      'success',
      'success',
    ]);
    await reporter?.stop();
    host.requests.length = 0;

    const other = new MemoryStore();
    host.answers.push(422);
    start(other);
    await put(other, source('github', 'https://github.com/acme/site.git', synced));
    await pollUntil('the refused post', async () => host.requests.length >= 1, 5000, 10);
    // A retry would come after 20 ms; the reporter goes idle instead, with nothing in flight.
    await reporter?.stop();
    expect(host.requests).toHaveLength(1);
    expect(logged).toContain('commit status refused by the host');
    expect(logged).not.toContain(TOKEN);
  });

  test('an unreachable host is retried, and gives up after the attempts allowed, logging no token', async () => {
    const store = new MemoryStore();
    start(store, { maxAttempts: 3 });
    const down = source('github', 'https://github.com/acme/site.git', synced);
    (down.spec as { commitStatus: { apiUrl: string } }).commitStatus.apiUrl = 'http://127.0.0.1:9/api';
    logged = '';
    await put(store, down);
    await pollUntil('given up', async () => logged.includes('given up after retries'), 5000, 10);
    expect(logged.match(/host unreachable; retrying/g)).toHaveLength(3);
    expect(logged).not.toContain(TOKEN);
    expect(host.requests).toHaveLength(0);
  });
});
