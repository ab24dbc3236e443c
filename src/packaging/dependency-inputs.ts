/**
 * Reads what a function's dependency key is computed from, straight from git objects as the build
 * context is: the tree's paths relative to the code directory (manifests left out) and the content
 * of the package manager's input files at its root.
 */
import { type DependencyKeyResult, dependencyInputFiles, dependencyKey } from '../core/dependency-key.js';
import type { BuildRequest } from '../core/interfaces.js';

export async function dependencyKeyOf(
  request: Pick<BuildRequest, 'fn' | 'snapshot' | 'codeDir' | 'excludedFiles'>,
): Promise<DependencyKeyResult> {
  const runtime = request.fn.spec.runtime;
  const wanted = new Set(dependencyInputFiles(runtime));
  const prefix = request.codeDir === '' || request.codeDir === '.' ? '' : `${request.codeDir}/`;
  const files = (await request.snapshot.listFiles(request.codeDir)).filter(
    (f) => !request.excludedFiles.has(f.path),
  );
  const inputs = new Map<string, Uint8Array>();
  for (const file of files) {
    const relative = file.path.slice(prefix.length);
    if (wanted.has(relative) && file.mode !== '120000')
      inputs.set(relative, await request.snapshot.readFile(file.path, file.oid));
  }
  // A link in place of an input file: the install would read whatever it points at.
  const linked = files.find((f) => f.mode === '120000' && wanted.has(f.path.slice(prefix.length)));
  if (linked) return { refused: `${linked.path} is a symlink` };
  return dependencyKey(
    runtime,
    files.map((f) => f.path.slice(prefix.length)),
    inputs,
  );
}
