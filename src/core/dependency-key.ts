/**
 * The dependency key of an interpreted function: a content hash of everything its dependency install
 * reads (the runtime and its version, the image layout, the package manager's input files), and the
 * reasons a tree's dependencies may depend on more than that. Two trees with the same key install the
 * same dependencies, so an image built for one can take the other's code as its last layer alone.
 * Pure: the caller reads the files.
 */
import { hashObject } from './hash.js';
import { RUNTIME_INFO } from './runtimes.js';
import type { RuntimeName } from './schemas.js';

/**
 * Bumped whenever the order or content of the image's layers changes (the kaniko Dockerfile): an
 * image of another layout may not keep its code in its last layer, so its key must never match.
 */
export const IMAGE_LAYOUT_VERSION = 2;

/** The files at the code directory's root that each package manager's install reads. */
const INPUT_FILES: Readonly<Record<'node' | 'python', readonly string[]>> = {
  node: ['package.json', 'package-lock.json', 'npm-shrinkwrap.json', '.npmrc'],
  python: ['requirements.txt'],
};

/** npm runs these scripts of the function's own package on install, with the code beside them. */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare', 'preprepare', 'postprepare'];

const DEPENDENCY_FIELDS = ['dependencies', 'optionalDependencies', 'peerDependencies'];

export type DependencyKeyResult = { key: string } | { refused: string };

function family(runtime: RuntimeName): 'node' | 'python' | undefined {
  if (RUNTIME_INFO[runtime].compiled) return undefined;
  return runtime.startsWith('nodejs') ? 'node' : 'python';
}

/** The root files whose content the key covers, for a runtime; none for a compiled runtime. */
export function dependencyInputFiles(runtime: RuntimeName): readonly string[] {
  const kind = family(runtime);
  return kind ? INPUT_FILES[kind] : [];
}

/**
 * The dependency key of a code tree, or why it has none.
 * @param paths every file of the tree, relative to the code directory
 * @param inputs the content of those of `dependencyInputFiles(runtime)` that exist
 */
export function dependencyKey(
  runtime: RuntimeName,
  paths: readonly string[],
  inputs: ReadonlyMap<string, Uint8Array>,
): DependencyKeyResult {
  const kind = family(runtime);
  if (!kind) return { refused: `${runtime} is compiled: its code is built into the binary` };
  const refused = kind === 'node' ? nodeRefusal(paths, inputs) : pythonRefusal(inputs);
  if (refused) return { refused };
  const files = INPUT_FILES[kind]
    .filter((name) => inputs.has(name))
    .map((name) => [name, Buffer.from(inputs.get(name) ?? new Uint8Array()).toString('base64')]);
  const info = RUNTIME_INFO[runtime];
  return {
    key: hashObject({
      layout: IMAGE_LAYOUT_VERSION,
      runtime: info.name,
      version: info.version,
      baseImage: info.baseImage,
      files,
    }).slice(0, 32),
  };
}

function nodeRefusal(paths: readonly string[], inputs: ReadonlyMap<string, Uint8Array>): string | undefined {
  const manifest = inputs.get('package.json');
  if (!manifest) return undefined;
  // Without a lock file, npm resolves versions anew on every install: the same package.json may
  // install other code tomorrow.
  if (!inputs.has('package-lock.json') && !inputs.has('npm-shrinkwrap.json'))
    return 'package.json has no package-lock.json: each install may resolve other versions';
  if (paths.includes('binding.gyp')) return 'binding.gyp makes npm compile the package itself on install';
  // npm ci replaces a committed node_modules with what it installs.
  if (paths.some((p) => p === 'node_modules' || p.startsWith('node_modules/')))
    return 'node_modules is committed beside package.json: the install replaces it';
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(manifest).toString('utf8'));
  } catch {
    return 'package.json is not JSON';
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return 'package.json is not an object';
  const pkg = parsed as Record<string, unknown>;
  const scripts = pkg.scripts;
  if (scripts && typeof scripts === 'object') {
    const ran = INSTALL_SCRIPTS.filter((name) => name in scripts);
    if (ran.length > 0) return `package.json scripts.${ran[0]} runs on install, beside the code`;
  }
  if (pkg.workspaces !== undefined) return 'package.json has workspaces: their code is installed too';
  for (const field of DEPENDENCY_FIELDS) {
    const deps = pkg[field];
    if (!deps || typeof deps !== 'object') continue;
    for (const [name, spec] of Object.entries(deps as Record<string, unknown>))
      if (typeof spec === 'string' && /^(file:|link:|\.|\/|~)/.test(spec.trim()))
        return `package.json ${field}.${name} is a local path: the code is a dependency`;
  }
  return undefined;
}

function pythonRefusal(inputs: ReadonlyMap<string, Uint8Array>): string | undefined {
  const requirements = inputs.get('requirements.txt');
  if (!requirements) return undefined;
  const lines = Buffer.from(requirements).toString('utf8').split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    if (!line) continue;
    // Another file of the tree, or a package built from the tree: the dependencies follow the code.
    if (/^(-r|--requirement|-c|--constraint|-e|--editable)\b/.test(line) || /^(\.|\/|~)/.test(line))
      return `requirements.txt line ${index + 1} names a file of the tree: ${line}`;
    if (/file:/i.test(line)) return `requirements.txt line ${index + 1} names a local file: ${line}`;
  }
  return undefined;
}
