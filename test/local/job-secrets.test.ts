/**
 * A FunctionJob's secrets on the local platform, through the real entry point with real sandboxed
 * processes: a run sees the function's secret files at their mountPath and its `secretRef` variables,
 * as a serving process does; its secret directory is gone once the run ends; a missing secret fails
 * the run naming it; and the value appears in no sless log line and nowhere in the job's status but
 * where the tenant's own handler put it.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionJob } from '../../src/core/resources.js';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

const TOKEN = `vault_token_${randomBytes(12).toString('hex')}`;
const MOUNT = '/var/sless/secrets/vault';

// Where SecretFiles writes: /dev/shm where there is one.
const SECRET_ROOT = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
const secretDirs = async () =>
  new Set((await readdir(SECRET_ROOT)).filter((name) => name.startsWith(`sless-sec-${process.pid}-`)));

const READER = nodeHandler(`
  const fs = require('node:fs');
  // Long enough for the test to see the run's secret directory while it runs.
  if (event.body && event.body.holdMs) await new Promise((r) => setTimeout(r, event.body.holdMs));
  let file = null;
  try { file = fs.readFileSync('${MOUNT}/token', 'utf8'); } catch (e) { file = 'unreadable: ' + e.code; }
  let mode = null;
  try { mode = (fs.statSync('${MOUNT}/token').mode & 0o777).toString(8); } catch {}
  return { env: process.env.TOKEN ?? null, file, mode };
`);

function jobOf(name: string, fn: string, event: Record<string, unknown>): FunctionJob {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'FunctionJob',
    metadata: { name, namespace: 'default' },
    spec: { function: fn, event, runId: 1 },
  };
}

describe('FunctionJob secrets (local, sandboxed)', () => {
  let repo: TestRepo;
  let system: TestSystem;
  const logLines: string[] = [];

  const finished = (name: string) =>
    eventually(
      async () => {
        const job = await system.store.get('FunctionJob', 'default', name);
        return job?.status?.phase === 'Succeeded' || job?.status?.phase === 'Failed' ? job : undefined;
      },
      60_000,
      `${name} finished`,
    );

  beforeAll(async () => {
    repo = await TestRepo.create({
      'vault/function.yaml': functionManifest('vault', {
        env: { TOKEN: { secretRef: { name: 'vault', key: 'token' } } },
        secrets: [{ name: 'vault', mountPath: MOUNT }],
      }),
      'vault/handler.js': READER,
      // Its only secret is a file of a secret nobody set.
      'lost/function.yaml': functionManifest('lost', {
        secrets: [{ name: 'absent', mountPath: '/var/sless/secrets/absent' }],
      }),
      'lost/handler.js': READER,
    });
    const capture = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    system = await startTestSystem({ url: repo.dir, logger: pino({ level: 'debug' }, capture) });
    const put = await system.call('/v1/namespaces/default/secrets/vault', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ stringData: { token: TOKEN } }),
    });
    expect(put.status).toBe(201);
    await eventually(
      async () => (await system.functionStatus('vault'))?.phase === 'Ready',
      90_000,
      'vault Ready',
    );
  }, 180_000);

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('a run reads its secret file and variable, and leaves no secret directory behind', async () => {
    // The serving process's own directory stays; the run's is the one that comes and goes.
    const serving = await secretDirs();
    await system.store.apply(jobOf('read', 'vault', { holdMs: 1500 }));
    let seenDuringRun: string[] = [];
    await eventually(
      async () => {
        seenDuringRun = [...(await secretDirs())].filter((dir) => !serving.has(dir));
        return seenDuringRun.length > 0;
      },
      30_000,
      "the run's secret directory",
    );
    const job = await finished('read');
    expect(job.status?.phase, job.status?.message).toBe('Succeeded');
    expect(job.status?.result).toEqual({
      statusCode: 200,
      body: { env: TOKEN, file: TOKEN, mode: '400' },
    });
    expect(seenDuringRun).toHaveLength(1);
    expect([...(await secretDirs())].filter((dir) => !serving.has(dir))).toEqual([]);
    // The handler chose to return it (result, and its own output line); nothing else holds it.
    const { result: _result, outputTail: _tail, ...rest } = job.status ?? {};
    expect(JSON.stringify(rest)).not.toContain(TOKEN);
  }, 90_000);

  it('a missing secret fails the run with a message naming it, and leaves nothing behind', async () => {
    const before = await secretDirs();
    await system.store.apply(jobOf('lost-run', 'lost', {}));
    const job = await finished('lost-run');
    expect(job.status?.phase).toBe('Failed');
    expect(job.status?.message).toBe('secret "absent" not found in namespace default');
    expect(job.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      message: 'secret "absent" not found in namespace default',
    });
    expect(await secretDirs()).toEqual(before);
  }, 90_000);

  it("the value is in none of sless's log lines", () => {
    const logged = logLines.join('');
    // The scan reads what sless really logged about these runs.
    expect(logged).toContain('job finished');
    expect(logged).toContain('job run failed');
    for (const form of [TOKEN, Buffer.from(TOKEN).toString('base64')])
      expect(logged.includes(form), 'a sless log line holds the secret value').toBe(false);
  });
});
