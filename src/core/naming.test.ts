/**
 * Names sless derives: golden tenant namespaces (every tenant's objects live there, so the formula must
 * not move), names bounded to a 63-character DNS label with a hash so long names never collide, and
 * scoped environment suffixes that a "--" in a name could forge, so such names get none.
 */
import { describe, expect, it } from 'vitest';
import {
  boundedName,
  buildName,
  functionPath,
  isDnsLabel,
  scopedEnvSuffix,
  tenantNamespace,
} from './naming.js';

describe('tenant namespaces', () => {
  // A tenant's namespace is where all its objects live: if the formula moves, every tenant silently
  // loses its functions. Golden values, computed outside Node: printf '%s' SUB | sha256sum | cut -c1-16
  it.each([
    ['alice', 'sless-2bd806c97f0e00af'],
    ['bob', 'sless-81b637d8fcd2c6da'],
    ['auth0|5f7c8ec7c33c6c004bbafe82', 'sless-41aa487887e3c45c'],
    ['', 'sless-e3b0c44298fc1c14'],
  ])('%j owns %s', (sub, namespace) => {
    expect(tenantNamespace(sub)).toBe(namespace);
    expect(isDnsLabel(tenantNamespace(sub))).toBe(true);
  });
});

describe('bounded names', () => {
  it('keep short names as they are', () => {
    expect(boundedName(['build', 'hello'], 'abcdef012345')).toBe('build-hello-abcdef012345');
    expect(buildName('hello', 'abcdef0123456789abcdef0123456789abcdef01')).toBe('build-hello-abcdef012345');
    expect(functionPath('team-a', 'hello')).toBe('/fn/team-a/hello');
  });

  it('cut long names to 63 characters with a hash of the whole, so two long names never collide', () => {
    const long = 'a'.repeat(70);
    const a = buildName(long, '0123456789ab');
    const b = buildName(`${long}b`, '0123456789ab');
    // Golden: the head is cut to 63 - 12 - 6 - 2 = 43 characters, then the first 6 hex digits of
    // sha256 over the full name (computed with sha256sum), then the suffix.
    expect(a).toBe(`build-${'a'.repeat(37)}-18b40f-0123456789ab`);
    expect(a).toHaveLength(63);
    expect(isDnsLabel(a)).toBe(true);
    expect(b).not.toBe(a);
    expect(b).toHaveLength(63);
    // Exactly 63 stays whole; 64 is cut.
    expect(boundedName(['x'.repeat(61)], 'y')).toBe(`${'x'.repeat(61)}-y`);
    expect(boundedName(['x'.repeat(62)], 'y')).toHaveLength(63);
    // A head that ends in dashes after the cut loses them, so the label stays valid.
    const dashy = boundedName([`${'d'.repeat(50)}${'-'.repeat(20)}`], 'sfx');
    expect(isDnsLabel(dashy)).toBe(true);
    expect(dashy).toMatch(/^d{50}-[0-9a-f]{6}-sfx$/);
  });

  it('DNS labels: lowercase, digits and inner dashes, at most 63', () => {
    expect(isDnsLabel('a')).toBe(true);
    expect(isDnsLabel('a-1')).toBe(true);
    expect(isDnsLabel('a'.repeat(63))).toBe(true);
    expect(isDnsLabel('a'.repeat(64))).toBe(false);
    for (const bad of ['', '-a', 'a-', 'A', 'a_b', 'a.b']) expect(isDnsLabel(bad), bad).toBe(false);
  });
});

describe('scoped environment suffixes', () => {
  it('upper-case namespace and name joined by a double underscore; a "--" could forge one, so none', () => {
    expect(scopedEnvSuffix('team-a', 'my-repo')).toBe('TEAM_A__MY_REPO');
    expect(scopedEnvSuffix('sless-2bd806c97f0e00af', 'git.creds')).toBe('SLESS_2BD806C97F0E00AF__GIT_CREDS');
    expect(scopedEnvSuffix('a--b', 'c')).toBeUndefined();
    expect(scopedEnvSuffix('a', 'b--c')).toBeUndefined();
  });
});
