/**
 * The code security gate in the running local platform: a commit whose code the endpoint calls unsafe
 * is refused before its build starts, status and the API say `code validation failed: <reason>`, and
 * the previous revision keeps serving; an endpoint that fails lets the build go on with a warning.
 * The endpoint is a local server speaking the chat-completions wire format (no model runs here).
 */
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLocalConfig } from '../../src/config/config.js';
import type { FunctionStatus } from '../../src/core/resources.js';
import { type LocalSystem, startLocalSystem } from '../../src/main.js';
import {
  type ChatCompletionsServer,
  sentCode,
  startChatCompletionsServer,
} from '../helpers/chat-completions-server.js';
import { functionManifest, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';

const API_KEY = 'sk-local-gate-key-do-not-log';

describe('code security gate on the local platform', () => {
  let llm: ChatCompletionsServer;
  let repo: TestRepo;
  let system: LocalSystem;
  let stateDir: string;
  const logs: string[] = [];

  const status = async (name: string) =>
    (await system.store.get('Function', 'default', name))?.status as FunctionStatus | undefined;
  const body = async (name: string) => (await fetch(`${system.url}/fn/default/${name}`)).text();
  const sync = () => system.controller.syncNow('default', 'test');
  const start = () =>
    startLocalSystem(
      loadLocalConfig(
        { port: '0', 'state-dir': stateDir, interval: '1h' },
        { SLESS_LLM_ENABLED: 'true', LLM_ENDPOINT: llm.url, LLM_API_KEY: API_KEY, LLM_TIMEOUT: '5s' },
      ),
      {
        logger: pino({ level: 'info' }, { write: (line: string) => logs.push(line) }),
        source: gitSource('test', 'default', repo.dir, { interval: '1h' }),
      },
    );

  beforeAll(async () => {
    llm = await startChatCompletionsServer();
    llm.answer = (request) =>
      sentCode(request).includes('xmrig')
        ? { verdict: { safe: false, reason: 'runs the xmrig cryptocurrency miner' } }
        : { verdict: { safe: true, reason: 'an ordinary handler' } };
    repo = await TestRepo.create({
      'f/function.yaml': functionManifest('f'),
      'f/handler.js': nodeHandler(`return 'version one';`),
    });
    stateDir = await tempDir('gate-state');
    system = await start();
    await eventually(async () => (await status('f'))?.phase === 'Ready', 60_000, 'f ready');
  });

  afterAll(async () => {
    await system?.stop();
    await llm?.close();
    await repo?.remove();
    await rm(stateDir, { recursive: true, force: true });
  });

  it('checks the code before the first build and records the verdict', async () => {
    expect(await body('f')).toBe('"version one"');
    expect((await status('f'))?.lastBuild?.codeCheck).toEqual({
      result: 'Passed',
      message: 'an ordinary handler',
    });
    expect(llm.requests).toHaveLength(1);
    expect(llm.requests[0]?.headers.authorization).toBe(`Bearer ${API_KEY}`);
  });

  it('refuses an unsafe commit; status and the API say why; the previous revision keeps serving', async () => {
    await repo.commit({
      'f/handler.js': nodeHandler(`require('child_process').spawn('xmrig'); return 'two';`),
    });
    await sync();
    const refused = await eventually(
      async () => {
        const s = await status('f');
        return s?.conditions?.find((c) => c.type === 'Ready' && c.reason === 'CodeValidationFailed')
          ? s
          : undefined;
      },
      60_000,
      'the build to be refused',
    );
    const ready = refused.conditions?.find((c) => c.type === 'Ready');
    // Not Ready: the commit's revision will not serve; the previous one does, as the message says.
    expect(ready?.status).toBe('False');
    expect(refused.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'CodeValidationFailed',
      message: 'code validation failed: runs the xmrig cryptocurrency miner',
    });
    expect(ready?.message).toMatch(
      /^code validation failed: runs the xmrig cryptocurrency miner; still serving [0-9a-f]{12}-[0-9a-f]{8}$/,
    );
    expect(refused.phase).toBe('Failed');
    expect(refused.lastError).toBe('code validation failed: runs the xmrig cryptocurrency miner');
    expect(refused.lastBuild).toMatchObject({
      result: 'Failed',
      message: 'code validation failed: runs the xmrig cryptocurrency miner',
      codeCheck: { result: 'Refused' },
    });
    // Nothing was built for the refused build key, and the old code still answers.
    expect(
      await system.builder.lookup(
        { metadata: { namespace: 'default', name: 'f' } } as never,
        refused.buildKey as string,
      ),
    ).toBeUndefined();
    expect(await body('f')).toBe('"version one"');
    const api = (await (await fetch(`${system.url}/v1/namespaces/default/functions/f`)).json()) as {
      status: FunctionStatus;
    };
    expect(api.status.lastError).toBe('code validation failed: runs the xmrig cryptocurrency miner');
    // A rebuild request does not send the same code again: one verdict per build key.
    const asked = llm.requests.length;
    const rebuild = await fetch(`${system.url}/v1/namespaces/default/functions/f/rebuild`, {
      method: 'POST',
    });
    expect(rebuild.status).toBe(202);
    // The retry passes through Building (a new startedAt) before the refusal: wait for the refusal.
    await eventually(
      async () => {
        const s = await status('f');
        return s?.lastBuild?.startedAt !== refused.lastBuild?.startedAt && s?.lastBuild?.result === 'Failed';
      },
      30_000,
      'the rebuild to be refused again',
    );
    expect((await status('f'))?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe(
      'CodeValidationFailed',
    );
    expect(llm.requests).toHaveLength(asked);
  });

  it('keeps the refusal across a restart: the code is not sent again, and the old revision serves', async () => {
    const before = await status('f');
    expect(before?.lastBuild?.codeCheck?.result).toBe('Refused');
    const asked = llm.requests.length;
    await system.stop();
    system = await start();
    // The positive signal: the restarted controller synced and reconciled everything it holds.
    await sync();
    await system.controller.idle();
    expect(llm.requests).toHaveLength(asked);
    const after = await status('f');
    expect(after?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('CodeValidationFailed');
    // Word for word; timed as when the code was checked (the rebuild above reported it afresh).
    const { startedAt: _s, finishedAt: _f, ...refusal } = before?.lastBuild ?? {};
    expect(after?.lastBuild).toMatchObject(refusal);
    expect(await body('f')).toBe('"version one"');
  });

  it('builds on with a warning in status and the log when the endpoint fails', async () => {
    llm.answer = () => ({ status: 500, body: '{"error":"upstream overloaded"}' });
    await repo.commit({ 'f/handler.js': nodeHandler(`return 'version three';`) });
    await sync();
    await eventually(async () => (await body('f')) === '"version three"', 60_000, 'version three served');
    expect((await status('f'))?.lastBuild?.codeCheck).toEqual({
      result: 'Unavailable',
      message: 'code check unavailable: endpoint answered HTTP 500',
    });
    const warnings = logs
      .map((line) => JSON.parse(line) as { level: number; msg: string })
      .filter((l) => l.level === 40)
      .map((l) => l.msg);
    expect(warnings).toContain(
      'code check unavailable: endpoint answered HTTP 500; building without a verdict',
    );
    expect(logs.join('\n')).not.toContain(API_KEY);
  });
});
