/**
 * The proxy's hop-by-hop header stripping, on header objects and on raw header lines: the standard
 * hop-by-hop headers and every name a Connection header lists are dropped whatever their case, the rest
 * kept (raw lines in order, names lower-cased).
 */
import { describe, expect, it } from 'vitest';
import { stripHopByHop, stripHopByHopRaw } from './hop-by-hop.js';

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

describe('stripHopByHopRaw', () => {
  it('keeps end-to-end lines in order with lower-case names, drops hop-by-hop ones and those every Connection line names', () => {
    const out = stripHopByHopRaw([
      'Host',
      'example.com',
      'Connection',
      'Keep-Alive, X-Private',
      'X-Private',
      'secret',
      'Accept',
      'text/html',
      'connection',
      'x-second',
      'X-Second',
      'also secret',
      'Transfer-Encoding',
      'chunked',
      'Proxy-Authorization',
      'Basic abc',
      'Accept',
      'application/json',
      'TE',
      'trailers',
    ]);
    expect(out).toEqual(['host', 'example.com', 'accept', 'text/html', 'accept', 'application/json']);
  });

  it('drops a header the Connection line names even when it comes first', () => {
    expect(stripHopByHopRaw(['X-Early', '1', 'Connection', 'x-early', 'X-Late', '2'])).toEqual([
      'x-late',
      '2',
    ]);
    expect(stripHopByHopRaw([])).toEqual([]);
  });
});
