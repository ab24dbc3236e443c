/**
 * The dependency key that lets a build reuse installed dependencies: equal for trees whose dependency
 * inputs are equal, changed by each input and the runtime, and refused (no key, so no reuse) for trees
 * whose dependencies may follow their code: compiled runtimes, missing locks, install scripts, local paths.
 */
import { describe, expect, it } from 'vitest';
import { dependencyInputFiles, dependencyKey } from './dependency-key.js';

const bytes = (text: string) => new TextEncoder().encode(text);
const inputs = (files: Record<string, string>) =>
  new Map(Object.entries(files).map(([name, text]) => [name, bytes(text)]));
const keyOf = (result: ReturnType<typeof dependencyKey>) => ('key' in result ? result.key : result.refused);

const lock = '{"lockfileVersion":3,"packages":{}}';

describe('dependency key', () => {
  it('is the same for trees whose code differs but whose dependency inputs do not', () => {
    const a = dependencyKey(
      'nodejs20',
      ['handler.js', 'package.json', 'package-lock.json'],
      inputs({
        'package.json': '{"dependencies":{"left-pad":"1.3.0"}}',
        'package-lock.json': lock,
      }),
    );
    const b = dependencyKey(
      'nodejs20',
      ['handler.js', 'lib/x.js', 'package.json', 'package-lock.json'],
      inputs({
        'package.json': '{"dependencies":{"left-pad":"1.3.0"}}',
        'package-lock.json': lock,
      }),
    );
    expect('key' in a && a.key).toMatch(/^[0-9a-f]{32}$/);
    expect(keyOf(a)).toBe(keyOf(b));
  });

  it('changes with each dependency input, the runtime, and between no package.json and an empty one', () => {
    const base = { 'package.json': '{"dependencies":{"left-pad":"1.3.0"}}', 'package-lock.json': lock };
    const keys = [
      keyOf(dependencyKey('nodejs20', [], inputs(base))),
      keyOf(
        dependencyKey(
          'nodejs20',
          [],
          inputs({ ...base, 'package.json': '{"dependencies":{"left-pad":"1.3.1"}}' }),
        ),
      ),
      keyOf(dependencyKey('nodejs20', [], inputs({ ...base, 'package-lock.json': `${lock}\n` }))),
      keyOf(dependencyKey('nodejs20', [], inputs({ ...base, '.npmrc': 'registry=https://example.test/' }))),
      keyOf(dependencyKey('nodejs20', [], inputs({}))),
      keyOf(dependencyKey('nodejs20', [], inputs({ 'package.json': '{}', 'package-lock.json': lock }))),
      keyOf(dependencyKey('python3.11', [], inputs({}))),
      keyOf(dependencyKey('python3.11', [], inputs({ 'requirements.txt': 'six==1.16.0\n' }))),
    ];
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('ignores files the runtime does not install from', () => {
    expect(keyOf(dependencyKey('python3.11', [], inputs({ 'package.json': '{}' })))).toBe(
      keyOf(dependencyKey('python3.11', [], inputs({}))),
    );
    expect(dependencyInputFiles('go1.21')).toEqual([]);
  });

  it.each([
    ['go1.21', [], {}, /compiled/],
    ['nodejs20', [], { 'package.json': '{}' }, /no package-lock\.json/],
    ['nodejs20', ['binding.gyp'], { 'package.json': '{}', 'package-lock.json': lock }, /binding\.gyp/],
    [
      'nodejs20',
      ['node_modules/x/index.js'],
      { 'package.json': '{}', 'package-lock.json': lock },
      /node_modules/,
    ],
    [
      'nodejs20',
      [],
      { 'package.json': '{"scripts":{"postinstall":"node gen.js"}}', 'package-lock.json': lock },
      /scripts\.postinstall/,
    ],
    [
      'nodejs20',
      [],
      { 'package.json': '{"dependencies":{"lib":"file:./lib"}}', 'package-lock.json': lock },
      /local path/,
    ],
    ['nodejs20', [], { 'package.json': '{"workspaces":["a"]}', 'package-lock.json': lock }, /workspaces/],
    ['nodejs20', [], { 'package.json': 'not json', 'package-lock.json': lock }, /not JSON/],
    ['python3.11', [], { 'requirements.txt': 'six\n-r other.txt\n' }, /line 2 names a file/],
    ['python3.11', [], { 'requirements.txt': '-e .\n' }, /line 1/],
    ['python3.11', [], { 'requirements.txt': './pkg\n' }, /line 1/],
    ['python3.11', [], { 'requirements.txt': 'pkg @ file:///src/pkg\n' }, /local file/],
  ] as const)(
    '%s %j %j has no key: its dependencies may follow the code',
    (runtime, paths, files, reason) => {
      const result = dependencyKey(runtime, paths, inputs(files));
      expect('refused' in result && result.refused).toMatch(reason);
    },
  );

  it('lets comments and plain requirements through', () => {
    const result = dependencyKey(
      'python3.11',
      [],
      inputs({ 'requirements.txt': '# -r not.txt\nsix==1.16.0  # pinned\n' }),
    );
    expect(result).toHaveProperty('key');
  });
});
