/** Where the dashboard links a commit: derived from the source's URL, and no link rather than a guess. */
import { describe, expect, test } from 'vitest';
import { commitUrl } from '../../ui/src/links.js';

const SHA = '0123456789abcdef0123456789abcdef01234567';

describe('commitUrl', () => {
  test.each([
    ['https://github.com/acme/shop.git', undefined, `https://github.com/acme/shop/commit/${SHA}`],
    ['https://github.com/acme/shop/', undefined, `https://github.com/acme/shop/commit/${SHA}`],
    ['https://gitlab.com/group/sub/shop.git', undefined, `https://gitlab.com/group/sub/shop/-/commit/${SHA}`],
    ['https://gitlab.acme.dev/team/shop', undefined, `https://gitlab.acme.dev/team/shop/-/commit/${SHA}`],
    ['http://127.0.0.1:3000/acme/shop.git', 'gitea', `http://127.0.0.1:3000/acme/shop/commit/${SHA}`],
  ])('%s (%s)', (url, provider, expected) => {
    expect(commitUrl(url, SHA, provider)).toBe(expected);
  });

  test.each([
    ['/home/me/repo', undefined],
    ['git@github.com:acme/shop.git', undefined],
    ['https://git.example/acme/shop.git', undefined],
    ['https://github.com/acme', undefined],
    ['javascript:alert(1)//github.com/a/b', undefined],
  ])('no link for %s', (url, provider) => {
    expect(commitUrl(url, SHA, provider)).toBeUndefined();
  });

  test('a commit that is not a hex id gets no link', () => {
    expect(commitUrl('https://github.com/acme/shop.git', '../../settings')).toBeUndefined();
  });
});
