/**
 * From the documents at one commit to the objects to apply. Each Function carries two hashes:
 * the build key (what the artifact depends on) and the config hash (what the running workload
 * depends on), so the reconciler can tell "rebuild" from "restart" from "nothing to do".
 */
import { BoundedCache } from '../core/bounded-cache.js';
import type { ManifestIssue } from '../core/errors.js';
import { hashObject } from '../core/hash.js';
import type { SourceSnapshot, TreeFile } from '../core/interfaces.js';
import { isWithin, normalizeRepoPath } from '../core/paths.js';
import {
  ANNOTATION_BUILD_KEY,
  ANNOTATION_CODE_DIR,
  ANNOTATION_COMMIT,
  ANNOTATION_CONFIG_HASH,
  ANNOTATION_MANIFEST,
  type AnyResource,
  type GitSource,
  LABEL_SOURCE,
  type SlessFunction,
} from '../core/resources.js';
import { RUNTIME_INFO } from '../core/runtimes.js';
import type { FunctionSpec, RuntimeName } from '../core/schemas.js';
import type { LoadResult } from '../manifest/load.js';

export interface PlannedFunction {
  object: SlessFunction;
  buildKey: string;
  configHash: string;
  codeDir: string;
}

export interface Plan {
  commit: string;
  objects: AnyResource[];
  functions: Map<string, PlannedFunction>;
  /** Files holding sless documents; builds leave them out. */
  manifestFiles: ReadonlySet<string>;
  issues: ManifestIssue[];
}

interface BuildKeyOptions {
  runtime: RuntimeName;
  entrypoint: string;
  codeDir: string;
  files: readonly TreeFile[];
  manifestFiles: ReadonlySet<string>;
}

/** What a build depends on: the runtime, and the code tree minus manifest files, relative to codeDir. */
function buildInputs(options: BuildKeyOptions) {
  const info = RUNTIME_INFO[options.runtime];
  const prefixLength = options.codeDir === '' ? 0 : options.codeDir.length + 1;
  const tree = options.files
    .filter((f) => isWithin(options.codeDir, f.path) && !options.manifestFiles.has(f.path))
    .map((f) => [f.path.slice(prefixLength), f.mode, f.oid]);
  return {
    runtime: info.name,
    runtimeVersion: info.version,
    entrypoint: info.compiled ? options.entrypoint : undefined,
    tree,
  };
}

type BuildInputs = ReturnType<typeof buildInputs>;

const hashInputs = (inputs: BuildInputs) => hashObject(inputs).slice(0, 32);

/** buildKey = hash(runtime, runtime version, the code tree minus manifest files). */
export function computeBuildKey(options: BuildKeyOptions): string {
  return hashInputs(buildInputs(options));
}

/**
 * Build keys by their inputs, kept across syncs: the inputs name every file by its blob id, so an
 * entry never goes stale, and a commit that changes one function of a thousand hashes one build key
 * (a sorted JSON text and a SHA-256 of each function's tree was most of planning).
 */
export class BuildKeyCache {
  private readonly keys: BoundedCache<string, string>;
  constructor(
    limit = 20_000,
    /** A seam for tests that count what is hashed. */
    private readonly hash = hashInputs,
  ) {
    this.keys = new BoundedCache(limit);
  }

  of(options: BuildKeyOptions): string {
    const inputs = buildInputs(options);
    const id = [
      inputs.runtime,
      inputs.runtimeVersion,
      inputs.entrypoint ?? '',
      ...inputs.tree.map((entry) => entry.join('\u0001')),
    ].join('\0');
    let key = this.keys.get(id);
    if (key === undefined) {
      key = this.hash(inputs);
      this.keys.set(id, key);
    }
    return key;
  }
}

/** What a running workload depends on besides its artifact: changing it restarts, never rebuilds. */
export function computeConfigHash(spec: FunctionSpec): string {
  const { source: _source, ...runtimeConfig } = spec;
  return hashObject(runtimeConfig).slice(0, 16);
}

export async function planSource(
  source: GitSource,
  snapshot: SourceSnapshot,
  loaded: LoadResult,
  options: { buildKeys?: BuildKeyCache } = {},
): Promise<Plan> {
  const namespace = source.metadata.namespace;
  const commit = snapshot.commit;
  const objects: AnyResource[] = [];
  const functions = new Map<string, PlannedFunction>();
  // The final `?? ''` is never taken: validation refuses a path that normalizes to undefined.
  const root = normalizeRepoPath(source.spec.path ?? '.') ?? '';
  const rootFiles = await snapshot.listFiles(root);
  const filesUnder = (dir: string) =>
    isWithin(root, dir) ? sortedWithin(rootFiles, dir) : snapshot.listFiles(dir);

  for (const loadedDoc of loaded.documents) {
    const { doc } = loadedDoc;
    const annotations: Record<string, string> = {
      ...(doc.metadata.annotations ?? {}),
      [ANNOTATION_COMMIT]: commit,
      [ANNOTATION_MANIFEST]: `${loadedDoc.file}#${loadedDoc.index}`,
    };
    const metadata = {
      name: doc.metadata.name,
      namespace,
      labels: sortRecord({ ...(doc.metadata.labels ?? {}), [LABEL_SOURCE]: source.metadata.name }),
    };
    if (loadedDoc.kind === 'Function') {
      const spec = doc.spec as FunctionSpec;
      // The fallback is never taken: loadManifests gives every Function a codeDir.
      const codeDir = loadedDoc.codeDir ?? '';
      const inputs = {
        runtime: spec.runtime,
        entrypoint: spec.entrypoint,
        codeDir,
        files: await filesUnder(codeDir),
        manifestFiles: loaded.manifestFiles,
      };
      const buildKey = options.buildKeys ? options.buildKeys.of(inputs) : computeBuildKey(inputs);
      const configHash = computeConfigHash(spec);
      annotations[ANNOTATION_BUILD_KEY] = buildKey;
      annotations[ANNOTATION_CONFIG_HASH] = configHash;
      annotations[ANNOTATION_CODE_DIR] = codeDir;
      const object: SlessFunction = {
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Function',
        metadata: { ...metadata, annotations: sortRecord(annotations) },
        spec,
      };
      objects.push(object);
      functions.set(doc.metadata.name, { object, buildKey, configHash, codeDir });
    } else {
      objects.push({
        apiVersion: 'sless.dev/v1alpha1',
        kind: loadedDoc.kind,
        metadata: { ...metadata, annotations: sortRecord(annotations) },
        spec: doc.spec,
      } as AnyResource);
    }
  }
  return { commit, objects, functions, manifestFiles: loaded.manifestFiles, issues: loaded.issues };
}

/**
 * The files below `dir` in a path-sorted listing: one contiguous run, found by binary search, so that
 * planning N functions does not scan the whole repository N times.
 */
export function sortedWithin(files: readonly TreeFile[], dir: string): readonly TreeFile[] {
  if (dir === '') return files;
  const prefix = `${dir}/`;
  let low = 0;
  let high = files.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((files[mid] as TreeFile).path < prefix) low = mid + 1;
    else high = mid;
  }
  let end = low;
  while (end < files.length && (files[end] as TreeFile).path.startsWith(prefix)) end++;
  return files.slice(low, end);
}

/** The record with its keys sorted, so the same labels and annotations always come out in one order. */
function sortRecord(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
