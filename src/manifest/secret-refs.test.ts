/**
 * Validation of a Function's secret references: secretRef env values and secret mounts accepted, a
 * namespace in a reference refused, and every malformed reference or mount path (system directories,
 * unnormalized, overlapping, a secret mounted twice) reported with its field and reason.
 */
import { describe, expect, it } from 'vitest';
import { validateResource } from './validate.js';

function fn(spec: Record<string, unknown>) {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name: 'pay' },
    spec: { runtime: 'nodejs20', entrypoint: 'h.h', ...spec },
  };
}

const messages = (doc: unknown) =>
  validateResource('Function', doc, { file: 'fn.yaml', index: 0 }).map(
    (i) => `${i.file}#${i.index} ${i.field}: ${i.reason}`,
  );

describe('secret references in a Function', () => {
  it('accepts secretRef env values beside plain strings, and secret mounts', () => {
    expect(
      messages(
        fn({
          env: { PLAIN: 'x', STRIPE: { secretRef: { name: 'payments', key: 'stripe.key' } } },
          secrets: [{ name: 'payments', mountPath: '/var/sless/secrets/payments' }],
        }),
      ),
    ).toEqual([]);
  });

  it('refuses a namespace in a reference: secrets resolve in the function’s own namespace only', () => {
    expect(messages(fn({ env: { K: { secretRef: { name: 'a', key: 'b', namespace: 'other' } } } }))).toEqual([
      "fn.yaml#0 spec.env.K.secretRef.namespace: is not allowed: secrets resolve in the function's own namespace only",
    ]);
  });

  it('names the field and the reason of every malformed reference', () => {
    expect(
      messages(
        fn({
          env: {
            A: 1,
            B: { secretRef: { name: 'Bad_Name', key: 'k' } },
            C: { secretRef: { name: 'ok' } },
            D: { secretRef: { name: 'ok', key: 'a b' } },
            E: { secretRef: 'ok' },
            F: { secretRef: { name: 'ok', key: 'k' }, value: 'x' },
            G: ['x'],
          },
        }),
      ),
    ).toEqual([
      'fn.yaml#0 spec.env.A: must be a string or { secretRef: { name, key } }',
      'fn.yaml#0 spec.env.B.secretRef.name: must be a DNS-1123 label (lowercase letters, digits and "-")',
      'fn.yaml#0 spec.env.C.secretRef.key: is required',
      'fn.yaml#0 spec.env.D.secretRef.key: must be a secret key (letters, digits, "-", "_" and ".")',
      'fn.yaml#0 spec.env.E.secretRef: must be { name, key }',
      'fn.yaml#0 spec.env.F.value: unknown field (a secret reference has only secretRef: { name, key })',
      'fn.yaml#0 spec.env.G: must be a string or { secretRef: { name, key } }',
    ]);
  });

  it('the schema refuses a relative mount path and / first, and nothing else yet (the path checks run once it passes)', () => {
    expect(
      messages(
        fn({
          secrets: [
            { name: 'a', mountPath: '/etc/ssl' },
            { name: 'b', mountPath: '/var/s/../x' },
            { name: 'c', mountPath: '/var/s' },
            { name: 'd', mountPath: '/var/s/inner' },
            { name: 'c', mountPath: '/srv/c' },
            { name: 'e', mountPath: 'relative' },
            { name: 'f', mountPath: '/' },
          ],
        }),
      ),
    ).toEqual(
      [
        'fn.yaml#0 spec.secrets.6.mountPath: must match pattern "^/[A-Za-z0-9._/-]+$"',
        'fn.yaml#0 spec.secrets.6.mountPath: must NOT have fewer than 2 characters',
        'fn.yaml#0 spec.secrets.5.mountPath: must match pattern "^/[A-Za-z0-9._/-]+$"',
      ].sort(),
    );
  });

  it('checks mount paths once the schema passes', () => {
    expect(
      messages(
        fn({
          secrets: [
            { name: 'a', mountPath: '/etc/ssl' },
            { name: 'b', mountPath: '/var/s/../x' },
            { name: 'c', mountPath: '/var/s' },
            { name: 'd', mountPath: '/var/s/inner' },
            { name: 'c', mountPath: '/srv/c' },
            { name: 'g', mountPath: '/usr' },
          ],
        }),
      ),
    ).toEqual([
      'fn.yaml#0 spec.secrets.0.mountPath: may not be /etc/ssl or overlap /etc',
      'fn.yaml#0 spec.secrets.1.mountPath: must be a normalized absolute path (no "//", "." or "..")',
      "fn.yaml#0 spec.secrets.3.mountPath: overlaps another secret's mountPath /var/s",
      'fn.yaml#0 spec.secrets.4.name: secret "c" is mounted twice',
      'fn.yaml#0 spec.secrets.5.mountPath: may not be /usr or overlap /usr',
    ]);
  });
});
