/**
 * ajv validation of resources against the one schema per kind. Errors come back as ManifestIssues
 * (`file#index field: reason`), never as ajv's raw objects, so every caller reports them the same way.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Cron } from 'croner';
import type { ManifestIssue } from '../core/errors.js';
import { normalizeRepoPath } from '../core/paths.js';
import { KINDS, type KindName } from '../core/schemas.js';

type JsonObject = Record<string, unknown>;

/**
 * CRDs prune unknown fields silently; a manifest author wants a typo reported instead. So the ajv
 * copy of each schema forbids unknown properties wherever the schema lists them.
 */
function strictCopy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strictCopy);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) out[key] = strictCopy(value);
  const isClosedObject =
    out.type === 'object' &&
    out.properties !== undefined &&
    out.additionalProperties === undefined &&
    out['x-kubernetes-preserve-unknown-fields'] !== true;
  if (isClosedObject) out.additionalProperties = false;
  return out;
}

function createAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: true });
  ajv.addKeyword({ keyword: 'x-kubernetes-preserve-unknown-fields', schemaType: 'boolean' });
  return ajv;
}

const ajv = createAjv();
const validators = new Map<KindName, ValidateFunction>();

function validatorFor(kind: KindName): ValidateFunction {
  let validate = validators.get(kind);
  if (!validate) {
    validate = ajv.compile(strictCopy(KINDS[kind].schema) as object);
    validators.set(kind, validate);
  }
  return validate;
}

function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

function join(base: string, key: string): string {
  return base ? `${base}.${key}` : key;
}

function describe(error: ErrorObject): { field: string; reason: string } {
  const base = fieldPath(error.instancePath);
  const params = error.params as JsonObject;
  switch (error.keyword) {
    case 'required':
      return { field: join(base, String(params.missingProperty)), reason: 'is required' };
    case 'additionalProperties':
      return { field: join(base, String(params.additionalProperty)), reason: 'unknown field' };
    case 'enum':
      return {
        field: base,
        reason: `must be one of: ${(params.allowedValues as unknown[]).map(String).join(', ')}`,
      };
    case 'pattern':
      if (base.endsWith('name') || base.endsWith('function') || base.endsWith('namespace'))
        return { field: base, reason: 'must be a DNS-1123 label (lowercase letters, digits and "-")' };
      return { field: base, reason: `${error.message ?? 'is invalid'}` };
    default:
      return { field: base, reason: error.message ?? 'is invalid' };
  }
}

export interface ValidateOptions {
  file: string;
  index: number;
}

/**
 * Validates (and defaults, in place) one resource document. Returns the issues found; an empty list
 * means the object is a well-formed resource of its kind.
 */
export function validateResource(kind: KindName, doc: unknown, where: ValidateOptions): ManifestIssue[] {
  const validate = validatorFor(kind);
  if (validate(doc)) return semanticIssues(kind, doc as JsonObject, where);
  const seen = new Set<string>();
  const issues: ManifestIssue[] = [];
  for (const error of validate.errors ?? []) {
    const { field, reason } = describe(error);
    const key = `${field}\0${reason}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push({ file: where.file, index: where.index, field, reason });
  }
  return issues;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESERVED_ENV = /^(SLESS_|PORT$)/;

/** Rules a JSON Schema inside the CRD dialect cannot express. */
function semanticIssues(kind: KindName, doc: JsonObject, where: ValidateOptions): ManifestIssue[] {
  const issues: ManifestIssue[] = [];
  const add = (field: string, reason: string) => issues.push({ ...where, field, reason });
  const spec = doc.spec as JsonObject;
  if (kind === 'Function') {
    const env = (spec.env ?? {}) as Record<string, string>;
    for (const name of Object.keys(env).sort()) {
      if (!ENV_NAME.test(name)) add(`spec.env.${name}`, 'must be a valid environment variable name');
      else if (RESERVED_ENV.test(name)) add(`spec.env.${name}`, 'is reserved for the runtime');
    }
  }
  if (kind === 'Trigger') {
    if (spec.type === 'cron') {
      if (typeof spec.schedule !== 'string') add('spec.schedule', 'is required for a cron trigger');
      else {
        const problem = cronProblem(spec.schedule, spec.timezone as string | undefined);
        if (problem) add('spec.schedule', problem);
      }
    } else if (spec.schedule !== undefined) {
      add('spec.schedule', 'is only allowed for a cron trigger');
    }
  }
  if (kind === 'GitSource') {
    const problem = urlProblem(String(spec.url));
    if (problem) add('spec.url', problem);
    if (typeof spec.path === 'string' && normalizeRepoPath(spec.path) === undefined)
      add('spec.path', 'must stay inside the repository');
  }
  return issues;
}

function cronProblem(schedule: string, timezone: string | undefined): string | undefined {
  try {
    const cron = new Cron(schedule, { paused: true, ...(timezone ? { timezone } : {}) });
    cron.stop();
    return undefined;
  } catch (error) {
    return `invalid cron schedule: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function urlProblem(url: string): string | undefined {
  if (url.startsWith('/') || url.startsWith('file://')) return undefined;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      return 'must be an http(s) URL or an absolute local path';
    if (parsed.username || parsed.password) return 'must not embed credentials; use spec.secretRef';
    return undefined;
  } catch {
    return 'must be an http(s) URL or an absolute local path';
  }
}
