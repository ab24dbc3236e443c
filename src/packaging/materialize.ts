/**
 * Turns a function's directory at one commit into files on disk for a build, read straight from git
 * objects rather than a checkout, refusing symlinks that would let the build read outside the
 * function's directory.
 */
import { chmod, mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { BuildError } from '../core/errors.js';
import type { SourceSnapshot } from '../core/interfaces.js';
import { isWithin, resolveLinkTarget } from '../core/paths.js';

/**
 * Writes a function's files at one commit into `target`, straight from git objects. Symlinks are
 * kept only when they stay inside the function's directory: a link out of it could read anything on
 * the build host.
 */
export async function materializeFunction(options: {
  snapshot: SourceSnapshot;
  codeDir: string;
  excludedFiles: ReadonlySet<string>;
  target: string;
}): Promise<number> {
  const { snapshot, codeDir, excludedFiles, target } = options;
  const files = (await snapshot.listFiles(codeDir)).filter((f) => !excludedFiles.has(f.path));
  const prefixLength = codeDir === '' ? 0 : codeDir.length + 1;
  await mkdir(target, { recursive: true });
  const links: { relative: string; linkTarget: string }[] = [];
  const queue = [...files];
  const workers = Array.from({ length: 8 }, async () => {
    for (let file = queue.shift(); file; file = queue.shift()) {
      const relative = file.path.slice(prefixLength);
      const content = await snapshot.readFile(file.path, file.oid);
      if (file.mode === '120000') {
        const linkTarget = Buffer.from(content).toString('utf8');
        const resolved = resolveLinkTarget(file.path, linkTarget);
        if (resolved === undefined || !isWithin(codeDir, resolved)) {
          throw new BuildError(
            `${file.path}: symlink to "${linkTarget}" points outside the function's directory`,
            '',
          );
        }
        links.push({ relative, linkTarget: posix.relative(posix.dirname(file.path), resolved) || '.' });
        continue;
      }
      const destination = join(target, relative);
      await mkdir(dirname(destination), { recursive: true });
      await writeFile(destination, content);
      if (file.mode === '100755') await chmod(destination, 0o755);
    }
  });
  await Promise.all(workers);
  for (const link of links) {
    const destination = join(target, link.relative);
    await mkdir(dirname(destination), { recursive: true });
    await symlink(link.linkTarget, destination);
  }
  return files.length;
}
