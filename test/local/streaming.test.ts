/**
 * Streamed answers through /fn/, from the proxy thread and from the main thread, against real
 * Node runtime processes: headers before the first byte, events while the handler still runs, the
 * function's timeout on idle gaps only, the maximum stream duration, back-pressure from a slow
 * reader with sless's memory flat over a 200 MB body, and an open stream counting as activity for
 * scale to zero. And the Python and Go runtimes through /fn/: an SSE event while the handler still
 * runs, and a client that leaves cancelling the handler.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, TestRepo } from '../helpers/git.js';
import {
  eventually,
  startStreamRuntimes,
  startTestSystem,
  type TestSystem,
} from '../helpers/local-system.js';
import { pollUntil } from '../helpers/poll-until.js';
import { STREAM_RUNTIMES } from '../helpers/stream-functions.js';
import { openStream } from '../helpers/stream-reader.js';

// One handler for every function here: gates the test opens with /release, and counters the test
// reads back, in the function's own process.
const HANDLER = `
const gates = new Map();
const seen = new Map();
let producedMb = 0;
const gate = (id) => {
  let g = gates.get(id);
  if (!g) { let open; g = { promise: new Promise((r) => (open = r)), open }; gates.set(id, g); }
  return g;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sse = (body) => ({ statusCode: 200, headers: { 'content-type': 'text/event-stream' }, body });
exports.handle = async (event, context) => {
  const id = String(event.query.id ?? '');
  switch (event.path) {
    case '/release': gate(id).open(); return { released: id };
    case '/seen': return { seen: seen.get(id) ?? null };
    case '/produced': return { mb: producedMb };
    case '/late-first':
      return sse((async function* () { await gate(id).promise; yield 'data: first\\n\\n'; })());
    case '/sse':
      return sse((async function* () { yield 'data: first\\n\\n'; await gate(id).promise; yield 'data: last\\n\\n'; })());
    case '/every':
      return sse((async function* () {
        for (let i = 0; i < Number(event.query.n); i++) { yield 'data: ' + i + '\\n\\n'; await sleep(Number(event.query.ms)); }
      })());
    case '/stall':
      return sse((async function* () {
        try {
          yield 'data: first\\n\\n';
          await new Promise((r) => context.signal.addEventListener('abort', r));
          seen.set(id, 'aborted');
        } finally { if (!seen.has(id)) seen.set(id, 'ended'); }
      })());
    case '/forever':
      return sse((async function* () {
        try { while (!context.signal.aborted) { yield 'data: tick\\n\\n'; await sleep(100); } seen.set(id, 'aborted'); }
        finally { if (!seen.has(id)) seen.set(id, 'ended'); }
      })());
    case '/big': {
      producedMb = 0;
      const chunk = Buffer.alloc(1024 * 1024, 120);
      return (function* () { for (let i = 0; i < Number(event.query.mb); i++) { producedMb = i + 1; yield chunk; } })();
    }
    default: return { ok: true };
  }
};
`;

/**
 * Long enough that the 200 MB body below ends well inside it on a loaded machine (at 8 s a CI run
 * under load cut it short), short enough that the cut case stays quick.
 */
const MAX_STREAM = '25s';

describe.each([
  ['the proxy thread', true],
  ['the main thread', false],
])('streamed answers through /fn/ from %s', (_how, proxyThread) => {
  let repo: TestRepo;
  let system: TestSystem;
  const fn = (name: string, path: string) => `${system.url}/fn/default/${name}${path}`;
  const json = async (url: string) => (await fetch(url)).json() as Promise<Record<string, unknown>>;

  beforeAll(async () => {
    repo = await TestRepo.create({
      'streams/function.yaml': functionManifest('streams', { timeoutSec: 1 }),
      'streams/handler.js': HANDLER,
      'lazy-stream/function.yaml': functionManifest('lazy-stream', { scaleToZero: { idleSeconds: 1 } }),
      'lazy-stream/handler.js': HANDLER,
      'lazy-idle/function.yaml': functionManifest('lazy-idle', { scaleToZero: { idleSeconds: 1 } }),
      'lazy-idle/handler.js': HANDLER,
    });
    system = await startTestSystem({
      url: repo.dir,
      proxyThread,
      env: { SLESS_MAX_STREAM_DURATION: MAX_STREAM },
    });
    await eventually(
      async () =>
        (await system.functionStatus('streams'))?.phase === 'Ready' &&
        (await system.functionStatus('lazy-stream'))?.phase === 'ScaledToZero' &&
        (await system.functionStatus('lazy-idle'))?.phase === 'ScaledToZero',
      60_000,
      'functions deployed',
    );
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('sends the headers as soon as the function does, before its first byte', async () => {
    const id = randomUUID();
    // Resolves on the status and headers: the first byte of the body waits for the gate.
    const stream = await openStream(fn('streams', `/late-first?id=${id}`));
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toBe('text/event-stream');
      expect(stream.headers['x-accel-buffering']).toBe('no');
      expect(stream.headers['content-length']).toBeUndefined();
      expect(stream.received()).toBe('');
      await json(fn('streams', `/release?id=${id}`));
      expect(await stream.ended()).toBe('data: first\n\n');
    } finally {
      stream.leave();
    }
  });

  it('passes each event on while the handler still runs', async () => {
    const id = randomUUID();
    const stream = await openStream(fn('streams', `/sse?id=${id}`));
    try {
      await stream.until('data: first\n\n');
      // The handler waits for the gate before its last event: the first came while it ran.
      expect(stream.isOver()).toBe(false);
      expect(stream.received()).toBe('data: first\n\n');
      await json(fn('streams', `/release?id=${id}`));
      expect(await stream.ended()).toBe('data: first\n\ndata: last\n\n');
    } finally {
      stream.leave();
    }
  });

  it('lets a stream run past timeoutSec while its gaps stay shorter', async () => {
    // timeoutSec is 1: eight events 300 ms apart last well over it.
    const stream = await openStream(fn('streams', '/every?n=8&ms=300'));
    const body = await stream.ended();
    expect(body).toBe(Array.from({ length: 8 }, (_, i) => `data: ${i}\n\n`).join(''));
  });

  it('cuts a stream whose gap passes timeoutSec, and the handler is told', async () => {
    const id = randomUUID();
    // A steady stream opened first is cut by the maximum duration first: while it is still open,
    // whatever cut the stalled one was its gap.
    const steady = await openStream(fn('streams', `/forever?id=${randomUUID()}`));
    await steady.until('data: tick\n\n');
    const stream = await openStream(fn('streams', `/stall?id=${id}`));
    await stream.until('data: first\n\n');
    // The status went out with the stream, so no 504 can follow: the cut is the answer.
    await expect(stream.ended()).rejects.toThrow();
    expect(steady.isOver()).toBe(false);
    steady.leave();
    expect(stream.received()).toBe('data: first\n\n');
    const seen = await pollUntil(
      'the handler sees the cut',
      async () => ((await json(fn('streams', `/seen?id=${id}`))).seen as string | null) ?? undefined,
      10_000,
      25,
    );
    expect(seen).toBe('aborted');
  });

  it(`cuts a stream at the maximum stream duration (${MAX_STREAM}) though it keeps sending`, async () => {
    const id = randomUUID();
    const stream = await openStream(fn('streams', `/forever?id=${id}`));
    await stream.until('data: tick\n\n');
    await expect(stream.ended()).rejects.toThrow();
    expect(stream.received().split('data: tick\n\n').length).toBeGreaterThan(2);
    const seen = await pollUntil(
      'the handler sees the cut',
      async () => ((await json(fn('streams', `/seen?id=${id}`))).seen as string | null) ?? undefined,
      10_000,
      25,
    );
    expect(seen).toBe('aborted');
  }, 60_000);

  it("a slow reader holds the function back, and sless's memory stays flat over 200 MB", async () => {
    const MB = 200;
    global.gc?.();
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sample = () => {
      peak = Math.max(peak, process.memoryUsage().rss);
    };
    const total = await new Promise<number>((resolve, reject) => {
      const req = http.get(fn('streams', `/big?mb=${MB}`), { agent: false }, (res) => {
        let bytes = 0;
        let paused = false;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          sample();
          if (paused) return;
          paused = true;
          // The reader stops after its first chunk: the function must stop soon after, far short of
          // the whole body, held back by the proxy rather than buffered in it.
          res.pause();
          void (async () => {
            let last = -1;
            const held = await pollUntil(
              'the function stops producing',
              async () => {
                const mb = (await json(fn('streams', '/produced'))).mb as number;
                sample();
                const stable = mb === last;
                last = mb;
                return stable ? mb : undefined;
              },
              20_000,
              250,
            );
            try {
              expect(held).toBeLessThan(MB / 2);
            } catch (error) {
              reject(error);
              req.destroy();
              return;
            }
            res.resume();
          })().catch(reject);
        });
        res.on('end', () => resolve(bytes));
        res.on('error', reject);
      });
      req.on('error', reject);
    });
    expect(total).toBe(MB * 1024 * 1024);
    const grewMb = (peak - baseline) / 1024 / 1024;
    console.log(`rss grew by ${grewMb.toFixed(1)} MB over a ${MB} MB streamed body`);
    expect(grewMb).toBeLessThan(MB / 2);
  }, 60_000);

  it('an open stream is activity: its function is not scaled to zero under it', async () => {
    const id = randomUUID();
    const stream = await openStream(fn('lazy-stream', `/sse?id=${id}`));
    try {
      await stream.until('data: first\n\n');
      // The other function, idle since this call, parks once its idle second has passed: by then
      // the streaming one has been idle as long, apart from its open stream.
      expect((await json(fn('lazy-idle', '/'))).ok).toBe(true);
      await eventually(
        async () => system.platform.isParked('default', 'lazy-idle'),
        20_000,
        'lazy-idle parked',
      );
      expect(system.platform.isParked('default', 'lazy-stream')).toBe(false);
      expect(stream.isOver()).toBe(false);
      await json(fn('lazy-stream', `/release?id=${id}`));
      expect(await stream.ended()).toBe('data: first\n\ndata: last\n\n');
      // Once the stream has ended, nothing holds it: it parks too.
      await eventually(
        async () => system.platform.isParked('default', 'lazy-stream'),
        20_000,
        'lazy-stream parked',
      );
    } finally {
      stream.leave();
    }
  }, 60_000);
});

describe('streamed answers through /fn/ from the Python and Go runtimes', () => {
  let repo: TestRepo;
  let system: TestSystem;
  const name = (runtime: string) => `streams-${runtime.replace(/[^a-z0-9]/g, '')}`;
  const fn = (runtime: string, path: string) => `${system.url}/fn/default/${name(runtime)}${path}`;
  const json = async (url: string) => (await fetch(url)).json() as Promise<Record<string, unknown>>;

  beforeAll(async () => {
    ({ repo, system } = await startStreamRuntimes(name));
  }, 300_000);

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it.each(STREAM_RUNTIMES)('%s: the first event arrives while the handler still runs', async (runtime) => {
    const id = randomUUID();
    const stream = await openStream(fn(runtime, `/sse?id=${id}`));
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toContain('text/event-stream');
      await stream.until('data: first\n\n');
      // The handler waits for the gate before its last event: the first came while it ran.
      expect(stream.isOver()).toBe(false);
      expect(stream.received()).toBe('data: first\n\n');
      await json(fn(runtime, `/release?id=${id}`));
      expect(await stream.ended()).toBe('data: first\n\ndata: last\n\n');
    } finally {
      stream.leave();
    }
  });

  it.each(STREAM_RUNTIMES)('%s: a client that leaves cancels the handler', async (runtime) => {
    const id = randomUUID();
    const stream = await openStream(fn(runtime, `/hold?id=${id}`));
    await stream.until('data: first\n\n');
    expect((await json(fn(runtime, `/observed?id=${id}`))).observed).toBeNull();
    stream.leave();
    const observed = await pollUntil(
      'the handler sees its client leave',
      async () => ((await json(fn(runtime, `/observed?id=${id}`))).observed as string | null) ?? undefined,
      10_000,
      25,
    );
    expect(observed).toBe('cancelled');
  });
});
