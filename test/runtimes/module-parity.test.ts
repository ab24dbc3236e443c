/**
 * Platform parity for code: a handler loads the same way from a local build directory as from the
 * function's image. The local side is the real local platform (git repository, LocalBuilder, runtime
 * processes, proxy) with its state directory under a `package.json` saying `"type": "module"`, as when
 * sless runs from its own checkout. The image side lays the code out as the Dockerfile does (code in
 * `sless/code` with no `package.json` above it) and runs the Dockerfile's own CMD; no container
 * runtime exists on this machine, so the image's filesystem layout and command stand in for it.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { functionManifest, TestRepo, tempDir } from '../helpers/git.js';
import { bodyOf, eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';
import { RUNTIMES_DIR, type Running, startRuntime } from './harness.ts';

const NODE_REPORT = `{ format: typeof require === 'function' && typeof module === 'object' ? 'commonjs' : 'module', helper: helper() }`;

interface ParityCase {
  name: string;
  runtime: 'nodejs20' | 'python3.11';
  entrypoint?: string;
  files: Record<string, string>;
  /** Golden answer to GET /fn/default/{name}, the same on both platforms. */
  expected: unknown;
}

const CASES: ParityCase[] = [
  {
    name: 'cjs-no-package-json',
    runtime: 'nodejs20',
    files: {
      'handler.js': `const { helper } = require('./helper');\nexports.handle = () => (${NODE_REPORT});\n`,
      'helper.js': `exports.helper = () => 'cjs helper';\n`,
    },
    expected: { format: 'commonjs', helper: 'cjs helper' },
  },
  {
    name: 'esm-no-package-json',
    runtime: 'nodejs20',
    files: {
      'handler.js': `import { helper } from './helper.js';\nexport function handle() { return ${NODE_REPORT}; }\n`,
      'helper.js': `export const helper = () => 'esm helper';\n`,
    },
    expected: { format: 'module', helper: 'esm helper' },
  },
  {
    name: 'cjs-typeless-package-json',
    runtime: 'nodejs20',
    files: {
      'package.json': '{"name":"cjs-typeless","private":true}\n',
      'handler.js': `const { helper } = require('./helper');\nmodule.exports = { handle: () => (${NODE_REPORT}) };\n`,
      'helper.js': `exports.helper = () => 'cjs helper';\n`,
    },
    expected: { format: 'commonjs', helper: 'cjs helper' },
  },
  {
    name: 'esm-type-module',
    runtime: 'nodejs20',
    files: {
      'package.json': '{"name":"esm-module","private":true,"type":"module"}\n',
      'handler.js': `import { helper } from './helper.js';\nexport const handle = () => (${NODE_REPORT});\n`,
      'helper.js': `export const helper = () => 'esm helper';\n`,
    },
    expected: { format: 'module', helper: 'esm helper' },
  },
  {
    name: 'cjs-file-in-esm-package',
    runtime: 'nodejs20',
    files: {
      'package.json': '{"name":"mixed","private":true,"type":"module"}\n',
      'handler.cjs': `const helper = () => 'cjs file';\nexports.handle = () => (${NODE_REPORT});\n`,
    },
    expected: { format: 'commonjs', helper: 'cjs file' },
  },
  {
    name: 'commonjs-package-json',
    runtime: 'nodejs20',
    files: {
      'package.json': '{"name":"cjs-explicit","private":true,"type":"commonjs"}\n',
      'handler.js': `const helper = () => 'explicit';\nexports.handle = () => (${NODE_REPORT});\n`,
    },
    expected: { format: 'commonjs', helper: 'explicit' },
  },
  {
    name: 'python-import-path',
    runtime: 'python3.11',
    files: {
      'handler.py': [
        'import importlib.util',
        'from lib.util import helper',
        'import sibling',
        '',
        'def handle(event, context):',
        '    return {',
        '        "helper": helper(),',
        '        "sibling": sibling.NAME,',
        // Installed on this host's Python and in the image's, but never the function's to import.
        '        "pip": importlib.util.find_spec("pip") is not None,',
        '    }',
        '',
      ].join('\n'),
      'lib/__init__.py': '',
      'lib/util.py': 'def helper():\n    return "package helper"\n',
      'sibling.py': 'NAME = "sibling module"\n',
    },
    expected: { helper: 'package helper', sibling: 'sibling module', pip: false },
  },
];

/** The Dockerfile's CMD, with the image's paths mapped onto this checkout. */
async function imageCommand(
  runtime: 'nodejs20' | 'python3.11',
): Promise<{ command: string; args: string[] }> {
  const dockerfile = await readFile(join(RUNTIMES_DIR, runtime, 'Dockerfile'), 'utf8');
  const line = dockerfile.split('\n').find((l) => l.startsWith('CMD '));
  if (!line) throw new Error(`${runtime}/Dockerfile has no CMD`);
  const [command, ...args] = JSON.parse(line.slice(4)) as string[];
  const mapped = args.map((a) => (a.startsWith('/sless/') ? join(RUNTIMES_DIR, runtime, a.slice(7)) : a));
  if (command === 'node') return { command: process.execPath, args: mapped };
  if (command === 'python') return { command: 'python3', args: mapped };
  throw new Error(`unexpected CMD ${line}`);
}

describe('handlers load the same locally as in their image', () => {
  let root: string;
  let imageRoot: string;
  let repo: TestRepo;
  let system: TestSystem;

  beforeAll(async () => {
    root = await tempDir('parity');
    imageRoot = await tempDir('parity-image');
    // The state directory sits under an ES-module package, like `.sless` in sless's own checkout.
    await writeFile(join(root, 'package.json'), '{"name":"host-project","type":"module"}\n');
    const files: Record<string, string> = {};
    for (const c of CASES) {
      files[`${c.name}/function.yaml`] = functionManifest(c.name, {
        runtime: c.runtime,
        entrypoint: c.entrypoint ?? 'handler.handle',
      });
      for (const [path, content] of Object.entries(c.files)) files[`${c.name}/${path}`] = content;
    }
    repo = await TestRepo.create(files);
    system = await startTestSystem({ url: repo.dir, stateDir: join(root, 'state') });
    await eventually(
      async () => {
        for (const c of CASES) {
          const status = await system.functionStatus(c.name);
          if (status?.phase === 'Failed') throw new Error(`${c.name}: ${JSON.stringify(status)}`);
          if (status?.phase !== 'Ready') return false;
        }
        return true;
      },
      90_000,
      'every parity function ready',
    );
  }, 120_000);

  afterAll(async () => {
    await system?.close();
    await repo?.remove();
    if (root) await rm(root, { recursive: true, force: true });
    if (imageRoot) await rm(imageRoot, { recursive: true, force: true });
  });

  it.each(CASES)('$name: local platform', async (c) => {
    const res = await bodyOf(system, `/fn/default/${c.name}`);
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toEqual(c.expected);
  });

  it.each(CASES)('$name: image layout and CMD', async (c) => {
    const image = join(imageRoot, c.name);
    const code = join(image, 'sless', 'code');
    for (const [path, content] of Object.entries(c.files)) {
      await mkdir(dirname(join(code, path)), { recursive: true });
      await writeFile(join(code, path), content);
    }
    // Nothing between the code and `/` may decide the module type, as in the image.
    await expect(readFile(join(image, 'package.json'))).rejects.toThrow();
    await expect(readFile(join(image, 'sless', 'package.json'))).rejects.toThrow();
    const { command, args } = await imageCommand(c.runtime);
    let server: Running | undefined;
    try {
      server = await startRuntime(
        { command, args, env: { SLESS_CODE_DIR: code, SLESS_ENTRYPOINT: c.entrypoint ?? 'handler.handle' } },
        c.runtime === 'python3.11'
          ? { PYTHONPATH: join(image, 'sless', 'deps'), PYTHONDONTWRITEBYTECODE: '1' }
          : {},
      );
      const res = await fetch(`${server.url}/`);
      expect(JSON.parse(await res.text())).toEqual(c.expected);
    } finally {
      await server?.stop();
    }
  });

  it('the local build directory ends the module lookup, so the host project never decides', async () => {
    const status = await system.functionStatus('cjs-no-package-json');
    const image = status?.lastBuild?.image;
    expect(image).toBeDefined();
    expect(await readFile(join(String(image), 'package.json'), 'utf8')).toBe('{}\n');
  });
});
