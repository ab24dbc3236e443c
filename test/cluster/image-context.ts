/**
 * A Dockerfile's build context as the e2e suite builds it on the real node, and a key for caching its
 * image: a hash of everything that decides the image's content. Pure file reading, no cluster.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The context paths the Dockerfile's COPY lines take (not `COPY --from` of another stage), sorted. */
export function copiedPaths(dockerfile: string): string[] {
  const paths = new Set<string>();
  for (const line of dockerfile.split('\n')) {
    const words = line.trim().split(/\s+/);
    if (words[0]?.toUpperCase() !== 'COPY' || words.some((w) => w.startsWith('--from='))) continue;
    const args = words.slice(1).filter((w) => !w.startsWith('--'));
    for (const source of args.slice(0, -1)) paths.add(source.replace(/^\.\//, '').replace(/\/$/, ''));
  }
  return [...paths].sort();
}

function filesUnder(root: string, path: string): string[] {
  if (!statSync(join(root, path)).isDirectory()) return [path];
  return readdirSync(join(root, path))
    .sort()
    .flatMap((entry) => filesUnder(root, join(path, entry)));
}

/**
 * sha256 over the Dockerfile, every file it copies from `root` (path, executable bit, bytes) and the
 * images the build starts from (`inputs`, e.g. the base image's digest and the builder's image).
 */
export function contextKey(
  root: string,
  dockerfilePath: string,
  inputs: readonly string[],
): { key: string; paths: string[] } {
  const dockerfile = readFileSync(join(root, dockerfilePath), 'utf8');
  const paths = copiedPaths(dockerfile);
  const hash = createHash('sha256');
  hash.update(`dockerfile\0${dockerfile}\0`);
  for (const input of inputs) hash.update(`input\0${input}\0`);
  for (const file of paths.flatMap((p) => filesUnder(root, p)).sort()) {
    const full = join(root, file);
    const executable = (statSync(full).mode & 0o111) !== 0;
    const content = createHash('sha256').update(readFileSync(full)).digest('hex');
    hash.update(`file\0${file}\0${executable ? 'x' : '-'}\0${content}\n`);
  }
  return { key: hash.digest('hex'), paths };
}
