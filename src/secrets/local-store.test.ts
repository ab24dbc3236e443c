/**
 * LocalSecretStore in a real state directory: each secret sealed 0600 under a key kept apart and opened
 * after a restart, never under another name or key; listings show keys and a keyed hash, never values;
 * secrets git manages stay out of the API's reach; and references resolve in the function's own namespace.
 */
import { mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalSecretStore, SecretInputError, SecretManagedError } from './local-store.js';
import { resolveSecrets, valuesHash } from './references.js';

const logger = pino({ level: 'silent' });
const VALUE = 'sk_live_local_store_value_1234';

describe('LocalSecretStore', () => {
  let state: string;
  beforeEach(async () => {
    state = await mkdtemp(join(tmpdir(), 'sless-secret-store-'));
  });
  afterEach(() => rm(state, { recursive: true, force: true }));

  const open = () => new LocalSecretStore({ stateDir: state, logger }).open();

  it('seals each secret under a key kept apart, 0600, and opens it again after a restart', async () => {
    open().set('default', 'payments', { stripe: Buffer.from(VALUE) });
    const sealed = join(state, 'secrets', 'default', 'payments.sealed');
    const text = await readFile(sealed, 'utf8');
    expect(text).not.toContain(VALUE);
    expect(text).not.toContain(Buffer.from(VALUE).toString('base64'));
    expect((await stat(sealed)).mode & 0o777).toBe(0o600);
    expect((await stat(join(state, 'secret-key', 'store.key'))).mode & 0o777).toBe(0o600);
    expect(Buffer.from(open().getSync('default', 'payments')?.data.stripe ?? '').toString()).toBe(VALUE);
  });

  it('does not open a sealed file under another name, nor with another key', async () => {
    const store = open();
    store.set('default', 'payments', { stripe: Buffer.from(VALUE) });
    await rename(
      join(state, 'secrets', 'default', 'payments.sealed'),
      join(state, 'secrets', 'default', 'other.sealed'),
    );
    expect(open().getSync('default', 'other')).toBeUndefined();
    store.set('default', 'payments', { stripe: Buffer.from(VALUE) });
    await writeFile(join(state, 'secret-key', 'store.key'), 'ab'.repeat(32));
    expect(open().getSync('default', 'payments')).toBeUndefined();
  });

  it('lists keys and a keyed hash, never values; the hash changes with a value only', () => {
    const store = open();
    store.set('default', 'payments', { stripe: Buffer.from(VALUE) });
    const [summary] = store.list('default');
    expect(summary).toMatchObject({
      name: 'payments',
      keys: ['stripe'],
      hash: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expect(JSON.stringify(store.list('default'))).not.toContain(VALUE);
    expect(store.set('default', 'payments', { stripe: Buffer.from(VALUE) }).changed).toBe(false);
    const rotated = store.set('default', 'payments', { stripe: Buffer.from(`${VALUE}x`) });
    expect(rotated.changed).toBe(true);
    expect(rotated.summary.hash).not.toBe(summary?.hash);
  });

  it('refuses bad input and keeps a secret git manages away from the API', async () => {
    const store = open();
    expect(() => store.set('default', 'x', {})).toThrow(SecretInputError);
    expect(() => store.set('default', 'x', { 'a b': Buffer.from('v') })).toThrow(SecretInputError);
    expect(() => store.set('default', 'Bad', { a: Buffer.from('v') })).toThrow(SecretInputError);
    await store.reconcile('default', 'default/repo', [
      { namespace: 'default', name: 'db', data: { p: Buffer.from('v') } },
    ]);
    expect(() => store.set('default', 'db', { p: Buffer.from('w') })).toThrow(SecretManagedError);
    expect(() => store.delete('default', 'db')).toThrow(SecretManagedError);
    store.set('default', 'mine', { a: Buffer.from('v') });
    await expect(
      store.reconcile('default', 'default/repo', [
        { namespace: 'default', name: 'mine', data: { p: Buffer.from('v') } },
      ]),
    ).rejects.toThrow(SecretManagedError);
    // The file left git: its secret goes.
    await store.reconcile('default', 'default/repo', []);
    expect(store.getSync('default', 'db')).toBeUndefined();
    expect(store.getSync('default', 'mine')).toBeDefined();
  });

  it('resolves references in the function’s own namespace only, naming what is missing', async () => {
    const store = open();
    store.set('other', 'payments', { stripe: Buffer.from(VALUE) });
    const fn = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: { name: 'pay', namespace: 'default' },
      spec: {
        runtime: 'nodejs20',
        entrypoint: 'h.h',
        env: { S: { secretRef: { name: 'payments', key: 'stripe' } } },
      },
    } as const;
    // biome-ignore lint/suspicious/noExplicitAny: a literal Function for the resolver
    const f = fn as any;
    expect(await resolveSecrets(store, f)).toEqual({ ok: false, missing: { name: 'payments' } });
    store.set('default', 'payments', { other: Buffer.from('x') });
    expect(await resolveSecrets(store, f)).toEqual({
      ok: false,
      missing: { name: 'payments', key: 'stripe' },
    });
    store.set('default', 'payments', { stripe: Buffer.from(VALUE) });
    const first = await resolveSecrets(store, f);
    expect(first.ok && first.hash).toMatch(/^[0-9a-f]{16}$/);
    store.set('default', 'payments', { stripe: Buffer.from(`${VALUE}2`) });
    const second = await resolveSecrets(store, f);
    expect(second.ok && second.hash).not.toBe(first.ok && first.hash);
  });

  it('keys the hash: the same values under another key hash differently', () => {
    const data = { stripe: Buffer.from(VALUE) };
    expect(valuesHash({ data, hashKey: 'a' })).not.toBe(valuesHash({ data, hashKey: 'b' }));
  });
});
