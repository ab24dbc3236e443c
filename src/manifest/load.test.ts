/**
 * loadManifests over in-memory snapshots: sless documents found in any YAML file and other YAML ignored,
 * each kind of mistake reported with file, document and reason (and, by fast-check, never a throw), and
 * the parsed-manifest cache: a commit changing one manifest of many reads and validates only what changed,
 * the result equals a fresh load, and cached documents are frozen.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { formatIssue } from '../core/errors.js';
import type { SourceSnapshot, TreeFile } from '../core/interfaces.js';
import { isWithin } from '../core/paths.js';
import { loadManifests, ParsedManifestCache } from './load.js';
import { validateResource } from './validate.js';

/** A snapshot over an in-memory tree: the loader only needs listFiles and readFile. */
function snapshotOf(files: Record<string, string>): SourceSnapshot {
  const entries: TreeFile[] = Object.keys(files)
    .sort()
    .map((path) => ({ path, mode: '100644', oid: path }));
  return {
    commit: 'c'.repeat(40),
    listFiles: async (dir) => entries.filter((e) => isWithin(dir, e.path)),
    readFile: async (path) => new TextEncoder().encode(files[path] ?? ''),
  };
}

const fnDoc = (name: string, spec: Record<string, unknown> = {}) =>
  stringify({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name },
    spec: { runtime: 'nodejs20', entrypoint: 'h.handle', ...spec },
  });

async function issuesOf(files: Record<string, string>): Promise<string[]> {
  const result = await loadManifests(snapshotOf(files), { root: '.', namespace: 'default' });
  return result.issues.map(formatIssue);
}

describe('loadManifests', () => {
  it('finds sless documents in any YAML file, ignores other YAML, and records manifest files', async () => {
    const result = await loadManifests(
      snapshotOf({
        'a/function.yaml': fnDoc('a'),
        'b/fn.yml': `${fnDoc('b')}---\n${stringify({ apiVersion: 'sless.dev/v1alpha1', kind: 'Trigger', metadata: { name: 't' }, spec: { type: 'http', function: 'b' } })}`,
        'ci/workflow.yaml': 'on: push\njobs: {}\n',
        'k8s/deploy.yaml': 'apiVersion: apps/v1\nkind: Deployment\n',
        'node_modules/x/sless.yaml': fnDoc('ignored'),
      }),
      { root: '.', namespace: 'default' },
    );
    expect(result.issues).toEqual([]);
    expect(result.documents.map((d) => `${d.kind}/${d.doc.metadata.name}@${d.file}#${d.index}`)).toEqual([
      'Function/a@a/function.yaml#0',
      'Function/b@b/fn.yml#0',
      'Trigger/t@b/fn.yml#1',
    ]);
    expect([...result.manifestFiles].sort()).toEqual(['a/function.yaml', 'b/fn.yml']);
    expect(result.documents[0]?.codeDir).toBe('a');
  });

  it.each([
    [
      { 'fns/a/function.yaml': fnDoc('a', { source: { path: '../../..' } }) },
      'fns/a/function.yaml#0 spec.source.path: must stay inside the repository',
    ],
    [
      { 'a.yaml': fnDoc('a', { source: { path: '/etc' } }) },
      'a.yaml#0 spec.source.path: must stay inside the repository',
    ],
    [
      { 'a.yaml': fnDoc('a'), 'b.yaml': fnDoc('a') },
      'b.yaml#0 metadata.name: duplicate Function "a" (first defined in a.yaml#0)',
    ],
    [
      {
        'a.yaml': stringify({
          apiVersion: 'sless.dev/v1alpha1',
          kind: 'FunctionJob',
          metadata: { name: 'j' },
          spec: { function: 'ghost' },
        }),
      },
      'a.yaml#0 spec.function: function "ghost" is not defined in this repository',
    ],
    [
      { 'a.yaml': 'apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: { name: a\n' },
      'a.yaml#0: invalid YAML at line',
    ],
    [
      { 'a.yaml': 'apiVersion: sless.dev/v2\nkind: Function\n' },
      'a.yaml#0 apiVersion: must be sless.dev/v1alpha1',
    ],
    [
      { 'a.yaml': 'apiVersion: sless.dev/v1alpha1\nkind: Gadget\n' },
      'a.yaml#0 kind: must be one of: Function, Trigger, FunctionJob',
    ],
    [
      { 'a.yaml': fnDoc('a').replace('name: a', 'name: a\n  namespace: other') },
      'a.yaml#0 metadata.namespace: must be omitted or "default" (the source\'s namespace)',
    ],
  ])('reports %j clearly', async (files, expected) => {
    const issues = await issuesOf(files);
    expect(
      issues.some((issue) => issue.startsWith(expected)),
      issues.join('\n'),
    ).toBe(true);
  });

  it('takes a file of 100 YAML aliases and refuses one of 101, by name, without expanding it', async () => {
    // A Function whose env values alias one word: cheap to expand, so only the limit refuses the larger.
    const aliased = (count: number) =>
      [
        'apiVersion: sless.dev/v1alpha1',
        'kind: Function',
        'metadata: {name: aliased}',
        'spec:',
        '  runtime: nodejs20',
        '  entrypoint: h.handle',
        '  env:',
        '    WORD: &word one',
        ...Array.from({ length: count }, (_, i) => `    ALIAS_${i}: *word`),
        '',
      ].join('\n');
    expect(await issuesOf({ 'ok.yaml': aliased(100) })).toEqual([]);
    expect(await issuesOf({ 'many.yaml': aliased(101) })).toEqual([
      expect.stringMatching(/^many\.yaml#0: invalid YAML: .+ \(at most 100 aliases\)$/),
    ]);
  });

  it('names only the refused function, not the triggers and jobs that point at it', async () => {
    const job = (name: string, fn: string) =>
      stringify({
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'FunctionJob',
        metadata: { name },
        spec: { function: fn },
      });
    expect(
      await issuesOf({
        'a/function.yaml': fnDoc('a', { memoryMb: 99999 }),
        'b/function.yaml': fnDoc('b', { source: { path: '../..' } }),
        'jobs.yaml': `${job('ja', 'a')}---\n${job('jb', 'b')}---\n${job('jg', 'ghost')}`,
      }),
    ).toEqual([
      'a/function.yaml#0 spec.memoryMb: must be <= 4096',
      'b/function.yaml#0 spec.source.path: must stay inside the repository',
      'jobs.yaml#2 spec.function: function "ghost" is not defined in this repository',
    ]);
  });

  it('never throws, and every issue names a file, a document and a reason, whatever the YAML', async () => {
    const value = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.double(),
      fc.array(fc.string(), { maxLength: 3 }),
    );
    const doc = fc.record(
      {
        apiVersion: fc.constantFrom('sless.dev/v1alpha1', 'sless.dev/v1', 'v1'),
        kind: fc.constantFrom('Function', 'Trigger', 'FunctionJob', 'GitSource', 'Other'),
        metadata: fc.oneof(fc.record({ name: fc.string() }), value),
        spec: fc.oneof(
          fc.dictionary(
            fc.constantFrom(
              'runtime',
              'entrypoint',
              'memoryMb',
              'function',
              'type',
              'schedule',
              'source',
              'env',
              'runId',
            ),
            value,
          ),
          value,
        ),
      },
      { requiredKeys: ['apiVersion'] },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(doc, { minLength: 1, maxLength: 4 }), fc.string(), async (docs, junk) => {
        const text = docs.map((d) => stringify(d)).join('---\n') + (junk.includes('sless.dev') ? junk : '');
        const result = await loadManifests(snapshotOf({ 'f.yaml': text }), {
          root: '.',
          namespace: 'default',
        });
        for (const issue of result.issues) {
          expect(issue.file).toBe('f.yaml');
          expect(issue.index).toBeGreaterThanOrEqual(0);
          expect(issue.reason.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('the parsed-manifest cache', () => {
  it('gives the same result as parsing afresh, and validation never changes what is cached', async () => {
    const files = {
      'a/function.yaml': fnDoc('a'),
      'b/function.yaml': fnDoc('b', { memoryMb: 0 }),
      'c/broken.yaml': 'apiVersion: sless.dev/v1alpha1\nkind: [',
    };
    const cache = new ParsedManifestCache();
    const fresh = await loadManifests(snapshotOf(files), { root: '.', namespace: 'default' });
    const first = await loadManifests(snapshotOf(files), { root: '.', namespace: 'default', cache });
    let reads = 0;
    let sizeReads = 0;
    const counting = snapshotOf(files);
    const second = await loadManifests(
      {
        ...counting,
        readFile: (path) => {
          reads++;
          return counting.readFile(path);
        },
        fileSize: async (file) => {
          sizeReads++;
          return (files as Record<string, string>)[file.path]?.length;
        },
      },
      { root: '.', namespace: 'default', cache },
    );
    // A cached blob is neither read nor sized again: a commit of a thousand manifests costs nothing
    // for those it did not change.
    expect(reads).toBe(0);
    expect(sizeReads).toBe(0);
    expect(first).toEqual(fresh);
    expect(second).toEqual(fresh);
    // Defaults are filled in for every load, cached parse or not.
    expect(second.documents[0]?.doc.spec.memoryMb).toBe(128);
  });
});

describe('a commit that changes one manifest of many', () => {
  /** Blob ids are content hashes, as in git: a renamed file keeps its id. */
  function contentSnapshot(files: Record<string, string>, counts: { reads: number }): SourceSnapshot {
    const entries: TreeFile[] = Object.keys(files)
      .sort()
      .map((path) => ({
        path,
        mode: '100644',
        oid: createHash('sha1')
          .update(files[path] ?? '')
          .digest('hex'),
      }));
    return {
      commit: 'c'.repeat(40),
      listFiles: async (dir) => entries.filter((e) => isWithin(dir, e.path)),
      readFile: async (path) => {
        counts.reads++;
        return new TextEncoder().encode(files[path] ?? '');
      },
    };
  }
  const repo = (count: number) => {
    const files: Record<string, string> = {};
    for (let i = 0; i < count; i++) {
      files[`functions/fn-${i}/function.yaml`] = fnDoc(`fn-${i}`);
      files[`functions/fn-${i}/handler.js`] = `exports.handle = () => ${i};\n`;
    }
    return files;
  };

  it('reads and validates only the changed, added and renamed files; the result equals a fresh load', async () => {
    const cache = new ParsedManifestCache();
    const validated: string[] = [];
    const validate: typeof validateResource = (kind, doc, where) => {
      validated.push(where.file);
      return validateResource(kind, doc, where);
    };
    const load = async (files: Record<string, string>, counts: { reads: number }) =>
      loadManifests(contentSnapshot(files, counts), { root: '.', namespace: 'default', cache, validate });
    const before = repo(200);
    const first = { reads: 0 };
    await load(before, first);
    expect(first.reads).toBe(200);
    expect(validated).toHaveLength(200);

    const after = { ...before };
    after['functions/fn-7/function.yaml'] = fnDoc('fn-7', { memoryMb: 256 });
    after['functions/renamed/function.yaml'] = after['functions/fn-3/function.yaml'] as string;
    delete after['functions/fn-3/function.yaml'];
    delete after['functions/fn-9/function.yaml'];
    after['functions/new/function.yaml'] = fnDoc('new');
    validated.length = 0;
    const second = { reads: 0 };
    const result = await load(after, second);
    // fn-7 and new are read; the renamed blob's parse is cached, but its path (so its code directory)
    // is new, so it is validated again.
    expect(second.reads).toBe(2);
    expect(validated.sort()).toEqual([
      'functions/fn-7/function.yaml',
      'functions/new/function.yaml',
      'functions/renamed/function.yaml',
    ]);
    const fresh = await loadManifests(contentSnapshot(after, { reads: 0 }), {
      root: '.',
      namespace: 'default',
    });
    expect(result).toEqual(fresh);
    expect(result.documents.find((d) => d.doc.metadata.name === 'fn-3')?.codeDir).toBe('functions/renamed');
    expect(result.documents.some((d) => d.doc.metadata.name === 'fn-9')).toBe(false);
    expect(result.documents.find((d) => d.doc.metadata.name === 'fn-7')?.doc.spec.memoryMb).toBe(256);
  });

  it('reports a cached invalid manifest again, with file, field and reason, and a namespace change revalidates', async () => {
    const cache = new ParsedManifestCache();
    const files: Record<string, string> = {
      ...repo(3),
      'functions/fn-1/function.yaml': fnDoc('fn-1', { memoryMb: 0 }),
    };
    const issues = async (namespace: string) =>
      (await loadManifests(contentSnapshot(files, { reads: 0 }), { root: '.', namespace, cache })).issues.map(
        formatIssue,
      );
    const first = await issues('default');
    expect(first).toHaveLength(1);
    expect(first[0]).toMatch(/^functions\/fn-1\/function\.yaml#0 spec\.memoryMb: /);
    expect(await issues('default')).toEqual(first);
    files['functions/fn-2/function.yaml'] = fnDoc('fn-2').replace(
      'name: fn-2',
      'name: fn-2\n  namespace: other',
    );
    expect(await issues('other')).toEqual([
      expect.stringMatching(/^functions\/fn-1\/function\.yaml#0 spec\.memoryMb: /),
    ]);
    expect(await issues('default')).toEqual([
      first[0],
      'functions/fn-2/function.yaml#0 metadata.namespace: must be omitted or "default" (the source\'s namespace)',
    ]);
  });

  it('hands out frozen documents, so no caller can change what later loads return', async () => {
    const cache = new ParsedManifestCache();
    const result = await loadManifests(contentSnapshot(repo(1), { reads: 0 }), {
      root: '.',
      namespace: 'default',
      cache,
    });
    const spec = result.documents[0]?.doc.spec as Record<string, unknown>;
    expect(() => {
      spec.memoryMb = 1;
    }).toThrow(TypeError);
  });
});
