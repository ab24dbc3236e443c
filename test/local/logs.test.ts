/**
 * Function logs on the local platform: what the runtime process writes to stdout and stderr comes
 * back from `GET …/functions/{name}/logs` (tail and follow) and from the real `sless logs` CLI. What
 * the logs API refuses is the platform contract's ('logs-refused'), the same on both platforms.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogLine } from '../../src/core/logs.js';
import { functionManifest, TestRepo } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const HANDLER = `exports.handle = async (event) => {
  console.log('hello', event.query.n);
  console.error('oops', event.query.n);
  return 'ok';
};
`;

function parse(text: string): LogLine[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LogLine);
}

function runCli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [resolve('bin/sless.js'), 'logs', ...args], (error, stdout, stderr) =>
      done({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

// The CLI test starts Node with tsx's loader twice: a budget for a busy machine, not a timed assertion.
describe('function logs (local)', { timeout: 180_000 }, () => {
  let repo: TestRepo;
  let system: TestSystem;
  let instance: string;

  beforeAll(async () => {
    repo = await TestRepo.create({ 'f/function.yaml': functionManifest('f'), 'f/handler.js': HANDLER });
    system = await startTestSystem({ url: repo.dir });
    const status = await eventually(
      async () => {
        const s = await system.functionStatus('f');
        return s?.phase === 'Ready' ? s : undefined;
      },
      60_000,
      'f ready',
    );
    instance = `f-${status.servingRevision}`;
    for (const n of [1, 2, 3]) expect((await system.call(`/fn/default/f?n=${n}`)).status).toBe(200);
  });

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('returns stdout and stderr lines with their stream and instance, as NDJSON', async () => {
    const lines = await eventually(
      async () => {
        const response = await system.call('/v1/namespaces/default/functions/f/logs?tail=1000');
        expect(response.headers.get('content-type')).toBe('application/x-ndjson; charset=utf-8');
        const all = parse(await response.text());
        return all.some((l) => l.line === 'oops 3') ? all : undefined;
      },
      20_000,
      'the third request logged',
    );
    const ours = lines.filter((l) => /^(hello|oops) /.test(l.line));
    // stdout and stderr are separate pipes: the order within each stream is what is guaranteed.
    const of = (stream: string) => ours.filter((l) => l.stream === stream).map((l) => l.line);
    expect(of('stdout')).toEqual(['hello 1', 'hello 2', 'hello 3']);
    expect(of('stderr')).toEqual(['oops 1', 'oops 2', 'oops 3']);
    for (const l of ours) {
      expect(l.instance).toBe(instance);
      expect(Number.isNaN(Date.parse(l.time))).toBe(false);
    }
    const tail = parse(await (await system.call('/v1/namespaces/default/functions/f/logs?tail=2')).text());
    expect(tail.map((l) => l.line).sort()).toEqual(['hello 3', 'oops 3']);
  });

  it('follows: the stream stays open and new lines arrive as the function writes them', async () => {
    const stop = new AbortController();
    const response = await system.call('/v1/namespaces/default/functions/f/logs?tail=0&follow=true', {
      signal: stop.signal,
    });
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    expect((await system.call('/fn/default/f?n=live')).status).toBe(200);
    while (!text.includes('oops live')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended early: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    expect(
      parse(text)
        .map((l) => l.line)
        .filter((l) => l.endsWith('live')),
    ).toEqual(['hello live', 'oops live']);
    stop.abort();
  });

  it('sless logs prints stdout lines to stdout and stderr lines to stderr, prefixed with the instance', async () => {
    const result = await runCli('f', '--server', system.url, '--tail', '4');
    expect(result.stdout).toBe(`${instance} hello 3\n${instance} hello live\n`);
    expect(result.stderr).toBe(`${instance} oops 3\n${instance} oops live\n`);
    expect(result.code).toBe(0);
    const missing = await runCli('nope', '--server', system.url);
    expect(missing.stderr).toBe('sless logs: 404 Function default/nope not found\n');
    expect(missing.code).toBe(1);
  });
});
