import { describe, expect, it } from 'vitest';
import { stripHopByHop } from './hop-by-hop.js';

describe('stripHopByHop', () => {
  it('drops RFC 9110 hop-by-hop headers and those named in Connection', () => {
    const out = stripHopByHop({
      connection: 'keep-alive, x-private',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      te: 'trailers',
      upgrade: 'h2c',
      'x-private': 'secret',
      'content-type': 'application/json',
      'x-request-id': 'abc',
    });
    expect(out).toEqual({ 'content-type': 'application/json', 'x-request-id': 'abc' });
  });
});
