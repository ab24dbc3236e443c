/**
 * loopbackRefusal, the guard of an unauthenticated API bound to loopback: loopback Host values and
 * same-origin browsers pass; rebound names, foreign or null origins and cross-site fetches are refused.
 */
import { describe, expect, test } from 'vitest';
import { loopbackRefusal } from './loopback-guard.js';

describe('loopbackRefusal', () => {
  test('loopback Host values, with or without a same-origin browser, pass', () => {
    for (const host of ['localhost', 'localhost:8080', '127.0.0.1:1', '127.1.2.3', '[::1]:8080', 'LOCALHOST'])
      expect(loopbackRefusal({ host }), host).toBeUndefined();
    expect(
      loopbackRefusal({
        host: 'localhost:8080',
        origin: 'http://127.0.0.1:8080',
        'sec-fetch-site': 'same-origin',
      }),
    ).toBeUndefined();
    expect(loopbackRefusal({ host: 'localhost', 'sec-fetch-site': 'none' })).toBeUndefined();
  });

  test('rebound names, foreign origins and cross-site fetches are refused', () => {
    const refused = [
      { host: 'attacker.example' },
      { host: 'localhost.attacker.example' },
      { host: '127.0.0.1.nip.io' },
      {},
      { host: 'localhost', origin: 'http://attacker.example' },
      { host: 'localhost', origin: 'null' },
      { host: 'localhost', 'sec-fetch-site': 'cross-site' },
      { host: 'localhost', 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of refused) expect(loopbackRefusal(headers), JSON.stringify(headers)).toBeDefined();
  });
});
