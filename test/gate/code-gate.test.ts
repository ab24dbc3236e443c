/**
 * The code security gate against a local HTTP server speaking the chat-completions wire format (see
 * chat-completions-server.ts: no model runs here), through undici as in production. The inner builder
 * here only counts the builds it was asked for; test/local/code-gate.test.ts runs the whole system.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadCodeGateSettings } from '../../src/config/code-gate.js';
import { BuildError } from '../../src/core/errors.js';
import type { Builder, BuildRequest, SourceSnapshot, TreeFile } from '../../src/core/interfaces.js';
import { isWithin } from '../../src/core/paths.js';
import type { BuildRecord, SlessFunction } from '../../src/core/resources.js';
import { ChatCompletionsCodeChecker, CODE_CHECK_PROMPT, GatedBuilder } from '../../src/gate/code-gate.js';
import {
  type ChatCompletionsServer,
  completion,
  sentCode,
  startChatCompletionsServer,
} from '../helpers/chat-completions-server.js';

const API_KEY = 'sk-test-5ecret-never-logged';

function snapshotOf(files: Record<string, string | Uint8Array>, links: string[] = []): SourceSnapshot {
  const entries: TreeFile[] = [
    ...Object.keys(files).map((path) => ({ path, mode: '100644', oid: path })),
    ...links.map((path) => ({ path, mode: '120000', oid: path })),
  ].sort((a, b) => (a.path < b.path ? -1 : 1));
  return {
    commit: 'c'.repeat(40),
    listFiles: async (dir) => entries.filter((e) => isWithin(dir, e.path)),
    readFile: async (path) => {
      const content = files[path] ?? '../../etc/passwd';
      return typeof content === 'string' ? new TextEncoder().encode(content) : content;
    },
  };
}

const fn = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: { name: 'f', namespace: 'default' },
  spec: { runtime: 'nodejs20', entrypoint: 'handler.handle' },
} as SlessFunction;

function requestFor(buildKey: string, files: Record<string, string | Uint8Array>, links: string[] = []) {
  return {
    fn,
    buildKey,
    commit: 'a'.repeat(40),
    codeDir: 'f',
    excludedFiles: new Set(['f/function.yaml']),
    snapshot: snapshotOf(files, links),
  } satisfies BuildRequest;
}

class CountingBuilder implements Builder {
  builds: string[] = [];
  async lookup(): Promise<BuildRecord | undefined> {
    return undefined;
  }
  async build(request: BuildRequest): Promise<BuildRecord> {
    this.builds.push(request.buildKey);
    return { buildKey: request.buildKey, commit: request.commit, result: 'Succeeded', startedAt: 'now' };
  }
}

describe('code security gate', () => {
  let server: ChatCompletionsServer;
  let logs: string[];
  let inner: CountingBuilder;
  let gate: GatedBuilder;
  const messages = () => logs.map((line) => (JSON.parse(line) as { msg: string }).msg);
  const gated = (timeout = '15s', endpoint = server.url) => {
    const settings = loadCodeGateSettings({
      LLM_ENABLED: 'true',
      LLM_ENDPOINT: endpoint,
      LLM_API_KEY: API_KEY,
      LLM_TIMEOUT: timeout,
      LLM_MODEL: 'test-model',
    });
    if (!settings.enabled) throw new Error('gate should be on');
    const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(line) });
    return new GatedBuilder({ inner, checker: new ChatCompletionsCodeChecker(settings), logger });
  };

  beforeAll(async () => {
    server = await startChatCompletionsServer();
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(() => {
    server.requests.length = 0;
    server.answer = () => ({ verdict: { safe: true, reason: 'an ordinary handler' } });
    logs = [];
    inner = new CountingBuilder();
    gate = gated();
  });

  it('sends the fixed prompt and the text files only, with the key as a Bearer token', async () => {
    const record = await gate.build(
      requestFor(
        'k-send',
        {
          'f/function.yaml': 'apiVersion: sless.dev/v1alpha1\n',
          'f/handler.js': 'exports.handle = () => 1;\n',
          'f/lib/util.py': 'def f(): pass\n',
          'f/package.json': '{"name":"f"}\n',
          'f/run.sh': 'echo hi\n',
          'f/q.sql': 'select 1;\n',
          'f/main.go': 'package main\n',
          'f/notes.TXT': 'notes\n',
          'f/conf.yml': 'a: 1\n',
          'f/x.ts': 'export {};\n',
          'f/image.png': new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 0, 1]),
          'f/blob.js': new Uint8Array([0x61, 0x00, 0x62]),
          'f/latin1.txt': new Uint8Array([0xe9, 0xe8]),
          'f/README.md': '# not a checked extension\n',
          'f/node_modules/dep/index.js': 'module.exports = 1;\n',
          'other/handler.js': 'outside the code directory\n',
        },
        ['f/link.js'],
      ),
    );
    expect(record.codeCheck).toEqual({ result: 'Passed', message: 'an ordinary handler' });
    expect(inner.builds).toEqual(['k-send']);
    expect(server.requests).toHaveLength(1);
    const sent = server.requests[0];
    expect(sent?.method).toBe('POST');
    expect(sent?.path).toBe('/v1/chat/completions');
    expect(sent?.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(sent?.body.model).toBe('test-model');
    expect(sent?.body.temperature).toBe(0);
    expect(sent?.body.messages?.[0]).toEqual({ role: 'system', content: CODE_CHECK_PROMPT });
    expect(sentCode(sent as never)).toBe(
      [
        '=== conf.yml ===\na: 1\n',
        '=== handler.js ===\nexports.handle = () => 1;\n',
        '=== lib/util.py ===\ndef f(): pass\n',
        '=== main.go ===\npackage main\n',
        '=== notes.TXT ===\nnotes\n',
        '=== package.json ===\n{"name":"f"}\n',
        '=== q.sql ===\nselect 1;\n',
        '=== run.sh ===\necho hi\n',
        '=== x.ts ===\nexport {};\n',
      ].join('\n\n'),
    );
    // The prompt names each behaviour the gate is for.
    for (const topic of [
      'cryptocurrency mining',
      'DDoS or botnet',
      'port scanning',
      'reverse shells',
      'command-and-control',
      'container escape',
      'obfuscation',
      '{"safe": true or false, "reason": "one short sentence"}',
    ])
      expect(CODE_CHECK_PROMPT).toContain(topic);
  });

  it('refuses the build on safe:false with "code validation failed: <reason>" and never builds', async () => {
    server.answer = (r) =>
      sentCode(r).includes('stratum+tcp')
        ? { verdict: { safe: false, reason: 'mines Monero through a stratum pool' } }
        : { verdict: { safe: true, reason: 'fine' } };
    const refused = gate.build(
      requestFor('k-miner', { 'f/handler.js': 'connect("stratum+tcp://pool.example:3333")' }),
    );
    await expect(refused).rejects.toBeInstanceOf(BuildError);
    const error = (await refused.catch((e: unknown) => e)) as BuildError & { record: BuildRecord };
    expect(error.message).toBe('code validation failed: mines Monero through a stratum pool');
    expect(error.reason).toBe('CodeValidationFailed');
    expect(error.record).toMatchObject({
      buildKey: 'k-miner',
      result: 'Failed',
      message: 'code validation failed: mines Monero through a stratum pool',
      codeCheck: { result: 'Refused', message: 'mines Monero through a stratum pool' },
    });
    expect(inner.builds).toEqual([]);
    // A Markdown-fenced answer is still the model's JSON answer.
    server.answer = () => ({ verdict: { safe: false, reason: 'opens a reverse shell' }, fenced: true });
    await expect(gate.build(requestFor('k-shell', { 'f/handler.js': 'sh -i' }))).rejects.toThrow(
      'code validation failed: opens a reverse shell',
    );
    expect(inner.builds).toEqual([]);
  });

  it('asks once per build key, also when builds of one key run concurrently', async () => {
    const files = { 'f/handler.js': 'exports.handle = () => 2;\n' };
    await Promise.all([gate.build(requestFor('k-once', files)), gate.build(requestFor('k-once', files))]);
    await gate.build(requestFor('k-once', files));
    expect(server.requests).toHaveLength(1);
    expect(inner.builds).toEqual(['k-once', 'k-once', 'k-once']);
    server.answer = () => ({ verdict: { safe: false, reason: 'bad' } });
    await expect(gate.build(requestFor('k-bad', files))).rejects.toThrow('code validation failed: bad');
    await expect(gate.build(requestFor('k-bad', files))).rejects.toThrow('code validation failed: bad');
    expect(server.requests).toHaveLength(2);
  });

  it.each([
    ['a 500', { status: 500, body: '{"error":{"message":"overloaded"}}' }, 'endpoint answered HTTP 500'],
    ['a 401', { status: 401, body: '{"error":"bad key"}' }, 'endpoint answered HTTP 401'],
    [
      'garbage',
      { status: 200, body: '<html>proxy error</html>', contentType: 'text/html' },
      'endpoint answered something that is not JSON',
    ],
    [
      'JSON that is no completion',
      { status: 200, body: '{"result":"safe"}' },
      'endpoint answered JSON that is not a chat completion',
    ],
    [
      'a completion whose content is prose',
      { status: 200, body: completion('Looks fine to me!') },
      'the model did not answer with JSON',
    ],
    [
      'a verdict of the wrong shape',
      { status: 200, body: completion('{"safe":"yes","reason":1}') },
      'the model answered JSON without a boolean "safe" and a string "reason"',
    ],
  ] as const)('soft-fails on %s: a warning, and the build goes on', async (_what, answer, message) => {
    server.answer = () => answer;
    const record = await gate.build(requestFor(`k-${_what}`, { 'f/handler.js': 'x' }));
    expect(record.codeCheck).toEqual({
      result: 'Unavailable',
      message: `code check unavailable: ${message}`,
    });
    expect(inner.builds).toEqual([`k-${_what}`]);
    expect(messages()).toContain(`code check unavailable: ${message}; building without a verdict`);
    expect(logs.join('')).not.toContain(API_KEY);
  });

  it('soft-fails when the endpoint is slow, after LLM_TIMEOUT', async () => {
    server.answer = () => ({ hang: true });
    gate = gated('300ms');
    const record = await gate.build(requestFor('k-slow', { 'f/handler.js': 'x' }));
    expect(record.codeCheck).toEqual({
      result: 'Unavailable',
      message: 'code check unavailable: no answer within 300 ms',
    });
    expect(inner.builds).toEqual(['k-slow']);
    // No verdict was given, so a retry asks again.
    server.answer = () => ({ verdict: { safe: true, reason: 'fine' } });
    expect((await gate.build(requestFor('k-slow', { 'f/handler.js': 'x' }))).codeCheck?.result).toBe(
      'Passed',
    );
    expect(server.requests).toHaveLength(2);
  });

  it('soft-fails when the endpoint is unreachable', async () => {
    // A port that was just free and has nothing listening on it.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    gate = gated('15s', `http://127.0.0.1:${port}/v1`);
    const record = await gate.build(requestFor('k-down', { 'f/handler.js': 'x' }));
    expect(record.codeCheck).toEqual({
      result: 'Unavailable',
      message: `code check unavailable: cannot reach 127.0.0.1:${port}: ECONNREFUSED`,
    });
    expect(inner.builds).toEqual(['k-down']);
    expect(messages()).toContain(
      `code check unavailable: cannot reach 127.0.0.1:${port}: ECONNREFUSED; building without a verdict`,
    );
    expect(logs.join('')).not.toContain(API_KEY);
  });

  it('skips the check over 100 KB of text, and says so', async () => {
    const big = 'x'.repeat(60 * 1024);
    const record = await gate.build(requestFor('k-big', { 'f/a.js': big, 'f/b.js': big }));
    expect(record.codeCheck).toEqual({
      result: 'Skipped',
      message: 'code check skipped: more than 102400 bytes of text (limit 100 KB)',
    });
    expect(server.requests).toHaveLength(0);
    expect(inner.builds).toEqual(['k-big']);
    // Exactly 100 KB is still checked.
    const exact = await gate.build(requestFor('k-exact', { 'f/a.js': 'y'.repeat(100 * 1024) }));
    expect(exact.codeCheck?.result).toBe('Passed');
    expect(server.requests).toHaveLength(1);
  });

  it('reads the settings under SLESS_ or plain LLM_ names, off by default', () => {
    expect(loadCodeGateSettings({})).toEqual({ enabled: false });
    expect(loadCodeGateSettings({ LLM_ENDPOINT: 'http://x' })).toEqual({ enabled: false });
    expect(
      loadCodeGateSettings({ SLESS_LLM_ENABLED: 'true', LLM_ENDPOINT: 'https://api.example.com/v1/' }),
    ).toEqual({
      enabled: true,
      endpoint: 'https://api.example.com/v1/chat/completions',
      apiKey: undefined,
      model: 'gpt-4o-mini',
      timeoutMs: 15_000,
    });
    expect(
      loadCodeGateSettings({
        LLM_ENABLED: 'false',
        SLESS_LLM_ENABLED: '1',
        SLESS_LLM_ENDPOINT: 'http://llm.local:8000/v1/chat/completions',
        LLM_TIMEOUT: '2.5',
      }),
    ).toMatchObject({
      enabled: true,
      endpoint: 'http://llm.local:8000/v1/chat/completions',
      timeoutMs: 2500,
    });
    expect(() => loadCodeGateSettings({ LLM_ENABLED: 'true' })).toThrow(/LLM_ENDPOINT is required/);
    expect(() => loadCodeGateSettings({ LLM_ENABLED: 'maybe' })).toThrow(
      'LLM_ENABLED: "maybe" must be true or false',
    );
    expect(() => loadCodeGateSettings({ LLM_ENABLED: 'true', LLM_ENDPOINT: 'llm:8000' })).toThrow(
      /not a full http\(s\) URL/,
    );
    expect(() =>
      loadCodeGateSettings({ LLM_ENABLED: 'true', LLM_ENDPOINT: 'http://x', LLM_TIMEOUT: 'soon' }),
    ).toThrow('LLM_TIMEOUT: "soon" must be a duration such as 15s, 500ms or 15');
  });
});
