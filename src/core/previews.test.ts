/**
 * The preview naming contract: the labels branches are served under and the object names of their
 * Functions (golden values: a change here moves every preview URL), the branch patterns, and the
 * selection that refuses two branches meeting at one label.
 */
import { describe, expect, it } from 'vitest';
import { isDnsLabel } from './naming.js';
import {
  BRANCH_LABEL_MAX,
  branchLabel,
  branchMatches,
  isPreviewOf,
  LABEL_PREVIEW,
  LABEL_PREVIEW_OF,
  previewFunctionName,
  selectPreviews,
} from './previews.js';
import { parseFunctionSegment } from './revision-ref.js';

describe('branchLabel', () => {
  it.each([
    ['feature/login', 'feature-login'],
    ['Feature/Login', 'feature-login'],
    ['feature/a_b.c', 'feature-a-b-c'],
    ['fix//double--dash', 'fix-double-dash'],
    ['-lead/trail-', 'lead-trail'],
    ['release/1.2.3', 'release-1-2-3'],
    ['feature/a-really-long-branch-name-that-goes-on', 'feature-a-really-long-b-1c091e'],
    ['feature/a-really-long-branch-name-that-goes-on-and-on', 'feature-a-really-long-b-98184e'],
    // 12 hex digits would read as a commit: `-b` keeps `@label` and `@commit` apart.
    ['deadbeef0123', 'deadbeef0123-b'],
    ['DEADBEEF0123', 'deadbeef0123-b'],
    ['deadbeef012', 'deadbeef012'],
    ['___', 'b-bda251'],
  ])('%s → %s', (branch, label) => {
    expect(branchLabel(branch)).toBe(label);
  });

  it('is a DNS label within the bound, never read as a commit', () => {
    for (const branch of [
      'a',
      'x'.repeat(200),
      'f/'.repeat(50),
      '0123456789abcdef0123456789abcdef01234567',
      'ÄÖÜ/ß',
    ]) {
      const label = branchLabel(branch);
      expect(isDnsLabel(label), label).toBe(true);
      expect(label.length).toBeLessThanOrEqual(BRANCH_LABEL_MAX);
      expect(parseFunctionSegment(`f@${label}`)?.ref?.kind).toBe('label');
    }
  });
});

describe('previewFunctionName', () => {
  it.each([
    ['hello', 'feature-login', 'hello--feature-login'],
    [
      'a'.repeat(40),
      'feature-a-really-long-b-1c091e',
      `${'a'.repeat(24)}-19fd41--feature-a-really-long-b-1c091e`,
    ],
  ])('%s + %s → %s', (fn, label, name) => {
    expect(previewFunctionName(fn, label)).toBe(name);
    expect(isDnsLabel(name)).toBe(true);
  });

  it('keeps long names apart that share their first characters', () => {
    const label = branchLabel('feature/x');
    expect(previewFunctionName(`${'a'.repeat(60)}1`, label)).not.toBe(
      previewFunctionName(`${'a'.repeat(60)}2`, label),
    );
  });
});

describe('branchMatches', () => {
  it.each([
    ['feature/*', 'feature/login', true],
    ['feature/*', 'feature/a/b', false],
    ['feature/**', 'feature/a/b', true],
    ['feature/*', 'features/x', false],
    ['fix-?', 'fix-1', true],
    ['fix-?', 'fix-12', false],
    ['release.1', 'releasex1', false],
  ])('%s matches %s: %s', (pattern, branch, matches) => {
    expect(branchMatches(branch, [pattern])).toBe(matches);
  });
});

describe('selectPreviews', () => {
  it('previews every matching branch but the main one, and refuses both branches of a shared label', () => {
    const selection = selectPreviews(
      [
        { branch: 'main', commit: 'c0' },
        { branch: 'feature/b', commit: 'c1' },
        { branch: 'feature/A', commit: 'c2' },
        { branch: 'feature/a', commit: 'c3' },
        { branch: 'other', commit: 'c4' },
      ],
      ['feature/*', 'main'],
      'main',
    );
    expect(selection).toEqual({
      previews: [{ branch: 'feature/b', label: 'feature-b', commit: 'c1' }],
      collisions: [{ label: 'feature-a', branches: ['feature/A', 'feature/a'] }],
    });
  });
});

describe('isPreviewOf', () => {
  it('needs both the function and the label', () => {
    const fn = { metadata: { labels: { [LABEL_PREVIEW]: 'x', [LABEL_PREVIEW_OF]: 'f' } } };
    expect(isPreviewOf(fn, 'f', 'x')).toBe(true);
    expect(isPreviewOf(fn, 'g', 'x')).toBe(false);
    expect(isPreviewOf(fn, 'f', 'y')).toBe(false);
    expect(isPreviewOf({ metadata: {} }, 'f', 'x')).toBe(false);
  });
});
