/**
 * Secrets on the local platform, end to end with a real sless, real sandboxed function processes and
 * the real sops binary: a secret set with the CLI reaches the sandboxed function as a variable and
 * a 0400 file, and one from a SOPS file in git; the values appear nowhere else (API answers, status,
 * sless's own log lines, build logs, errors, /metrics, the state directory); a rotation under load
 * fails no request; a SOPS Secret of another namespace says so, breaks nothing that serves and
 * reaches no other namespace's store. What every platform does with a secret (missing, a missing key,
 * another namespace's, a rotation, values kept out of what the platform keeps, SOPS files decrypted or
 * refused) is the platform contract's (test/platform/contract.ts).
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { secretCommand } from '../../src/cli/secret.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';
import { ageKey, SOPS, secretYaml, sopsAvailable, sopsEncrypt } from '../helpers/sops.js';

const STRIPE_1 = `sk_live_one_${randomBytes(12).toString('hex')}`;
const STRIPE_2 = `sk_live_two_${randomBytes(12).toString('hex')}`;
const DB_PASSWORD = `db_pw_${randomBytes(12).toString('hex')}`;
const OTHER_NS_VALUE = `other_ns_${randomBytes(12).toString('hex')}`;
const VALUES = [STRIPE_1, STRIPE_2, DB_PASSWORD, OTHER_NS_VALUE];

const READER = nodeHandler(`
  const fs = require('node:fs');
  let file = null;
  try { file = fs.readFileSync('/var/sless/secrets/payments/stripe', 'utf8'); } catch (e) { file = 'unreadable: ' + e.code; }
  let mode = null;
  try { mode = (fs.statSync('/var/sless/secrets/payments/stripe').mode & 0o777).toString(8); } catch {}
  let shm = null;
  try { shm = fs.readdirSync('/dev/shm').filter((n) => n.startsWith('sless-sec')).length; } catch (e) { shm = e.code; }
  return { env: process.env.STRIPE ?? null, file, mode, shm, db: process.env.DB_PASSWORD ?? null };
`);

const API = '/v1/namespaces/default';

async function* walk(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.isFile()) yield path;
  }
}

describe.skipIf(!sopsAvailable())('secrets on the local platform', () => {
  let repo: TestRepo;
  let system: TestSystem;
  let keys: string;
  let recipient: string;
  let goodSops: string;
  const logLines: string[] = [];
  const answers: string[] = [];

  const call = async (path: string, init?: RequestInit) => {
    const response = await system.call(path, init);
    const text = await response.text();
    // /fn/ answers are the functions' own: they may hold what they read.
    if (!path.startsWith('/fn/'))
      answers.push(`${path} ${response.status} ${JSON.stringify([...response.headers])} ${text}`);
    return { status: response.status, text };
  };
  const json = async (path: string, init?: RequestInit) =>
    JSON.parse((await call(path, init)).text) as Record<string, unknown>;
  const put = (ns: string, name: string, stringData: Record<string, string>) =>
    call(`/v1/namespaces/${ns}/secrets/${name}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ stringData }),
    });
  const fnStatus = async (name: string) =>
    (await json(`${API}/functions/${name}`)).status as {
      phase?: string;
      conditions?: { type: string; status: string; reason: string; message: string }[];
      servingRevision?: string;
    };
  const ready = (status: Awaited<ReturnType<typeof fnStatus>>) =>
    status.conditions?.find((c) => c.type === 'Ready');
  const served = async (name: string) =>
    JSON.parse((await call(`/fn/default/${name}`)).text) as Record<string, string | null>;
  const sourceReady = async () =>
    (
      (await json(`${API}/sources/test`)).status as {
        conditions?: { type: string; status: string; reason: string; message: string }[];
      }
    ).conditions?.find((c) => c.type === 'Ready');
  const sync = () => call(`${API}/sources/test/sync`, { method: 'POST' });

  beforeAll(async () => {
    keys = await tempDir('age');
    ({ recipient } = await ageKey(keys, 'operator.key'));
    goodSops = await sopsEncrypt(keys, secretYaml('db', { password: DB_PASSWORD }), recipient);
    repo = await TestRepo.create({
      'pay/function.yaml': functionManifest('pay', {
        env: { PLAIN: 'visible', STRIPE: { secretRef: { name: 'payments', key: 'stripe' } } },
        secrets: [{ name: 'payments', mountPath: '/var/sless/secrets/payments' }],
      }),
      'pay/handler.js': READER,
      'gitsecret/function.yaml': functionManifest('gitsecret', {
        env: { DB_PASSWORD: { secretRef: { name: 'db', key: 'password' } } },
      }),
      'gitsecret/handler.js': READER,
      'gitsecret/db.sops.yaml': goodSops,
    });
    const capture = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    system = await startTestSystem({
      url: repo.dir,
      sopsAgeKeyFile: join(keys, 'operator.key'),
      env: { SLESS_SOPS_BINARY: SOPS },
      logger: pino({ level: 'debug' }, capture),
    });
    // A secret of another namespace, which no SOPS file of this one may reach (see the rejected files).
    await call('/v1/namespaces/other/ensure', { method: 'POST' });
    expect((await put('other', 'elsewhere', { x: OTHER_NS_VALUE })).status).toBe(201);
  }, 180_000);

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
  });

  it('a secret set with `sless secret set` reaches the sandboxed function as a variable and a 0400 file', async () => {
    // Waiting for it first (the contract's 'secret-missing' says how), so the CLI's set is what serves.
    await eventually(
      async () => ready(await fnStatus('pay'))?.reason === 'SecretNotFound',
      60_000,
      'SecretNotFound',
    );
    // As a user sets it: `sless secret set payments stripe=@file other=-`, values from a file and stdin.
    const valueFile = join(keys, 'stripe.txt');
    await writeFile(valueFile, STRIPE_1, { mode: 0o600 });
    const out: string[] = [];
    const io = (lines: string[], stdin = '') => ({
      stdout: (t: string) => lines.push(t),
      stderr: (t: string) => lines.push(t),
      readStdin: async () => Buffer.from(stdin),
    });
    const code = await secretCommand(['set', 'payments', `stripe=@${valueFile}`, 'other=-'], io(out, 'x\n'), {
      SLESS_URL: system.url,
    });
    expect(code, out.join('')).toBe(0);
    expect(out.join('')).toMatch(
      /^secret default\/payments created: keys other, stripe \(hash [0-9a-f]{16}\)\n$/,
    );
    const listed: string[] = [];
    expect(await secretCommand(['list'], io(listed), { SLESS_URL: system.url })).toBe(0);
    expect(listed.join('')).toMatch(/^payments\s+[0-9a-f]{16}\s+other,stripe$/m);
    answers.push(out.join(''), listed.join(''));
    await eventually(async () => (await fnStatus('pay')).phase === 'Ready', 60_000, 'pay Ready');
    // Read-only, and the function's alone: 0400 in a 0700 directory of its process.
    expect(await served('pay')).toEqual({ env: STRIPE_1, file: STRIPE_1, mode: '400', shm: 0, db: null });
  }, 120_000);

  it('a SOPS Secret in git is decrypted with the operator key and reaches the function', async () => {
    await eventually(async () => (await fnStatus('gitsecret')).phase === 'Ready', 60_000, 'gitsecret Ready');
    const other = await served('gitsecret');
    expect(other.db).toBe(DB_PASSWORD);
    // Another function's sandbox has neither pay's mount nor the host's per-process secret directories.
    expect(other).toMatchObject({ env: null, file: 'unreadable: ENOENT', shm: 0 });
    const listed = (await json(`${API}/secrets`)).items as { name: string; managedBy?: string }[];
    expect(listed.map((s) => [s.name, s.managedBy])).toEqual([
      ['db', 'default/test'],
      ['payments', undefined],
    ]);
    // A secret git manages is git's: the API may not change it.
    expect((await put('default', 'db', { password: 'nope' })).status).toBe(409);
  }, 120_000);

  it('rotates under load through /fn/ with zero failed requests, and serves the new value', async () => {
    const before = (await fnStatus('pay')).servingRevision;
    let stop = false;
    const results = { ok: 0, failed: [] as string[], old: 0, fresh: 0 };
    const worker = async () => {
      while (!stop) {
        try {
          const response = await system.call('/fn/default/pay');
          const text = await response.text();
          if (response.status !== 200) results.failed.push(`${response.status} ${text.slice(0, 100)}`);
          else {
            results.ok++;
            const body = JSON.parse(text) as { env: string; file: string };
            if (body.env === STRIPE_2 && body.file === STRIPE_2) results.fresh++;
            else if (body.env === STRIPE_1 && body.file === STRIPE_1) results.old++;
            else results.failed.push(`mixed answer ${body.env === STRIPE_1} ${body.file === STRIPE_1}`);
          }
        } catch (error) {
          results.failed.push(String(error));
        }
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    await new Promise((r) => setTimeout(r, 500));
    const started = Date.now();
    expect((await put('default', 'payments', { stripe: STRIPE_2, other: 'x' })).status).toBe(200);
    await eventually(async () => results.fresh > 20, 60_000, 'the new value served');
    const rolledMs = Date.now() - started;
    stop = true;
    await Promise.all(workers);
    console.log(
      `rotation under load: ${results.ok} requests, ${results.old} old, ${results.fresh} new, ${results.failed.length} failed; new value after ${rolledMs} ms`,
    );
    expect(results.failed).toEqual([]);
    expect(results.old).toBeGreaterThan(0);
    await eventually(async () => (await fnStatus('pay')).phase === 'Ready', 30_000, 'Ready after rotation');
    expect((await fnStatus('pay')).servingRevision).not.toBe(before);
  }, 120_000);

  // A tampered file and one for another key are refused in the platform contract's 'sops-secret'
  // case (test/platform); what only this platform shows is the other namespace's store, untouched.
  it('a SOPS Secret naming another namespace is rejected with the file and the reason, and reaches none', async () => {
    const cases: [string, string, RegExp][] = [
      [
        'other namespace',
        await sopsEncrypt(keys, secretYaml('db', { password: DB_PASSWORD }, 'other'), recipient),
        /gitsecret\/db\.sops\.yaml#0 metadata\.namespace: must be omitted or "default"/,
      ],
    ];
    for (const [what, content, expected] of cases) {
      await repo.commit({ 'gitsecret/db.sops.yaml': content }, what);
      await sync();
      await eventually(
        async () => (await sourceReady())?.reason === 'ValidationFailed',
        30_000,
        `${what} rejected`,
      );
      expect((await sourceReady())?.message, what).toMatch(expected);
      // What runs keeps running: the function and its secret as they were.
      expect((await served('gitsecret')).db, what).toBe(DB_PASSWORD);
      expect((await fnStatus('gitsecret')).phase, what).toBe('Ready');
    }
    // Nothing reached the other namespace.
    expect(
      ((await json('/v1/namespaces/other/secrets')).items as { name: string }[]).map((s) => s.name),
    ).toEqual(['elsewhere']);
    await repo.commit({ 'gitsecret/db.sops.yaml': goodSops }, 'fixed');
    await sync();
    await eventually(async () => (await sourceReady())?.reason === 'Synced', 30_000, 'synced again');
  }, 120_000);

  it('the values appear in no API answer, status, log line of sless, build log, error, /metrics or state file', async () => {
    for (const name of ['pay', 'gitsecret']) {
      await call(`${API}/functions/${name}`);
      await call(`${API}/functions/${name}/builds?tail=200`);
      await call(`${API}/functions/${name}/logs?tail=200`);
    }
    await call(`${API}/functions`);
    await call(`${API}/sources`);
    await call(`${API}/secrets`);
    await call(`${API}/secrets/payments`);
    await call('/v1/namespaces/other/secrets');
    await call('/metrics');
    await call('/openapi.json');
    const haystacks: [string, string][] = [
      ['API answers', answers.join('\n')],
      ['sless log lines', logLines.join('')],
    ];
    let files = 0;
    for await (const path of walk(system.stateDir)) {
      files++;
      haystacks.push([path, (await readFile(path)).toString('latin1')]);
    }
    // The scan reads what sless really logged: syncs, the rejected commits, the rollouts.
    const logged = logLines.join('');
    for (const msg of ['source synced', 'manifests rejected', 'metadata.namespace: must be omitted'])
      expect(logged).toContain(msg);
    expect(files).toBeGreaterThan(5);
    for (const value of VALUES)
      for (const form of [value, Buffer.from(value).toString('base64')])
        for (const [where, text] of haystacks)
          expect(text.includes(form), `${where} holds a secret value`).toBe(false);
  });

  it('keeps the store sealed at rest: files 0600, the key 0600 and apart from them', async () => {
    const sealed = join(system.stateDir, 'secrets', 'default', 'payments.sealed');
    const key = join(system.stateDir, 'secret-key', 'store.key');
    expect((await stat(sealed)).mode & 0o777).toBe(0o600);
    expect((await stat(key)).mode & 0o777).toBe(0o600);
    expect((await stat(join(system.stateDir, 'secrets'))).mode & 0o777).toBe(0o700);
    expect(JSON.parse(await readFile(sealed, 'utf8'))).toMatchObject({ alg: 'AES-256-GCM' });
  });
});
