/**
 * The replicas' report wire form: the signature is pinned (a golden value, so a change of the MAC's
 * input is a visible protocol change), any other key or any changed byte fails, and a malformed
 * body is refused with a reason; canary batches travel as written, and are left out when none.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { encodeReport, parseReport, REPORT_LIMITS, signatureMatches, signReport } from './replica-report.js';

const KEY = Buffer.alloc(32, 7);
const COUNTS = {
  key: 'ns/fn',
  revision: 'abc123',
  since: 1_699_999_990_000,
  requests: 4,
  errors: 1,
  latencies: [3, 5.5, 2, 9],
};
const REPORT = { replica: 'r-b', leader: 'r-a', sentAt: 1_700_000_000_000, concurrency: { 'ns/fn': 2.5 } };

describe('replica report signatures', () => {
  it('signs the body under the key, after a domain prefix', () => {
    const { body, signature } = encodeReport(KEY, REPORT);
    expect(body).toBe('{"replica":"r-b","leader":"r-a","sentAt":1700000000000,"concurrency":{"ns/fn":2.5}}');
    const expected = createHmac('sha256', KEY)
      .update(`sless replica concurrency report v1\n${body}`)
      .digest('hex');
    expect(signature).toBe(`v1=${expected}`);
    expect(signatureMatches(KEY, Buffer.from(body), signature)).toBe(true);
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['another key', signReport(Buffer.alloc(32, 8), Buffer.from(encodeReport(KEY, REPORT).body))],
    ['no scheme', encodeReport(KEY, REPORT).signature.slice(3)],
    ['a short digest', encodeReport(KEY, REPORT).signature.slice(0, -2)],
    ['upper-case hex', encodeReport(KEY, REPORT).signature.toUpperCase().replace('V1=', 'v1=')],
    [
      'the MAC without the domain prefix',
      `v1=${createHmac('sha256', KEY).update(encodeReport(KEY, REPORT).body).digest('hex')}`,
    ],
  ])('refuses %s', (_what, header) => {
    expect(signatureMatches(KEY, Buffer.from(encodeReport(KEY, REPORT).body), header)).toBe(false);
  });

  it('refuses the signature of a body changed by one byte', () => {
    const { body, signature } = encodeReport(KEY, REPORT);
    expect(signatureMatches(KEY, Buffer.from(body.replace('2.5', '9.5')), signature)).toBe(false);
  });
});

describe('parseReport', () => {
  it('reads what encodeReport wrote', () => {
    expect(parseReport(Buffer.from(encodeReport(KEY, REPORT).body))).toEqual(REPORT);
    // No batch: no field, so a report without canary counts is byte for byte what it was before.
    expect(encodeReport(KEY, { ...REPORT, canaries: [] }).body).toBe(encodeReport(KEY, REPORT).body);
    const withCounts = {
      ...REPORT,
      canaries: [
        { seq: 5, counts: [COUNTS] },
        { seq: 9, counts: [] },
      ],
    };
    expect(parseReport(Buffer.from(encodeReport(KEY, withCounts).body))).toEqual(withCounts);
  });

  const body = (patch: Record<string, unknown>) => Buffer.from(JSON.stringify({ ...REPORT, ...patch }));
  it.each([
    ['not JSON', Buffer.from('{'), 'the body is not JSON'],
    ['an array', Buffer.from('[]'), 'the body must be an object'],
    ['no replica', body({ replica: undefined }), 'replica must be a name'],
    ['an empty leader', body({ leader: '' }), 'leader must be a name'],
    ['a fractional sentAt', body({ sentAt: 1.5 }), 'sentAt must be a positive integer'],
    ['a negative average', body({ concurrency: { 'ns/fn': -1 } }), "ns/fn's in-flight average"],
    [
      'an average past the limit',
      body({ concurrency: { 'ns/fn': REPORT_LIMITS.concurrency + 1 } }),
      'must be within',
    ],
    ['a string average', body({ concurrency: { 'ns/fn': '3' } }), 'must be within'],
    ['a key without a namespace', body({ concurrency: { fn: 1 } }), 'a function key must be namespace/name'],
    ['concurrency as a list', body({ concurrency: [1] }), 'concurrency must be an object'],
    [
      'too many functions',
      body({
        concurrency: Object.fromEntries(
          Array.from({ length: REPORT_LIMITS.functions + 1 }, (_, i) => [`ns/f${i}`, 1]),
        ),
      }),
      `more than ${REPORT_LIMITS.functions} functions`,
    ],
    [
      'batches out of order',
      body({
        canaries: [
          { seq: 9, counts: [] },
          { seq: 9, counts: [] },
        ],
      }),
      'strictly increasing seq',
    ],
    ['a batch without seq', body({ canaries: [{ counts: [] }] }), 'strictly increasing seq'],
    [
      'too many batches',
      body({
        canaries: Array.from({ length: REPORT_LIMITS.batches + 1 }, (_, i) => ({ seq: i + 1, counts: [] })),
      }),
      `at most ${REPORT_LIMITS.batches} batches`,
    ],
    [
      'more errors than requests',
      body({ canaries: [{ seq: 1, counts: [{ ...COUNTS, errors: 5 }] }] }),
      'more errors than requests',
    ],
    [
      'a fractional request count',
      body({ canaries: [{ seq: 1, counts: [{ ...COUNTS, requests: 1.5 }] }] }),
      'requests must be a whole number',
    ],
    [
      'a negative latency',
      body({ canaries: [{ seq: 1, counts: [{ ...COUNTS, latencies: [-1] }] }] }),
      'latencies must be at most',
    ],
    [
      'too many latencies',
      body({
        canaries: [
          { seq: 1, counts: [{ ...COUNTS, latencies: Array(REPORT_LIMITS.latencies + 1).fill(1) }] },
        ],
      }),
      'latencies must be at most',
    ],
    [
      'a canary key without a namespace',
      body({ canaries: [{ seq: 1, counts: [{ ...COUNTS, key: 'fn' }] }] }),
      'namespace/name',
    ],
    [
      'no revision',
      body({ canaries: [{ seq: 1, counts: [{ ...COUNTS, revision: '' }] }] }),
      'revision must be a name',
    ],
    [
      'a zero since',
      body({ canaries: [{ seq: 1, counts: [{ ...COUNTS, since: 0 }] }] }),
      'since must be positive',
    ],
  ])('refuses %s', (_what, raw, message) => {
    expect(() => parseReport(raw)).toThrow(message);
  });
});
