/**
 * The code security gate's memory on the local platform: a refused commit stays refused across a
 * restart of the running system, without the code being sent to the endpoint again, and the previous
 * revision keeps serving. What a refusal and a failing endpoint look like in status, the API and /fn/
 * is the platform contract's (test/platform). The endpoint is a local server speaking the
 * chat-completions wire format (no model runs here).
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
        logger: pino({ level: 'silent' }),
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

  // What a refusal looks like in status, the API and /fn/, and a failing endpoint, are the platform
  // contract's cases ('code-refused', 'code-check-unavailable'); here: what the local platform keeps.
  it('keeps the refusal across a restart: the code is not sent again, and the old revision serves', async () => {
    await repo.commit({
      'f/handler.js': nodeHandler(`require('child_process').spawn('xmrig'); return 'two';`),
    });
    await sync();
    await eventually(
      async () =>
        (await status('f'))?.conditions?.some(
          (c) => c.type === 'Ready' && c.reason === 'CodeValidationFailed',
        ),
      60_000,
      'the build to be refused',
    );
    await system.controller.idle();
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
    // Word for word, and timed as when the code was checked: nothing was asked or built again.
    expect(after?.lastBuild).toEqual(before?.lastBuild);
    expect(await body('f')).toBe('"version one"');
  });
});
