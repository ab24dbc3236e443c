/**
 * `ws` copied into a function's directory as `node_modules/ws`, so a function that accepts
 * WebSockets needs no package.json and its build no registry.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const wsDir = dirname(createRequire(import.meta.url).resolve('ws/package.json'));

/** The files of `ws`, keyed by their path under the function directory `fn`. */
export function vendoredWs(fn: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const file of ['package.json', 'index.js', 'wrapper.mjs'])
    files[`${fn}/node_modules/ws/${file}`] = readFileSync(join(wsDir, file), 'utf8');
  for (const file of readdirSync(join(wsDir, 'lib')))
    files[`${fn}/node_modules/ws/lib/${file}`] = readFileSync(join(wsDir, 'lib', file), 'utf8');
  return files;
}
