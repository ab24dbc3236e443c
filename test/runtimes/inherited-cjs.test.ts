/**
 * The Node runtime calls only a function the module itself defines. An ES module's namespace has no
 * prototype, so "handler.constructor" finds nothing there by itself; a CommonJS module's exports
 * object does inherit Object's, so only the own-property check refuses it. Each name runs the real
 * runtime server on a CommonJS handler and must exit 3 at load, naming the entrypoint.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { interpretedLaunch } from './harness.js';

let codeDir: string;

beforeAll(async () => {
  codeDir = await mkdtemp(join(tmpdir(), 'sless-cjs-handler-'));
  await writeFile(join(codeDir, 'handler.js'), 'exports.handle = async () => "own";\n');
  await writeFile(join(codeDir, 'package.json'), JSON.stringify({ type: 'commonjs' }));
});

afterAll(async () => {
  await rm(codeDir, { recursive: true, force: true });
});

function load(entrypoint: string): Promise<{ code: number | null; stderr: string }> {
  const launch = interpretedLaunch('nodejs20', codeDir, entrypoint);
  return new Promise((resolve) => {
    const child = spawn(launch.command, launch.args, {
      env: { PATH: process.env.PATH ?? '', ...launch.env, PORT: '0', SLESS_HOST: '127.0.0.1' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

test.each(['constructor', 'toString', 'hasOwnProperty', '__proto__'])(
  'a CommonJS handler\'s inherited "%s" is not a handler: exit 3',
  async (name) => {
    const result = await load(`handler.${name}`);
    expect(result.code, result.stderr).toBe(3);
    expect(result.stderr.trimEnd().split('\n').at(-1)).toContain(
      `sless-runtime: cannot load entrypoint "handler.${name}": module "handler" has no function "${name}"`,
    );
  },
);
