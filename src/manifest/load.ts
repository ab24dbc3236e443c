/**
 * Finds and validates the sless documents in a repository snapshot. Any `.yaml`/`.yml` file below the
 * source path may hold them; YAML that is not ours is ignored.
 */
import { posix } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { BoundedCache } from '../core/bounded-cache.js';
import type { ManifestIssue } from '../core/errors.js';
import type { SourceSnapshot, TreeFile } from '../core/interfaces.js';
import { normalizeRepoPath } from '../core/paths.js';
import { API_GROUP, API_VERSION, type KindName, REPO_KINDS } from '../core/schemas.js';
import { validateResource } from './validate.js';

export interface LoadedDocument {
  kind: KindName;
  file: string;
  index: number;
  /** The validated, defaulted document as written (no namespace, labels or status added yet). */
  doc: {
    apiVersion: string;
    kind: KindName;
    metadata: {
      name: string;
      namespace?: string;
      labels?: Record<string, string>;
      annotations?: Record<string, string>;
    };
    spec: Record<string, unknown>;
  };
  /** Functions only: the repository-relative code directory. */
  codeDir?: string;
}

export interface LoadResult {
  documents: LoadedDocument[];
  /** Files that held at least one sless document; they are left out of build keys. */
  manifestFiles: Set<string>;
  issues: ManifestIssue[];
}

/** A file's YAML as parsed, before validation: the same for every path and commit that hold the blob. */
type ParsedFile =
  | { kind: 'not-ours' }
  | { kind: 'too-large' }
  | { kind: 'documents'; documents: ({ yamlError: string } | { value: unknown })[] };

/** What one file contributes to a load: the same for every commit that holds this blob at this path. */
interface CheckedFile {
  /** The file holds at least one sless document (it is left out of build keys). */
  ours: boolean;
  documents: readonly LoadedDocument[];
  issues: readonly ManifestIssue[];
  /** Functions the file defines that were refused: their own issues say why. */
  refusedFunctions?: readonly string[];
}

/**
 * Manifests by content, kept across syncs: parsed YAML by blob id, and each file's validated documents
 * and issues by blob id, path and namespace (everything the result depends on). Blobs are
 * content-addressed, so an entry never goes stale: a commit that changes one manifest of a thousand
 * reads, parses and validates that one, and takes the rest as they were. Cached documents are frozen,
 * because every later load hands out the same objects.
 */
export class ParsedManifestCache {
  private readonly files: BoundedCache<string, ParsedFile>;
  private readonly checked: BoundedCache<string, CheckedFile>;
  constructor(limit = 20_000) {
    this.files = new BoundedCache(limit);
    this.checked = new BoundedCache(limit);
  }
  get(oid: string): ParsedFile | undefined {
    return this.files.get(oid);
  }
  set(oid: string, parsed: ParsedFile): void {
    this.files.set(oid, parsed);
  }
  getChecked(key: string): CheckedFile | undefined {
    return this.checked.get(key);
  }
  setChecked(key: string, file: CheckedFile): void {
    this.checked.set(key, file);
  }
}

function parseFile(bytes: Uint8Array): ParsedFile {
  const text = Buffer.from(bytes).toString('utf8');
  if (!text.includes(API_GROUP)) return { kind: 'not-ours' };
  if (bytes.byteLength > MAX_MANIFEST_BYTES) return { kind: 'too-large' };
  return {
    kind: 'documents',
    documents: parseAllDocuments(text).map((yamlDoc) => {
      if (yamlDoc.errors.length > 0) {
        const first = yamlDoc.errors[0];
        const line = first?.linePos?.[0]?.line;
        return {
          yamlError: `invalid YAML${line ? ` at line ${line}` : ''}: ${first?.message.split('\n')[0]}`,
        };
      }
      try {
        // A "billion laughs" document expands aliases without end; past 100 the file is refused. yaml
        // counts the anchored node itself as one use of it, so 100 aliases are 101 uses.
        return { value: yamlDoc.toJS({ maxAliasCount: MAX_ALIASES + 1 }) as unknown };
      } catch (error) {
        return {
          yamlError: `invalid YAML: ${(error as Error).message.split('\n')[0]} (at most ${MAX_ALIASES} aliases)`,
        };
      }
    }),
  };
}

const MANIFEST_FILE = /\.ya?ml$/i;
const SKIPPED_DIRS = /(^|\/)(node_modules|\.git)\//;
const MAX_MANIFEST_BYTES = 1024 * 1024;
const MAX_ALIASES = 100;

export interface LoadOptions {
  root: string;
  /** `namespace` undefined (a working tree checked outside any source) accepts any namespace. */
  namespace: string | undefined;
  cache?: ParsedManifestCache;
  /** Validates one document; a seam for tests that count what a load validates. */
  validate?: typeof validateResource;
}

export async function loadManifests(snapshot: SourceSnapshot, options: LoadOptions): Promise<LoadResult> {
  const issues: ManifestIssue[] = [];
  const documents: LoadedDocument[] = [];
  const refusedFunctions = new Set<string>();
  const manifestFiles = new Set<string>();
  const root = normalizeRepoPath(options.root);
  if (root === undefined) {
    return {
      documents,
      manifestFiles,
      issues: [
        { file: options.root, index: 0, field: 'spec.path', reason: 'must stay inside the repository' },
      ],
    };
  }
  const files = (await snapshot.listFiles(root)).filter(
    (f) => MANIFEST_FILE.test(f.path) && !SKIPPED_DIRS.test(f.path) && f.mode !== '120000',
  );
  for (const file of files) {
    // Everything a file's result depends on: its content, where it is and the source's namespace.
    const key = `${file.oid}\0${file.path}\0${options.namespace ?? '\u0001'}`;
    let checked = options.cache?.getChecked(key);
    if (!checked) {
      checked = deepFreeze(await checkFile(snapshot, file, options));
      options.cache?.setChecked(key, checked);
    }
    if (checked.ours) manifestFiles.add(file.path);
    documents.push(...checked.documents);
    issues.push(...checked.issues);
    for (const name of checked.refusedFunctions ?? []) refusedFunctions.add(name);
  }
  issues.push(...crossReferenceIssues(documents, refusedFunctions));
  return { documents, manifestFiles, issues };
}

/** Reads (or takes the cached parse of) one YAML file and validates its sless documents. */
async function checkFile(
  snapshot: SourceSnapshot,
  file: TreeFile,
  options: LoadOptions,
): Promise<CheckedFile> {
  const issues: ManifestIssue[] = [];
  const documents: LoadedDocument[] = [];
  const refusedFunctions: string[] = [];
  const validate = options.validate ?? validateResource;
  let parsed = options.cache?.get(file.oid);
  // The size comes from the object header: a huge blob is refused before it is inflated. A blob in
  // the cache passed this check already (a refused one is never parsed), so it is not read again.
  const size = parsed ? undefined : await snapshot.fileSize?.(file);
  if (size !== undefined && size > MAX_MANIFEST_BYTES) {
    issues.push({
      file: file.path,
      index: 0,
      field: '',
      reason: `file is ${size} bytes; YAML files under the source path may be at most ${MAX_MANIFEST_BYTES} bytes`,
    });
    return { ours: false, documents, issues };
  }
  if (!parsed) {
    parsed = parseFile(await snapshot.readFile(file.path, file.oid));
    options.cache?.set(file.oid, parsed);
  }
  if (parsed.kind === 'not-ours') return { ours: false, documents, issues };
  if (parsed.kind === 'too-large') {
    issues.push({
      file: file.path,
      index: 0,
      field: '',
      reason: `file is larger than ${MAX_MANIFEST_BYTES} bytes`,
    });
    return { ours: false, documents, issues };
  }
  parsed.documents.forEach((parsedDoc, index) => {
    const where = { file: file.path, index };
    if ('yamlError' in parsedDoc) {
      issues.push({ ...where, field: '', reason: parsedDoc.yamlError });
      return;
    }
    // Validation fills in defaults: it works on a copy, never on the cached parse.
    const value = structuredClone(parsedDoc.value);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
    const record = value as Record<string, unknown>;
    const apiVersion = record.apiVersion;
    if (typeof apiVersion !== 'string' || !apiVersion.startsWith(`${API_GROUP}/`)) return;
    if (apiVersion !== API_VERSION) {
      issues.push({ ...where, field: 'apiVersion', reason: `must be ${API_VERSION}` });
      return;
    }
    const kind = record.kind;
    if (typeof kind !== 'string' || !(REPO_KINDS as readonly string[]).includes(kind)) {
      issues.push({ ...where, field: 'kind', reason: `must be one of: ${REPO_KINDS.join(', ')}` });
      return;
    }
    const found = validate(kind as KindName, record, where);
    if (found.length > 0) {
      issues.push(...found);
      const name = (record.metadata as { name?: unknown } | undefined)?.name;
      if (kind === 'Function' && typeof name === 'string') refusedFunctions.push(name);
      return;
    }
    const doc = record as unknown as LoadedDocument['doc'];
    const ns = doc.metadata.namespace;
    if (ns !== undefined && options.namespace !== undefined && ns !== options.namespace) {
      issues.push({
        ...where,
        field: 'metadata.namespace',
        reason: `must be omitted or "${options.namespace}" (the source's namespace)`,
      });
      if (kind === 'Function') refusedFunctions.push(doc.metadata.name);
      return;
    }
    const loaded: LoadedDocument = { kind: kind as KindName, file: file.path, index, doc };
    if (kind === 'Function') {
      const sourcePath = String((doc.spec.source as { path?: string } | undefined)?.path ?? '.');
      const codeDir = posix.isAbsolute(sourcePath)
        ? undefined
        : normalizeRepoPath(posix.join(posix.dirname(file.path), sourcePath));
      if (codeDir === undefined) {
        issues.push({ ...where, field: 'spec.source.path', reason: 'must stay inside the repository' });
        refusedFunctions.push(doc.metadata.name);
        return;
      }
      loaded.codeDir = codeDir;
    }
    documents.push(loaded);
  });
  return { ours: true, documents, issues, ...(refusedFunctions.length > 0 ? { refusedFunctions } : {}) };
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/**
 * Names are unique per kind, and triggers and jobs name a function of the same repository. One that
 * names a function the repository defines but that was refused gets no issue of its own: the
 * function's issue is the one to fix, and a second line calling it undefined would mislead.
 */
function crossReferenceIssues(
  documents: readonly LoadedDocument[],
  refusedFunctions: ReadonlySet<string>,
): ManifestIssue[] {
  const issues: ManifestIssue[] = [];
  const seen = new Map<string, LoadedDocument>();
  for (const d of documents) {
    const key = `${d.kind}/${d.doc.metadata.name}`;
    const first = seen.get(key);
    if (first) {
      issues.push({
        file: d.file,
        index: d.index,
        field: 'metadata.name',
        reason: `duplicate ${d.kind} "${d.doc.metadata.name}" (first defined in ${first.file}#${first.index})`,
      });
    } else seen.set(key, d);
  }
  const functions = new Set(documents.filter((d) => d.kind === 'Function').map((d) => d.doc.metadata.name));
  for (const d of documents) {
    if (d.kind === 'Function') continue;
    const target = String(d.doc.spec.function);
    if (!functions.has(target) && !refusedFunctions.has(target)) {
      issues.push({
        file: d.file,
        index: d.index,
        field: 'spec.function',
        reason: `function "${target}" is not defined in this repository`,
      });
    }
  }
  return issues;
}
