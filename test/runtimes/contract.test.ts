// Runtime contract suite: one table of cases, run against the Node, Python and Go runtimes as real
// child processes serving the fixtures in test/runtimes/fixtures/<runtime>/ (same behaviours in each).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNTIME_INFO } from '../../src/core/runtimes.js';
import { RUNTIMES as ALL_RUNTIMES, type RuntimeName as CoreRuntimeName } from '../../src/core/schemas.js';
import {
  binaryLaunch,
  buildGo,
  type Exited,
  FIXTURES_DIR,
  freePort,
  interpretedLaunch,
  type Launch,
  type Running,
  runToExit,
  startRuntime,
  testToolchain,
} from './harness.ts';

const TIMEOUT_SEC = 1;
const BASE_ENV = {
  SLESS_TIMEOUT_SEC: String(TIMEOUT_SEC),
  SLESS_FUNCTION_NAME: 'contract-fn',
  SLESS_NAMESPACE: 'contract-ns',
};
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// --- Go binaries, built once ------------------------------------------------------------------------

const goDir = mkdtempSync(path.join(tmpdir(), 'sless-go-contract-'));
const goBin = {
  main: path.join(goDir, 'handler'),
  nested: path.join(goDir, 'nested'),
  nomod: path.join(goDir, 'nomod'),
};
/** A newer Go line's binaries: built by the toolchain of that line (go1.21 takes the machine's Go). */
const lineBin = (r: CoreRuntimeName) => ({
  main: path.join(goDir, `handler-${r}`),
  nested: path.join(goDir, `nested-${r}`),
});
let goBuildMs = 0;

/** Every runtime's toolchain on this machine; a missing one is said, and its runtime not run here. */
const toolchains = Object.fromEntries(ALL_RUNTIMES.map((r) => [r, testToolchain(r)])) as Record<
  CoreRuntimeName,
  ReturnType<typeof testToolchain>
>;
const available = (r: CoreRuntimeName) => toolchains[r].found;
const goEnv = (r: CoreRuntimeName): Record<string, string> => {
  const t = toolchains[r];
  return t.found ? t.env : {};
};
for (const r of ALL_RUNTIMES) {
  const t = toolchains[r];
  console.log(`runtime ${r}: ${t.found ? `${t.command} ${t.version}` : `not run here: ${t.reason}`}`);
}
const NEWER_GO = ALL_RUNTIMES.filter(
  (r) => RUNTIME_INFO[r].family === 'go' && r !== 'go1.21' && available(r),
);

beforeAll(async () => {
  const started = performance.now();
  const builds = await Promise.all([
    buildGo(path.join(FIXTURES_DIR, 'go1.21'), goBin.main, 'handler.Handle'),
    buildGo(path.join(FIXTURES_DIR, 'go1.21'), goBin.nested, 'lib/api.Handle'),
    buildGo(path.join(FIXTURES_DIR, 'go1.21-nomod'), goBin.nomod, 'handler.Handle'),
    ...NEWER_GO.flatMap((r) => [
      buildGo(path.join(FIXTURES_DIR, 'go1.21'), lineBin(r).main, 'handler.Handle', goEnv(r)),
      buildGo(path.join(FIXTURES_DIR, 'go1.21'), lineBin(r).nested, 'lib/api.Handle', goEnv(r)),
    ]),
  ]);
  goBuildMs = performance.now() - started;
  for (const b of builds) expect(b.code, b.stderr).toBe(0);
  console.log(`go fixtures built in ${Math.round(goBuildMs)} ms (${builds.length} binaries, build.sh)`);
}, 600_000);

afterAll(() => rmSync(goDir, { recursive: true, force: true }));

// --- per-runtime description ------------------------------------------------------------------------

interface RuntimeSpec {
  name: CoreRuntimeName;
  main: () => Launch;
  nested: () => Launch;
  /** Starts (or, for Go, builds) with a bad entrypoint; must exit with 3. */
  loadFailure: (entrypoint: string) => Promise<Exited>;
  missingModule: string;
  missingFunction: string;
  /** A name every module has without defining it (inherited or built in); never a handler. */
  inheritedFunction: string;
  /** Prefix of the one-line error (Go: the error comes from the build). */
  errorPrefix: string;
}

function interpreted(name: CoreRuntimeName): RuntimeSpec {
  const node = RUNTIME_INFO[name].family === 'node';
  // One fixture per language: the same code must behave the same on every line of it.
  const codeDir = path.join(FIXTURES_DIR, node ? 'nodejs20' : 'python3.11');
  return {
    name,
    main: () => interpretedLaunch(name, codeDir, 'handler.handle'),
    nested: () => interpretedLaunch(name, codeDir, 'lib/api.handle'),
    loadFailure: (entrypoint) => {
      const l = interpretedLaunch(name, codeDir, entrypoint);
      return runToExit(l.command, l.args, { ...l.env, ...BASE_ENV, PORT: '1' }, 15_000);
    },
    missingModule: 'nope.handle',
    missingFunction: 'handler.nope',
    inheritedFunction: node ? 'handler.constructor' : 'handler.__class__',
    errorPrefix: 'sless-runtime: cannot load entrypoint',
  };
}

function compiled(name: CoreRuntimeName, main: string, nested: string): RuntimeSpec {
  return {
    name,
    main: () => binaryLaunch(main, 'handler.Handle'),
    nested: () => binaryLaunch(nested, 'lib/api.Handle'),
    loadFailure: (entrypoint) =>
      buildGo(
        path.join(FIXTURES_DIR, 'go1.21'),
        path.join(goDir, `should-not-exist-${name}`),
        entrypoint,
        goEnv(name),
      ),
    missingModule: 'nope.Handle',
    missingFunction: 'handler.Nope',
    // Go resolves the name at build time; an unexported (or implicit) name is refused there.
    inheritedFunction: 'handler.init',
    errorPrefix: 'sless-build: cannot load entrypoint',
  };
}

const RUNTIMES: RuntimeSpec[] = [
  ...ALL_RUNTIMES.filter((r) => RUNTIME_INFO[r].family !== 'go' && available(r)).map(interpreted),
  compiled('go1.21', goBin.main, goBin.nested),
  ...NEWER_GO.map((r) => compiled(r, lineBin(r).main, lineBin(r).nested)),
];

// --- HTTP helpers ------------------------------------------------------------------------------------

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Buffer;
  text: string;
  json: () => unknown;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

interface EchoEvent {
  method: string;
  path: string;
  query: Record<string, string | string[]>;
  headers: Record<string, string | string[]>;
  body: Json;
  isBase64Encoded: boolean;
}

interface EchoContext {
  functionName: string;
  namespace: string;
  requestId: string;
  deadlineMs: number;
}

interface Echo {
  event: EchoEvent;
  context: EchoContext;
}

async function call(
  base: string,
  urlPath: string,
  opts: {
    method?: 'GET' | 'HEAD' | 'POST' | 'PUT';
    body?: string | Buffer;
    headers?: Record<string, string | string[]>;
  } = {},
): Promise<Reply> {
  const res = await request(`${base}${urlPath}`, {
    method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
    headers: opts.headers,
    body: opts.body,
  });
  const bytes = Buffer.from(await res.body.arrayBuffer());
  const text = bytes.toString('utf8');
  return {
    status: res.statusCode,
    headers: res.headers,
    bytes,
    text,
    json: () => JSON.parse(text) as unknown,
  };
}

async function echo(base: string, urlPath: string, opts: Parameters<typeof call>[2] = {}): Promise<Echo> {
  const res = await call(base, urlPath, opts);
  expect(res.status, res.text).toBe(200);
  return res.json() as Echo;
}

function header(res: Reply, name: string): string {
  const v = res.headers[name];
  return Array.isArray(v) ? v.join(', ') : (v ?? '');
}

function sha256(buf: Buffer): string {
  return createHash('sha256').update(buf).digest('hex');
}

/** Sends only a request head declaring a huge body and returns the raw response head. */
function rawOversized(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    sock.setEncoding('utf8');
    sock.on('connect', () => {
      sock.write(
        'POST /hash HTTP/1.1\r\nhost: x\r\ncontent-type: application/octet-stream\r\ncontent-length: 41943040\r\n\r\n',
      );
    });
    sock.on('data', (c: string) => {
      data += c;
      if (data.includes('\r\n\r\n')) {
        sock.destroy();
        resolve(data);
      }
    });
    sock.on('error', reject);
    sock.setTimeout(5_000, () => {
      sock.destroy();
      reject(new Error(`no response to oversized request; got ${JSON.stringify(data)}`));
    });
  });
}

// --- the table ----------------------------------------------------------------------------------------

interface Target {
  rt: RuntimeSpec;
  server: Running;
  url: string;
}

interface Case {
  name: string;
  run: (t: Target) => Promise<void>;
}

const CASES: Case[] = [
  {
    name: 'GET /healthz answers {"status":"ok"}',
    run: async ({ url }) => {
      const res = await call(url, '/healthz');
      expect(res.status).toBe(200);
      expect(header(res, 'content-type')).toContain('application/json');
      expect(res.json()).toEqual({ status: 'ok' });
    },
  },
  {
    name: 'JSON body is parsed (application/json and +json)',
    run: async ({ url }) => {
      const payload = { a: 1, nested: { b: [true, null, 2.5] }, s: 'x' };
      const { event } = await echo(url, '/echo', {
        body: JSON.stringify(payload),
        headers: { 'content-type': 'application/json; charset=utf-8' },
      });
      expect(event.method).toBe('POST');
      expect(event.path).toBe('/echo');
      expect(event.body).toEqual(payload);
      expect(event.isBase64Encoded).toBe(false);
      const vnd = await echo(url, '/echo', {
        method: 'PUT',
        body: '[1,2]',
        headers: { 'content-type': 'application/vnd.api+json' },
      });
      expect(vnd.event.method).toBe('PUT');
      expect(vnd.event.body).toEqual([1, 2]);
      const broken = await echo(url, '/echo', {
        body: '{not json',
        headers: { 'content-type': 'application/json' },
      });
      expect(broken.event.body).toBe('{not json');
    },
  },
  {
    name: 'text bodies arrive as strings (text/*, form, no content-type)',
    run: async ({ url }) => {
      const plain = await echo(url, '/echo', {
        body: 'hello\nworld',
        headers: { 'content-type': 'text/plain' },
      });
      expect(plain.event.body).toBe('hello\nworld');
      expect(plain.event.isBase64Encoded).toBe(false);
      const form = await echo(url, '/echo', {
        body: 'a=1&b=two',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(form.event.body).toBe('a=1&b=two');
      const xml = await echo(url, '/echo', {
        body: '<a>1</a>',
        headers: { 'content-type': 'application/xml' },
      });
      expect(xml.event.body).toBe('<a>1</a>');
      const none = await echo(url, '/echo', { body: Buffer.from('no type') });
      expect(none.event.body).toBe('no type');
      expect(none.event.isBase64Encoded).toBe(false);
    },
  },
  {
    name: 'empty body is null',
    run: async ({ url }) => {
      const { event } = await echo(url, '/echo');
      expect(event.method).toBe('GET');
      expect(event.body).toBeNull();
      expect(event.isBase64Encoded).toBe(false);
    },
  },
  {
    name: 'binary body is base64 in, bytes out',
    run: async ({ url }) => {
      const bytes = randomBytes(4096);
      bytes[0] = 0xff; // never valid UTF-8
      const { event } = await echo(url, '/echo', {
        body: bytes,
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(event.isBase64Encoded).toBe(true);
      expect(event.body).toBe(bytes.toString('base64'));
      const untyped = await echo(url, '/echo', { body: bytes });
      expect(untyped.event.isBase64Encoded).toBe(true);
      const res = await call(url, '/binary', { body: bytes, headers: { 'content-type': 'image/png' } });
      expect(res.status).toBe(200);
      expect(header(res, 'content-type')).toBe('application/octet-stream');
      expect(res.bytes.equals(bytes)).toBe(true);
    },
  },
  {
    name: 'path, query strings (repeated keys) and repeated headers',
    run: async ({ url }) => {
      const { event } = await echo(url, '/echo?a=1&a=2&b=x%20y&c=%E2%9C%93&empty=', {
        headers: { 'x-multi': ['one', 'two'], 'X-Upper-Case': 'V' },
      });
      expect(event.query).toEqual({ a: ['1', '2'], b: 'x y', c: '✓', empty: '' });
      expect(event.headers['x-multi']).toBe('one, two');
      expect(event.headers['x-upper-case']).toBe('V');
      expect(event.headers['X-Upper-Case']).toBeUndefined();
      expect(event.path).toBe('/echo');
      const res = await call(url, '/items/42?x=1');
      expect(res.json()).toEqual({ received: null, method: 'GET', path: '/items/42' });
    },
  },
  {
    name: 'context: function name, namespace, request id, deadline',
    run: async ({ url }) => {
      const before = Date.now();
      const withId = await echo(url, '/echo', { headers: { 'x-request-id': 'req-123' } });
      expect(withId.context.functionName).toBe('contract-fn');
      expect(withId.context.namespace).toBe('contract-ns');
      expect(withId.context.requestId).toBe('req-123');
      expect(withId.context.deadlineMs).toBeGreaterThanOrEqual(before + TIMEOUT_SEC * 1000 - 50);
      expect(withId.context.deadlineMs).toBeLessThanOrEqual(Date.now() + TIMEOUT_SEC * 1000 + 50);
      const a = await echo(url, '/echo');
      const b = await echo(url, '/echo');
      expect(a.context.requestId).toMatch(UUID_RE);
      expect(b.context.requestId).toMatch(UUID_RE);
      expect(a.context.requestId).not.toBe(b.context.requestId);
    },
  },
  {
    name: '{statusCode, headers, body} return becomes that response',
    run: async ({ url }) => {
      const res = await call(url, '/status');
      expect(res.status).toBe(201);
      expect(header(res, 'x-custom')).toBe('yes');
      expect(header(res, 'x-multi')).toBe('a, b');
      expect(res.headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; Path=/']);
      expect(header(res, 'content-type')).toContain('application/json');
      expect(res.json()).toEqual({ created: true });
      const plain = await call(url, '/plain');
      expect(plain.status).toBe(202);
      expect(header(plain, 'content-type')).toBe('text/plain; charset=utf-8');
      expect(plain.text).toBe('plain text ✓');
    },
  },
  {
    name: 'plain return value becomes 200 JSON (undefined/None/nil → null)',
    run: async ({ url }) => {
      const res = await call(url, '/value');
      expect(res.status).toBe(200);
      expect(header(res, 'content-type')).toContain('application/json');
      expect(res.json()).toEqual([1, 'two', { three: 3 }]);
      const none = await call(url, '/none');
      expect(none.status).toBe(200);
      expect(none.text).toBe('null');
    },
  },
  {
    name: 'async handler result is awaited',
    run: async ({ url }) => {
      const res = await call(url, '/async');
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ async: true });
    },
  },
  {
    name: 'thrown error → 500 {"error"} and the process keeps serving',
    run: async ({ url, server }) => {
      const res = await call(url, '/throw');
      expect(res.status).toBe(500);
      expect(header(res, 'content-type')).toContain('application/json');
      expect(res.json()).toEqual({ error: 'boom from handler' });
      expect(server.stderr()).toContain('boom from handler');
      const after = await call(url, '/value');
      expect(after.status).toBe(200);
      expect(server.proc.exitCode).toBeNull();
    },
  },
  {
    name: `handler slower than SLESS_TIMEOUT_SEC=${TIMEOUT_SEC} → 504, still alive`,
    run: async ({ url, server }) => {
      const started = performance.now();
      const res = await call(url, '/slow');
      const took = performance.now() - started;
      expect(res.status).toBe(504);
      expect(res.json()).toEqual({ error: `function timed out after ${TIMEOUT_SEC}s` });
      expect(took).toBeGreaterThanOrEqual(TIMEOUT_SEC * 1000 - 50);
      // The handler sleeps 10 s: answering well before that shows the runtime did not wait for it. The
      // bound is generous on purpose, so that a loaded machine does not fail it.
      expect(took).toBeLessThan(8_000);
      const after = await call(url, '/value');
      expect(after.status).toBe(200);
      expect(server.proc.exitCode).toBeNull();
    },
  },
  {
    name: '10 MiB binary body (length + sha256), oversized declared body → 413',
    run: async ({ url, server }) => {
      const big = randomBytes(10 * 1024 * 1024);
      const res = await call(url, '/hash', {
        body: big,
        headers: { 'content-type': 'application/octet-stream' },
      });
      expect(res.status, res.text).toBe(200);
      expect(res.json()).toEqual({ length: big.length, sha256: sha256(big) });
      const head = await rawOversized(server.port);
      expect(head).toMatch(/^HTTP\/1\.1 413 /);
    },
  },
  {
    name: 'unicode round-trip (JSON and text)',
    run: async ({ url }) => {
      const s = 'héllo wörld ✓ 日本語 🎉 \u0000 "quoted"';
      const j = await echo(url, '/echo', {
        body: JSON.stringify({ s }),
        headers: { 'content-type': 'application/json' },
      });
      expect(j.event.body).toEqual({ s });
      const t = await echo(url, '/echo', {
        body: s,
        headers: { 'content-type': 'text/plain; charset=utf-8' },
      });
      expect(t.event.body).toBe(s);
      const hashed = await call(url, '/hash', { body: s, headers: { 'content-type': 'text/plain' } });
      const bytes = Buffer.from(s, 'utf8');
      expect(hashed.json()).toEqual({ length: bytes.length, sha256: sha256(bytes) });
    },
  },
  {
    name: '20 concurrent requests run in parallel',
    run: async ({ url }) => {
      const started = performance.now();
      const replies = await Promise.all(Array.from({ length: 20 }, () => call(url, '/sleep?ms=700')));
      const took = performance.now() - started;
      for (const r of replies) {
        expect(r.status).toBe(200);
        expect(r.json()).toEqual({ slept: true });
      }
      // Serially this would take 14 s; in parallel under 1 s. Half the serial time is a bound a loaded
      // machine still meets, and one that serial handling can never meet. (Each sleep stays under
      // SLESS_TIMEOUT_SEC, so none is cut short by a 504.)
      expect(took).toBeLessThan(7_000);
    },
  },
  {
    name: 'nested module entrypoint (lib/api.<fn>)',
    run: async ({ rt }) => {
      const nested = await startRuntime(rt.nested(), BASE_ENV);
      try {
        const res = await call(nested.url, '/some/path');
        expect(res.status).toBe(200);
        expect(res.json()).toEqual({ nested: true, path: '/some/path', functionName: 'contract-fn' });
      } finally {
        await nested.stop();
      }
    },
  },
  {
    name: 'missing module → exit 3 with a one-line error',
    run: async ({ rt }) => {
      const res = await rt.loadFailure(rt.missingModule);
      expect(res.code).toBe(3);
      const last = res.stderr.trimEnd().split('\n').at(-1) ?? '';
      expect(last).toContain(`${rt.errorPrefix} "${rt.missingModule}": module "nope" not found in `);
    },
  },
  {
    name: 'missing function → exit 3 with a one-line error',
    run: async ({ rt }) => {
      const res = await rt.loadFailure(rt.missingFunction);
      expect(res.code).toBe(3);
      const fn = rt.missingFunction.split('.').at(-1);
      const last = res.stderr.trimEnd().split('\n').at(-1) ?? '';
      expect(last).toMatch(
        new RegExp(`^${rt.errorPrefix} "${rt.missingFunction}": module "handler".* has no function "${fn}"$`),
      );
    },
  },
  {
    name: 'an inherited or built-in name is not a handler → exit 3',
    run: async ({ rt }) => {
      const res = await rt.loadFailure(rt.inheritedFunction);
      expect(res.code).toBe(3);
      const last = res.stderr.trimEnd().split('\n').at(-1) ?? '';
      expect(last).toContain(`${rt.errorPrefix} "${rt.inheritedFunction}"`);
    },
  },
  {
    name: 'one-shot mode: SLESS_EVENT → SLESS_RESULT line, exit 0; throwing → exit 1',
    run: async ({ rt }) => {
      const l = rt.main();
      const ok = await runToExit(
        l.command,
        l.args,
        { ...l.env, ...BASE_ENV, SLESS_EVENT: JSON.stringify({ action: 'log', v: 'wörld' }) },
        15_000,
      );
      expect(ok.code, ok.stderr).toBe(0);
      const lines = ok.stdout.trimEnd().split('\n');
      expect(lines).toContain('user log line');
      // User output without a trailing newline must not be glued to the result line.
      expect(lines).toContain('partial line without newline');
      const last = lines.at(-1) ?? '';
      expect(last.startsWith('SLESS_RESULT ')).toBe(true);
      expect(JSON.parse(last.slice('SLESS_RESULT '.length))).toEqual({
        statusCode: 200,
        body: { received: { action: 'log', v: 'wörld' }, method: 'POST', path: '/' },
      });
      const bad = await runToExit(
        l.command,
        l.args,
        { ...l.env, ...BASE_ENV, SLESS_EVENT: '{"action":"throw"}' },
        15_000,
      );
      expect(bad.code).toBe(1);
      const badLast = bad.stdout.trimEnd().split('\n').at(-1) ?? '';
      expect(JSON.parse(badLast.replace(/^SLESS_RESULT /, ''))).toEqual({
        statusCode: 500,
        body: { error: 'one-shot failure' },
      });
      expect(bad.stderr).toContain('one-shot failure');
    },
  },
  {
    name: 'one-shot mode: timeout → 504 result, exit 1, without waiting for the handler',
    run: async ({ rt }) => {
      const l = rt.main();
      const res = await runToExit(
        l.command,
        l.args,
        { ...l.env, ...BASE_ENV, SLESS_EVENT: '{"action":"slow"}' },
        15_000,
      );
      expect(res.code).toBe(1);
      // The handler sleeps 10 s; exiting well before shows the runtime did not wait (generous on purpose).
      expect(res.ms).toBeLessThan(8_000);
      const last = res.stdout.trimEnd().split('\n').at(-1) ?? '';
      expect(JSON.parse(last.replace(/^SLESS_RESULT /, ''))).toEqual({
        statusCode: 504,
        body: { error: `function timed out after ${TIMEOUT_SEC}s` },
      });
    },
  },
  {
    name: 'HEAD gets headers without a body; the keep-alive connection stays usable',
    run: async ({ url }) => {
      const head = await call(url, '/value', { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.bytes.length).toBe(0);
      expect(header(head, 'content-length')).toBe('21');
      const next = await call(url, '/value');
      expect(next.json()).toEqual([1, 'two', { three: 3 }]);
    },
  },
];

describe.each(RUNTIMES)('runtime $name', (rt) => {
  let server: Running;
  beforeAll(async () => {
    server = await startRuntime(rt.main(), BASE_ENV);
  });
  afterAll(async () => {
    await server?.stop();
  });
  it.each(CASES)('$name', async ({ run }) => {
    await run({ rt, server, url: server.url });
  });
});

describe.each(RUNTIMES)('runtime $name on a unix socket (SLESS_SOCKET)', (rt) => {
  let dir: string;
  let proc: ChildProcess | undefined;
  let stderr = '';
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'sless-sock-'));
  });
  afterAll(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const done = once(proc, 'exit');
      proc.kill('SIGKILL');
      await done;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the contract over the socket, keeps connections alive, and opens no port', async () => {
    const socketPath = path.join(dir, 'http.sock');
    const port = await freePort();
    const launch = rt.main();
    proc = spawn(launch.command, launch.args, {
      env: { ...process.env, ...launch.env, ...BASE_ENV, SLESS_SOCKET: socketPath, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const client = new Client('http://localhost', { socketPath, pipelining: 1 });
    try {
      const healthy = async (): Promise<number> => {
        for (let i = 0; ; i++) {
          try {
            const res = await client.request({ path: '/healthz', method: 'GET' });
            await res.body.dump();
            return res.statusCode;
          } catch (error) {
            if (proc?.exitCode !== null || i > 1500)
              throw new Error(`not healthy: ${String(error)}\n${stderr}`);
            await new Promise((r) => setTimeout(r, 10));
          }
        }
      };
      expect(await healthy()).toBe(200);
      expect(stderr).toContain(`listening on ${rt.name.startsWith('go') ? 'socket ' : ''}${socketPath}`);
      const res = await client.request({
        path: '/echo?a=1',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'sock-1' },
        body: '{"k":[1,2]}',
      });
      const body = (await res.body.json()) as Echo;
      expect(res.statusCode).toBe(200);
      expect(body.event.path).toBe('/echo');
      expect(body.event.query).toEqual({ a: '1' });
      expect(body.event.body).toEqual({ k: [1, 2] });
      expect(body.context).toMatchObject({ requestId: 'sock-1', namespace: 'contract-ns' });
      const again = await client.request({ path: '/value', method: 'GET' });
      expect(await again.body.json()).toEqual([1, 'two', { three: 3 }]);
      // The socket was the only listener: the PORT it was also given stays closed.
      await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    } finally {
      await client.close();
    }
  });

  it('a socket it cannot bind is a clear start-up error (exit 1)', async () => {
    const launch = rt.main();
    const missing = path.join(dir, 'no-such-dir', 'http.sock');
    const res = await runToExit(
      launch.command,
      launch.args,
      { ...launch.env, ...BASE_ENV, SLESS_SOCKET: missing },
      15_000,
    );
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`sless-runtime: cannot listen on socket ${missing}`);
  });
});

describe.each(NEWER_GO)('runtime %s is built by the Go of its own line', (r) => {
  it.each(['main', 'nested'] as const)('%s binary', (which) => {
    // `go version FILE` prints the release that built FILE, from its build info.
    const out = spawnSync('go', ['version', lineBin(r)[which]], {
      cwd: goDir,
      encoding: 'utf8',
      env: { ...process.env, GOTOOLCHAIN: 'local' },
    });
    expect(out.status, out.stderr).toBe(0);
    const built = out.stdout.trim().split(' ').at(-1);
    expect(built).toBe(`go${(toolchains[r] as { version: string }).version}`);
    expect(built?.startsWith(`go${RUNTIME_INFO[r].toolchain}.`)).toBe(true);
  });
});

describe('go1.21 build conventions', () => {
  it('code without go.mod: root package named like the entrypoint module', async () => {
    const res = await runToExit(goBin.nomod, [], { SLESS_EVENT: '{"k":[1,2]}' }, 15_000);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout.trim()).toBe(
      'SLESS_RESULT {"statusCode":200,"body":{"received":{"k":[1,2]},"root":true}}',
    );
  });
  it('non-exported function name is rejected with exit 3', async () => {
    const res = await buildGo(path.join(FIXTURES_DIR, 'go1.21'), path.join(goDir, 'x'), 'handler.handle');
    expect(res.code).toBe(3);
    expect(res.stderr).toContain('must be an exported Go identifier');
  });
});
