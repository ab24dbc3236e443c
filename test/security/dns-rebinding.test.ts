/**
 * DNS rebinding against the git client, for real: a UDP name server run by the test (dns2) answers
 * `git.rebind.test` first with an address the operator allowed (127.0.0.2 stands in for a public
 * host: SLESS_OUTBOUND_ALLOW=127.0.0.2/32), then, once the source synced, with 127.0.0.1, where a
 * second git server waits with other code. sless resolves tenant hosts through that name server
 * (SLESS_OUTBOUND_DNS, the operator's setting for which resolver tenant URLs use). Every new
 * connection is checked after resolution, so the rebound answer is refused before a socket opens:
 * the loopback server sees no connection, and its commit never reaches status.
 */
import { join } from 'node:path';
import dns2 from 'dns2';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { GitSourceStatus } from '../../src/core/resources.js';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const HOST = 'git.rebind.test';
const ALLOWED = '127.0.0.2';
const LOOPBACK = '127.0.0.1';

type GitServer = Awaited<ReturnType<typeof startGitHttpServer>>;

let answer = ALLOWED;
/** Every A answer the name server gave, in order. */
const answered: string[] = [];
let nameServer: ReturnType<typeof dns2.createUDPServer>;
let legit: GitServer;
let loopback: GitServer;
let loopbackConnections = 0;
/** Connections to the allowed server still open (a kept-alive one is reused without a lookup). */
let legitOpen = 0;
let legitWork: TestRepo;
let loopbackCommit: string;
let system: TestSystem;

/** A bare repository `fns.git` under a new root, holding one function, pushed from a work tree. */
async function repoWith(body: string): Promise<{ root: string; work: TestRepo; head: string }> {
  const root = await tempDir('rebind-git');
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
  const work = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return ${JSON.stringify(body)};`),
  });
  await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
  await git(work.dir, 'push', '--quiet', 'origin', 'main');
  return { root, work, head: await git(work.dir, 'rev-parse', 'HEAD') };
}

beforeAll(async () => {
  nameServer = dns2.createUDPServer((request, send) => {
    const response = dns2.Packet.createResponseFromRequest(request);
    const [question] = request.questions;
    // A records only; AAAA gets an empty answer, so IPv6 never offers a way around.
    if (question?.name === HOST && question.type === dns2.Packet.TYPE.A) {
      answered.push(answer);
      response.answers.push(dns2.Packet.createResourceFromQuestion(question, { ttl: 0, address: answer }));
    }
    send(response);
  });
  await nameServer.listen(0, LOOPBACK);
  const dnsPort = nameServer.address().port;

  // The loopback server takes a free port first; the allowed one then listens on the same port on
  // 127.0.0.2, so only the name's answer decides which server a connection reaches.
  const evil = await repoWith('from loopback');
  loopbackCommit = evil.head;
  loopback = await startGitHttpServer(evil.root, { host: LOOPBACK });
  loopback.server.on('connection', () => loopbackConnections++);
  const port = Number(new URL(loopback.url).port);
  const good = await repoWith('from the allowed host');
  legitWork = good.work;
  legit = await startGitHttpServer(good.root, { host: ALLOWED, port });
  legit.server.on('connection', (socket) => {
    legitOpen++;
    socket.on('close', () => legitOpen--);
  });

  system = await startTestSystem({
    url: `http://${HOST}:${port}/fns.git`,
    env: { SLESS_OUTBOUND_ALLOW: `${ALLOWED}/32`, SLESS_OUTBOUND_DNS: `${LOOPBACK}:${dnsPort}` },
  });
}, 60_000);

afterAll(async () => {
  await system?.close();
  await legit?.close();
  await loopback?.close();
  nameServer?.close();
  await legitWork?.remove();
});

test('a name that rebinds to loopback after a good sync is refused on the next connection', async () => {
  const first = await git(legitWork.dir, 'rev-parse', 'HEAD');
  await eventually(
    async () => (await system.sourceStatus())?.lastSyncedCommit === first,
    30_000,
    'first sync',
  );
  expect(answered[0]).toBe(ALLOWED);
  expect(legit.requests.length).toBeGreaterThan(0);

  // The name now points at this machine; a new commit gives the next sync something to fetch.
  answer = LOOPBACK;
  const rebindFrom = answered.length;
  await legitWork.commit({ 'hello/handler.js': nodeHandler(`return 'second';`) });
  await git(legitWork.dir, 'push', '--quiet', 'origin', 'main');

  // A kept-alive connection to 127.0.0.2 goes on serving without a lookup (and cannot be moved):
  // once the idle one is closed, the next sync must resolve the name again.
  await eventually(async () => legitOpen === 0, 30_000, 'the kept-alive connection to close');
  const response = await system.call('/v1/namespaces/default/sources/test/sync', { method: 'POST' });
  expect(response.status).toBe(200);
  const refused = (await response.json()) as { outcome: string; message?: string };
  expect(answered.slice(rebindFrom)).toContain(LOOPBACK);
  expect(refused.outcome).toBe('failed');
  expect(refused.message).toContain(`${HOST} is a loopback address`);
  const status = (await system.sourceStatus()) as GitSourceStatus;
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  expect(ready?.status).toBe('False');
  expect(ready?.message).toContain(`${HOST} is a loopback address`);
  // Refused before connecting: the loopback server never saw a socket, and nothing of its reached status.
  expect(loopbackConnections).toBe(0);
  expect(loopback.requests).toEqual([]);
  expect(JSON.stringify(status)).not.toContain(loopbackCommit);
  expect(JSON.stringify(status)).not.toContain('from loopback');
});
