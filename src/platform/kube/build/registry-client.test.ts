/**
 * The registry client's inputs: image references parsed into host, repository and sha256 digest (others
 * refused), and push credentials read from a dockerconfigjson by host in either of its forms.
 */
import { describe, expect, it } from 'vitest';
import { credentialsFor, parseImage } from './registry-client.js';

const digest = `sha256:${'ab'.repeat(32)}`;

describe('registry client', () => {
  it.each([
    [`r.example.com:5000/ns-fn:${'c'.repeat(40)}@${digest}`, 'r.example.com:5000', 'ns-fn'],
    [`r.example.com/sless/ns-fn:${'c'.repeat(40)}@${digest}`, 'r.example.com', 'sless/ns-fn'],
    [`127.0.0.1:5000/ns-fn@${digest}`, '127.0.0.1:5000', 'ns-fn'],
  ])('parses %s', (image, host, repository) => {
    expect(parseImage(image)).toEqual({ host, repository, digest });
  });

  it.each([
    'r.example.com/ns-fn:tag',
    'ns-fn@sha256:00',
    `r.example.com/ns-fn:tag@sha256:${'AB'.repeat(32)}`,
  ])('refuses %s (no digest, no host, or not a sha256 digest)', (image) => {
    expect(parseImage(image)).toBeUndefined();
  });

  it('reads push credentials from a dockerconfigjson by host, in either form', () => {
    const auth = Buffer.from('pusher:p:w').toString('base64');
    expect(credentialsFor(JSON.stringify({ auths: { 'r:5000': { auth } } }), 'r:5000')).toEqual({
      username: 'pusher',
      password: 'p:w',
    });
    expect(
      credentialsFor(JSON.stringify({ auths: { 'https://r': { username: 'u', password: 'x' } } }), 'r'),
    ).toEqual({ username: 'u', password: 'x' });
    expect(credentialsFor(JSON.stringify({ auths: { other: { auth } } }), 'r')).toBeUndefined();
  });
});
