/** A URL's password is cut out of a message in both its written (percent-encoded) and decoded forms. */
import { describe, expect, it } from 'vitest';
import { withoutPassword } from './redact-url.js';

describe('withoutPassword', () => {
  it('cuts the decoded and the written password out of a message', () => {
    const url = 'amqp://sless:p%40ss%2Fw0rd@broker:5672/';
    expect(withoutPassword(url, `connect ${url} refused: p@ss/w0rd`)).toBe(
      'connect amqp://sless:[redacted]@broker:5672/ refused: [redacted]',
    );
  });

  it('leaves a message alone when the URL has no password or is not a URL', () => {
    expect(withoutPassword('amqp://broker:5672/', 'refused')).toBe('refused');
    expect(withoutPassword('not a url', 'refused: not a url')).toBe('refused: not a url');
  });
});
