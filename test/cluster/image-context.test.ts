/**
 * The cache key of an image the e2e suite builds on the real node: its context paths come from the COPY
 * lines of deploy/Dockerfile (not other stages), and the key changes with any copied byte, executable
 * bit or file, the Dockerfile or an input, and with nothing else.
 */
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { contextKey, copiedPaths } from './image-context.ts';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('the controller image cache key', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const context = (): string => {
    const root = mkdtempSync(join(tmpdir(), 'sless-image-context-'));
    dirs.push(root);
    mkdirSync(join(root, 'deploy'));
    writeFileSync(
      join(root, 'deploy', 'Dockerfile'),
      'FROM base AS build\nCOPY package.json ./\nCOPY src ./src\nRUN make\nFROM base\nCOPY --from=build /app/dist ./dist\nCOPY bin/ ./bin\n',
    );
    mkdirSync(join(root, 'src', 'a'), { recursive: true });
    mkdirSync(join(root, 'bin'));
    writeFileSync(join(root, 'package.json'), '{}');
    writeFileSync(join(root, 'src', 'a', 'x.ts'), 'export const x = 1;\n');
    writeFileSync(join(root, 'bin', 'run.js'), 'run()\n');
    writeFileSync(join(root, 'README.md'), 'not copied\n');
    return root;
  };
  const key = (root: string, inputs = ['sha256:base', 'kaniko:v1']) =>
    contextKey(root, 'deploy/Dockerfile', inputs).key;

  it("takes the context paths from deploy/Dockerfile's COPY lines, not from other stages", () => {
    expect(copiedPaths(readFileSync(join(REPO, 'deploy', 'Dockerfile'), 'utf8'))).toEqual([
      'bin',
      'crds',
      'package-lock.json',
      'package.json',
      'runtimes',
      'src',
      'tsconfig.build.json',
      'tsconfig.json',
      'ui',
    ]);
  });

  it('changes with any copied byte, executable bit, file, the Dockerfile or an input, and with nothing else', () => {
    const root = context();
    const before = key(root);
    expect(key(root)).toBe(before);
    writeFileSync(join(root, 'README.md'), 'still not copied\n');
    expect(key(root)).toBe(before);

    const changed = (edit: (r: string) => void, inputs?: string[]) => {
      const r = context();
      edit(r);
      return key(r, inputs);
    };
    const variants = [
      changed((r) => writeFileSync(join(r, 'src', 'a', 'x.ts'), 'export const x = 2;\n')),
      changed((r) => chmodSync(join(r, 'bin', 'run.js'), 0o755)),
      changed((r) => writeFileSync(join(r, 'src', 'a', 'y.ts'), '')),
      changed((r) => cpSync(join(r, 'src', 'a', 'x.ts'), join(r, 'src', 'b.ts'))),
      changed((r) => writeFileSync(join(r, 'package.json'), '{ }')),
      changed((r) => writeFileSync(join(r, 'deploy', 'Dockerfile'), 'FROM base\nCOPY src ./src\n')),
      changed(() => {}, ['sha256:other-base', 'kaniko:v1']),
      changed(() => {}, ['sha256:base', 'kaniko:v2']),
    ];
    expect(changed(() => {})).toBe(before);
    expect(new Set([before, ...variants]).size).toBe(variants.length + 1);
  });
});
