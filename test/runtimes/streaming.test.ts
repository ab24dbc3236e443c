// Runtime contract, streamed answers: the same cases against the Node, Python and Go runtimes as
// real child processes serving test/runtimes/fixtures/<runtime>/. A first event reaches the client
// while its handler still waits (for a gate only the test opens), a client that leaves cancels its
// handler, a failing stream is cut short, and whole-value answers keep their framing.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { pollUntil } from '../helpers/poll-until.ts';
import { openStream } from '../helpers/stream-reader.ts';
import {
  binaryLaunch,
  buildGo,
  FIXTURES_DIR,
  interpretedLaunch,
  type Launch,
  type Running,
  type RuntimeName,
  runToExit,
  startRuntime,
} from './harness.ts';

const BASE_ENV = { SLESS_TIMEOUT_SEC: '1', SLESS_FUNCTION_NAME: 'stream-fn', SLESS_NAMESPACE: 'stream-ns' };

const goDir = mkdtempSync(path.join(tmpdir(), 'sless-go-stream-'));
const goBinary = path.join(goDir, 'handler');

beforeAll(async () => {
  const built = await buildGo(path.join(FIXTURES_DIR, 'go1.21'), goBinary, 'handler.Handle');
  expect(built.code, built.stderr).toBe(0);
});

afterAll(() => rmSync(goDir, { recursive: true, force: true }));

interface StreamingSpec {
  name: RuntimeName;
  launch: () => Launch;
  /** Paths whose handler sends "data: first", waits for /release?id=, then sends "data: last". */
  gated: string[];
  /** Paths whose handler sends "data: first", then waits until the client leaves, and records it. */
  held: Array<{ path: string; observed: string }>;
}

const RUNTIMES: StreamingSpec[] = [
  {
    name: 'nodejs20',
    launch: () => interpretedLaunch('nodejs20', path.join(FIXTURES_DIR, 'nodejs20'), 'handler.handle'),
    gated: ['/sse', '/sse-web'],
    held: [{ path: '/hold', observed: 'aborted' }],
  },
  {
    name: 'python3.11',
    launch: () => interpretedLaunch('python3.11', path.join(FIXTURES_DIR, 'python3.11'), 'handler.handle'),
    gated: ['/sse', '/sse-async'],
    held: [
      { path: '/hold', observed: 'cancelled' },
      { path: '/hold-async', observed: 'cancelled' },
    ],
  },
  {
    name: 'go1.21',
    launch: () => binaryLaunch(goBinary, 'handler.Handle'),
    gated: ['/sse'],
    held: [{ path: '/hold', observed: 'cancelled: context canceled' }],
  },
];

async function getJson(url: string): Promise<unknown> {
  const res = await request(url);
  expect(res.statusCode).toBe(200);
  return res.body.json();
}

describe.each(RUNTIMES)('runtime $name streams', (rt) => {
  let server: Running;
  beforeAll(async () => {
    server = await startRuntime(rt.launch(), BASE_ENV);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it.each(rt.gated)('%s: the first event reaches the client before the handler has finished', async (p) => {
    const id = randomUUID();
    const stream = await openStream(`${server.url}${p}?id=${id}`);
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toBe('text/event-stream');
      expect(stream.headers['content-length']).toBeUndefined();
      expect(stream.headers['transfer-encoding']).toBe('chunked');
      await stream.until('data: first\n\n');
      // The handler cannot finish before the gate opens, so this event came while it still ran.
      expect(stream.received()).toBe('data: first\n\n');
      expect(stream.isOver()).toBe(false);
      expect(await getJson(`${server.url}/release?id=${id}`)).toEqual({ released: id });
      expect(await stream.ended()).toBe('data: first\n\ndata: last\n\n');
    } finally {
      stream.leave();
    }
  });

  it('a stream that has started outlives SLESS_TIMEOUT_SEC', async () => {
    const id = randomUUID();
    const stream = await openStream(`${server.url}/sse?id=${id}`);
    try {
      await stream.until('data: first\n\n');
      // A whole-value request started after the stream's first event times out: the timeout has
      // passed since the stream started, and the stream must still be open.
      const slow = await request(`${server.url}/slow`);
      expect(slow.statusCode).toBe(504);
      await slow.body.dump();
      expect(stream.isOver()).toBe(false);
      await getJson(`${server.url}/release?id=${id}`);
      expect(await stream.ended()).toBe('data: first\n\ndata: last\n\n');
    } finally {
      stream.leave();
    }
  });

  it.each(rt.held)(
    '$path: a client that leaves cancels the handler, which observes it',
    async ({ path: p, observed }) => {
      const id = randomUUID();
      const stream = await openStream(`${server.url}${p}?id=${id}`);
      await stream.until('data: first\n\n');
      expect(await getJson(`${server.url}/observed?id=${id}`)).toEqual({ observed: null });
      stream.leave();
      const seen = await pollUntil(
        'the handler observes the disconnect',
        async () =>
          ((await getJson(`${server.url}/observed?id=${id}`)) as { observed: string | null }).observed ??
          undefined,
        10_000,
        20,
      );
      expect(seen).toBe(observed);
      expect(server.proc.exitCode).toBeNull();
    },
  );

  it('a generator returned as the whole result streams 200 octet-stream, every byte in order', async () => {
    const res = await request(`${server.url}/big?mb=16`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(res.headers['content-length']).toBeUndefined();
    let length = 0;
    let onlyX = true;
    for await (const chunk of res.body) {
      length += (chunk as Buffer).length;
      if ((chunk as Buffer).some((byte) => byte !== 120)) onlyX = false;
    }
    expect(length).toBe(16 * 1024 * 1024);
    expect(onlyX).toBe(true);
  });

  it('a stream that fails midway is cut short, and the process keeps serving', async () => {
    const stream = await openStream(`${server.url}/stream-throws`);
    expect(stream.status).toBe(200);
    await expect(stream.ended()).rejects.toThrow();
    expect(server.stderr()).toContain('stream broke');
    const after = await request(`${server.url}/value`);
    expect(after.statusCode).toBe(200);
    expect(await after.body.json()).toEqual([1, 'two', { three: 3 }]);
  });

  it('whole-value answers keep a content-length, also on a connection that carried a stream', async () => {
    const id = randomUUID();
    const { Client } = await import('undici');
    const client = new Client(server.url, { pipelining: 1 });
    try {
      const first = client.request({ path: `/sse?id=${id}`, method: 'GET' });
      await pollUntil(
        'the gate is waited on',
        async () => (await request(`${server.url}/release?id=${id}`)).statusCode === 200,
        5000,
        20,
      );
      const streamed = await first;
      expect(await streamed.body.text()).toBe('data: first\n\ndata: last\n\n');
      const whole = await client.request({ path: '/value', method: 'GET' });
      expect(whole.statusCode).toBe(200);
      expect(whole.headers['content-length']).toBe('21');
      expect(whole.headers['transfer-encoding']).toBeUndefined();
      expect(await whole.body.json()).toEqual([1, 'two', { three: 3 }]);
      const echo = (await (await client.request({ path: '/echo', method: 'GET' })).body.json()) as {
        context: Record<string, unknown>;
      };
      // The context is what it was: the cancellation handle is not part of its JSON.
      expect(Object.keys(echo.context).sort()).toEqual([
        'deadlineMs',
        'functionName',
        'namespace',
        'requestId',
      ]);
    } finally {
      await client.close();
    }
  });

  it('one-shot mode collects a streamed result into the result line', async () => {
    const l = rt.launch();
    const res = await runToExit(
      l.command,
      l.args,
      { ...l.env, ...BASE_ENV, SLESS_EVENT: '{"action":"stream"}' },
      15_000,
    );
    expect(res.code, res.stderr).toBe(0);
    const last = res.stdout.trimEnd().split('\n').at(-1) ?? '';
    expect(JSON.parse(last.replace(/^SLESS_RESULT /, ''))).toEqual({ statusCode: 200, body: 'abc' });
  });
});

// Node's upgrade export is run through /fn/ with ws (test/local/websocket.test.ts); Go's
// sless.Upgrade and Python's upgrade() are checked here with the libraries runtimes/README.md names,
// github.com/coder/websocket (the Go fixture's go.mod, fetched by build.sh) and websockets (installed
// here with pip --target, as a local build installs a requirements.txt).
const pyDeps = mkdtempSync(path.join(tmpdir(), 'sless-py-ws-'));
afterAll(() => rmSync(pyDeps, { recursive: true, force: true }));

describe.each([
  { name: 'go1.21', launch: () => binaryLaunch(goBinary, 'handler.Handle') },
  {
    name: 'python3.11',
    launch: () => {
      const launch = interpretedLaunch('python3.11', path.join(FIXTURES_DIR, 'python3.11'), 'handler.handle');
      return { ...launch, env: { ...launch.env, PYTHONPATH: pyDeps } };
    },
  },
])('$name hands a connection to the handler', ({ name, launch }) => {
  let server: Running;
  beforeAll(async () => {
    if (name === 'python3.11') {
      const { command } = interpretedLaunch(
        'python3.11',
        path.join(FIXTURES_DIR, 'python3.11'),
        'handler.handle',
      );
      const installed = await runToExit(
        command,
        ['-m', 'pip', 'install', '--target', pyDeps, 'websockets==15.0.1', '--no-input', '--quiet'],
        {},
        180_000,
      );
      expect(installed.code, installed.stderr).toBe(0);
    }
    server = await startRuntime(launch(), BASE_ENV);
  }, 200_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("accepts a WebSocket with the language's library, keeps it past the timeout, and echoes", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}/ws`, { perMessageDeflate: false });
    try {
      const messages: string[] = [];
      let wake: (() => void) | undefined;
      ws.on('message', (data) => {
        messages.push(String(data));
        wake?.();
      });
      // ws checks the handshake (the 101 and its Sec-WebSocket-Accept) before 'open'.
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      // The timeout (1 s) passes while the connection is open: a whole-value request times out first.
      const slow = await request(`${server.url}/slow`);
      expect(slow.statusCode).toBe(504);
      await slow.body.dump();
      ws.send('ping-1');
      while (messages.length < 1) await new Promise<void>((resolve) => (wake = resolve));
      expect(messages).toEqual(['ping-1']);
    } finally {
      ws.terminate();
    }
  });
});
