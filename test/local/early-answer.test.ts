/**
 * An answer given before the request body was read (a 413 for a body over the limit) must reach the
 * client as that status with `Connection: close`, and the server must not keep the socket afterwards,
 * however stubborn the client. The real `sless dev` is started, in both thread modes, and 30 MB
 * bodies are sent to the webhook endpoint, 8 at a time, with content-length and chunked. The clients
 * keep writing after the answer and never close their side; the sockets the server still holds to
 * its port are then counted in /proc/net/tcp.
 */
import { readFile, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/platform/local/ports.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';
import { SlessProcess } from '../helpers/sless-process.js';

const BODY_BYTES = 30 * 1024 * 1024;
const PARALLEL = 8;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

interface Outcome {
  status: number | undefined;
  connection: string | undefined;
  /** From the request's first byte to the answer's headers. */
  answerMs: number | undefined;
  /** From the answer to the server's FIN or reset (undefined: neither had come when the test looked). */
  closeMs: number | undefined;
  bytesSent: number;
  /** The start of the answer's body, for a failure's message. */
  body?: string;
  error: string | undefined;
  localPort: number;
}

/**
 * One upload from a client that does not give up: it writes the whole body whatever the server
 * answers, and never closes (allowHalfOpen) or destroys its side; only the server can end it.
 */
function upload(
  port: number,
  chunked: boolean,
  sockets: Socket[],
  path = '/v1/webhooks/default/examples',
  bodyBytes = BODY_BYTES,
): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    sockets.push(socket);
    const started = Date.now();
    let answeredAt: number | undefined;
    const outcome: Outcome = {
      status: undefined,
      connection: undefined,
      answerMs: undefined,
      closeMs: undefined,
      bytesSent: 0,
      error: undefined,
      localPort: 0,
    };
    let head = '';
    // An upload that never gets an answer is an outcome too (status undefined), not a hung test.
    const giveUp = setTimeout(() => resolve(outcome), 15_000);
    socket.on('data', (data: Buffer) => {
      if (answeredAt !== undefined) return;
      head += data.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      answeredAt = Date.now();
      const [statusLine = '', ...lines] = head.slice(0, end).split('\r\n');
      outcome.status = Number(statusLine.split(' ')[1]);
      for (const line of lines) {
        const [name = '', ...value] = line.split(':');
        if (name.toLowerCase() === 'connection') outcome.connection = value.join(':').trim().toLowerCase();
      }
      outcome.answerMs = answeredAt - started;
      outcome.body = head.slice(end + 4, end + 200);
      // The answer is what the test waits for; the close is looked at later, with the server's sockets.
      clearTimeout(giveUp);
      resolve(outcome);
    });
    // The server's FIN ('end') or its reset ('error', then 'close'): either way the server let go.
    const closed = () => {
      if (answeredAt !== undefined) outcome.closeMs ??= Date.now() - answeredAt;
    };
    socket.on('error', (error: NodeJS.ErrnoException) => {
      outcome.error ??= error.code ?? error.message;
      closed();
    });
    socket.on('end', closed);
    socket.on('close', () => {
      closed();
      clearTimeout(giveUp);
      resolve(outcome);
    });
    socket.once('connect', () => {
      outcome.localPort = socket.localPort ?? 0;
      socket.write(
        `POST ${path} HTTP/1.1\r\n` +
          `host: 127.0.0.1:${port}\r\n` +
          'content-type: application/json\r\n' +
          'x-github-event: push\r\n' +
          'x-hub-signature-256: sha256=0000000000000000000000000000000000000000000000000000000000000000\r\n' +
          (chunked ? 'transfer-encoding: chunked\r\n' : `content-length: ${bodyBytes}\r\n`) +
          '\r\n',
      );
      const writeMore = () => {
        while (outcome.bytesSent < bodyBytes && !socket.destroyed && socket.writable) {
          const framed = chunked
            ? Buffer.concat([Buffer.from(`${CHUNK.length.toString(16)}\r\n`), CHUNK, Buffer.from('\r\n')])
            : CHUNK;
          outcome.bytesSent += CHUNK.length;
          if (!socket.write(framed)) {
            socket.once('drain', writeMore);
            return;
          }
        }
        if (chunked && outcome.bytesSent >= bodyBytes && socket.writable) socket.write('0\r\n\r\n');
      };
      writeMore();
    });
  });
}

/**
 * The server's TCP sockets to `peers` on `port` that a process still holds (a non-zero inode):
 * ESTABLISHED ones, and ones it ended but not yet closed. A socket the server closed is the kernel's
 * alone (inode 0, FIN_WAIT2 while the client keeps its side open) or gone.
 */
async function serverSockets(port: number, peers: Set<number>): Promise<string[]> {
  const held: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const table = await readFile(file, 'utf8').catch(() => '');
    for (const line of table.split('\n').slice(1)) {
      const [, local, remote, state, , , , , , inode] = line.trim().split(/\s+/);
      if (!local || !remote || !state || inode === undefined || inode === '0') continue;
      const localPort = Number.parseInt(local.split(':')[1] ?? '', 16);
      const remotePort = Number.parseInt(remote.split(':')[1] ?? '', 16);
      if (localPort === port && peers.has(remotePort))
        held.push(state === '01' ? 'ESTABLISHED' : `state ${state}`);
    }
  }
  return held;
}

describe.each([
  ['the proxy thread', 'on'],
  ['the main thread', 'off'],
])('a body over the limit, answered early from %s', { timeout: 3 * 60_000 }, (_how, proxyThread) => {
  let repo: TestRepo;
  let stateDir: string;
  let sless: SlessProcess;
  let port: number;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'hello/function.yaml': functionManifest('hello'),
      'hello/handler.js': nodeHandler(`return 'hello';`),
    });
    stateDir = await tempDir('early-answer');
    port = await freePort();
    sless = await SlessProcess.start({
      repo: repo.dir,
      stateDir,
      port,
      env: { SLESS_PROXY_THREAD: proxyThread, SLESS_WEBHOOK_SECRET_DEFAULT__EXAMPLES: 'early-answer-secret' },
    });
  });

  afterAll(async () => {
    await sless?.stop('SIGKILL');
    await repo?.remove();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  /** 8 uploads at once; every one must get `status` with connection: close, and no socket may stay. */
  async function earlyAnswers(chunked: boolean, path?: string, bodyBytes?: number, status = 413) {
    const sockets: Socket[] = [];
    try {
      const outcomes = await Promise.all(
        Array.from({ length: PARALLEL }, () => upload(port, chunked, sockets, path, bodyBytes)),
      );
      const peers = new Set(outcomes.map((o) => o.localPort));
      let open: string[] = [];
      const since = Date.now();
      await eventually(
        async () => {
          open = await serverSockets(port, peers);
          return open.length === 0;
        },
        10_000,
        'the server closed every connection that got an early answer',
      ).catch((error: Error) => {
        throw new Error(`${error.message}: still held: ${open.join(', ')}; ${JSON.stringify(outcomes)}`);
      });
      const allClosedMs = Date.now() - since;
      console.log(
        `proxy thread ${proxyThread}, ${path ?? 'webhook'}, ${chunked ? 'chunked' : 'content-length'}: codes`,
        JSON.stringify(outcomes.map((o) => o.status)),
        'answer ms',
        JSON.stringify(outcomes.map((o) => o.answerMs)),
        'close ms',
        JSON.stringify(outcomes.map((o) => o.closeMs)),
        'client errors',
        JSON.stringify(outcomes.map((o) => o.error ?? null)),
        'MiB sent',
        JSON.stringify(outcomes.map((o) => Math.round(o.bytesSent / 2 ** 20))),
        `server sockets closed ${allClosedMs} ms after the last answer`,
      );
      expect(outcomes.map((o) => [o.status, o.connection])).toEqual(outcomes.map(() => [status, 'close']));
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }

  it.each([
    ['content-length', false],
    ['chunked', true],
  ])(
    'answers 413 with connection: close (%s, 8 in parallel) and keeps no socket',
    async (_framing, chunked) => {
      await earlyAnswers(chunked);
    },
  );

  it("passes on a function's early 413 with connection: close and keeps no socket", async () => {
    await eventually(
      async () => (await sless.call('/fn/default/hello')).status === 200,
      60_000,
      'hello serves',
    );
    // Over the Node runtime's 32 MiB limit, declared up front: it answers 413 before reading the body.
    // (Chunked, it reads up to the limit first; that answer is not an early one.)
    await earlyAnswers(false, '/fn/default/hello', 40 * 1024 * 1024);
  });
});
