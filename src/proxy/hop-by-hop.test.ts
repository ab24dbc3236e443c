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

  it('matches Connection tokens case-insensitively: a mixed-case token still strips its header', () => {
    const out = stripHopByHop({
      connection: 'Keep-Alive, X-Private ,  X-Other',
      'x-private': 'secret',
      'x-other': 'also secret',
      'x-public': 'ok',
    });
    expect(out).toEqual({ 'x-public': 'ok' });
  });

  it('reads every Connection header when several arrive, and drops the extra names given', () => {
    const out = stripHopByHop(
      { connection: ['x-one', 'X-Two'], 'x-one': '1', 'x-two': '2', 'x-three': '3', 'x-keep': 'k' },
      ['x-three'],
    );
    expect(out).toEqual({ 'x-keep': 'k' });
  });

  it('drops every RFC 9110 hop-by-hop header, whatever the case of its name, and keeps the rest', () => {
    const hop = [
      'Connection',
      'Keep-Alive',
      'Proxy-Authenticate',
      'Proxy-Authorization',
      'Proxy-Connection',
      'TE',
      'Trailer',
      'Trailers',
      'Transfer-Encoding',
      'Upgrade',
    ];
    const headers: Record<string, string | undefined> = { 'X-Kept': 'v', 'x-undefined': undefined };
    for (const name of hop) headers[name] = 'x';
    headers.connection = 'close';
    expect(stripHopByHop(headers)).toStrictEqual({ 'x-kept': 'v' });
    expect(stripHopByHop({})).toEqual({});
  });
});
