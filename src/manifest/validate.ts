/**
 * ajv validation of resources against the one schema per kind. Errors come back as ManifestIssues
 * (`file#index field: reason`), never as ajv's raw objects, so every caller reports them the same way.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Cron } from 'croner';
import { intervalProblem } from '../core/duration.js';
import type { ManifestIssue } from '../core/errors.js';
import { DNS_LABEL_PATTERN } from '../core/naming.js';
import { normalizeRepoPath } from '../core/paths.js';
import { KINDS, type KindName } from '../core/schemas.js';

const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);

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
  // Stryker disable next-line BooleanLiteral: `strict` only adds compile-time checks of our own schemas
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: true });
  ajv.addKeyword({ keyword: 'x-kubernetes-preserve-unknown-fields', schemaType: 'boolean' });
  return ajv;
}

const ajv = createAjv();
const validators = new Map<KindName, ValidateFunction>();

function validatorFor(kind: KindName): ValidateFunction {
  let validate = validators.get(kind);
  // Stryker disable next-line ConditionalExpression: equivalent, compiling again gives the same validator
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
      // ajv always sets a message; the `'is invalid'` fallback is never reached.
      return { field: base, reason: `${error.message ?? 'is invalid'}` };
    default:
      // Stryker disable next-line StringLiteral: ajv always sets a message; the fallback is never used
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
  // Before anything recursive (ajv, hashing, cloning) walks it: depth is what makes those overflow.
  const tooDeep = firstTooDeep(doc, MAX_DEPTH);
  if (tooDeep !== undefined)
    return [{ ...where, field: tooDeep, reason: `is nested deeper than ${MAX_DEPTH} levels` }];
  const validate = validatorFor(kind);
  if (validate(doc)) return semanticIssues(kind, doc as JsonObject, where);
  const seen = new Set<string>();
  const issues: ManifestIssue[] = [];
  // Stryker disable next-line ArrayDeclaration: equivalent, ajv always sets errors when validation fails
  for (const error of validate.errors ?? []) {
    const { field, reason } = describe(error);
    // Stryker disable next-line StringLiteral,ConditionalExpression: these schemas make ajv report each failure once; the set keeps it so if a schema ever yields the same field and reason twice
    const key = `${field}\0${reason}`;
    // Stryker disable next-line ConditionalExpression: see above
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push({ file: where.file, index: where.index, field, reason });
  }
  return issues;
}

/** Levels of objects and arrays a document may have, its event included. */
export const MAX_DEPTH = 32;
/** An event travels in an environment variable or a request; Linux caps one env string at 128 KiB. */
export const MAX_EVENT_BYTES = 32 * 1024;

/** The dotted path of the first value nested deeper than `max`, without recursion of its own. */
function firstTooDeep(root: unknown, max: number): string | undefined {
  const stack: Array<{ value: unknown; depth: number; path: string }> = [{ value: root, depth: 0, path: '' }];
  while (stack.length > 0) {
    const { value, depth, path } = stack.pop() as { value: unknown; depth: number; path: string };
    if (value === null || typeof value !== 'object') continue;
    // '(root)' is never reached with MAX_DEPTH > 0 (the root sits at depth 0).
    if (depth >= max) return path.length > 200 ? `${path.slice(0, 200)}…` : path || '(root)';
    for (const [key, child] of Object.entries(value))
      stack.push({ value: child, depth: depth + 1, path: path ? `${path}.${key}` : key });
  }
  return undefined;
}

// ICU's list holds canonical zone names only; UTC and GMT are aliases people write all the time.
const TIME_ZONES = new Set([...Intl.supportedValuesOf('timeZone'), 'UTC', 'Etc/UTC', 'GMT', 'Etc/GMT']);

/** git check-ref-format's rules for a branch name, plus a length limit. */
export function branchProblem(branch: string): string | undefined {
  const name = branch.startsWith('refs/heads/') ? branch.slice('refs/heads/'.length) : branch;
  const bad =
    name === '' ||
    name === '@' ||
    name.startsWith('-') ||
    name.startsWith('/') ||
    name.endsWith('/') ||
    name.endsWith('.') ||
    name.includes('..') ||
    name.includes('//') ||
    name.includes('@{') ||
    [...name].some((c) => c.charCodeAt(0) <= 0x20 || c.charCodeAt(0) === 0x7f) ||
    /[~^:?*[\\]/.test(name) ||
    name.split('/').some((part) => part.startsWith('.') || part.endsWith('.lock'));
  return bad ? 'is not a valid git branch name (git check-ref-format)' : undefined;
}

/** A preview pattern is a branch name in which `*` and `?` stand for parts of it. */
export function branchPatternProblem(pattern: string): boolean {
  return branchProblem(pattern.replace(/\*\*|[*?]/g, 'x')) !== undefined;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESERVED_ENV = /^(SLESS_|PORT$)/;

/** Rules a JSON Schema inside the CRD dialect cannot express. */
function semanticIssues(kind: KindName, doc: JsonObject, where: ValidateOptions): ManifestIssue[] {
  const issues: ManifestIssue[] = [];
  const add = (field: string, reason: string) => issues.push({ ...where, field, reason });
  const spec = doc.spec as JsonObject;
  // Stryker disable next-line ConditionalExpression: equivalent, other kinds have no spec.env (strict schemas refuse it)
  if (kind === 'Function') {
    const env = (spec.env ?? {}) as Record<string, unknown>;
    for (const name of Object.keys(env).sort()) {
      if (!ENV_NAME.test(name)) add(`spec.env.${name}`, 'must be a valid environment variable name');
      else if (RESERVED_ENV.test(name)) add(`spec.env.${name}`, 'is reserved for the runtime');
      else
        for (const problem of envValueIssues(env[name]))
          add(`spec.env.${name}${problem.field}`, problem.reason);
    }
    const scale = spec.scale as
      | { min?: number; max?: number; concurrency?: number; queue?: number }
      | undefined;
    if (scale?.min !== undefined && scale.max !== undefined && scale.min > scale.max)
      add('spec.scale.min', `must not exceed spec.scale.max (${scale.max})`);
    // A queue bound with no limit would never queue anything: most likely a forgotten concurrency.
    if (scale?.queue !== undefined && scale.concurrency === undefined)
      add('spec.scale.queue', 'needs spec.scale.concurrency: without a limit nothing waits');
    issues.push(...secretMountIssues(spec.secrets, where));
  }
  // Stryker disable next-line ConditionalExpression: equivalent, the strict schemas of the other kinds refuse a spec.event
  if (kind === 'Trigger' || kind === 'FunctionJob') {
    if (spec.event !== undefined && Buffer.byteLength(JSON.stringify(spec.event)) > MAX_EVENT_BYTES)
      add('spec.event', `is larger than ${MAX_EVENT_BYTES} bytes as JSON`);
  }
  // Stryker disable next-line ConditionalExpression: equivalent, other kinds have neither spec.type nor spec.schedule
  if (kind === 'Trigger') {
    if (typeof spec.timezone === 'string' && !TIME_ZONES.has(spec.timezone))
      add('spec.timezone', 'must be an IANA time zone name such as Europe/Berlin or UTC');
    else if (spec.type === 'cron') {
      if (typeof spec.schedule !== 'string') add('spec.schedule', 'is required for a cron trigger');
      else {
        const problem = cronProblem(spec.schedule);
        if (problem) add('spec.schedule', problem);
      }
    } else if (spec.schedule !== undefined) {
      add('spec.schedule', 'is only allowed for a cron trigger');
    }
    issues.push(...queueTriggerIssues(spec, where));
  }
  if (kind === 'GitSource') {
    const problem = urlProblem(String(spec.url));
    if (problem) add('spec.url', problem);
    // Stryker disable next-line ConditionalExpression: equivalent, the schema defaults spec.path to '.', so it is always a string here
    if (typeof spec.path === 'string' && normalizeRepoPath(spec.path) === undefined)
      add('spec.path', 'must stay inside the repository');
    // Stryker disable next-line ConditionalExpression: equivalent, the schema defaults spec.branch to 'main', so it is always a string here
    if (typeof spec.branch === 'string') {
      const problem = branchProblem(spec.branch);
      if (problem) add('spec.branch', problem);
    }
    // Stryker disable next-line ConditionalExpression: equivalent, the schema defaults spec.interval to '1m', so it is always a string here
    if (typeof spec.interval === 'string') {
      const problem = intervalProblem(spec.interval);
      if (problem) add('spec.interval', problem);
    }
    const previews = spec.previews as { branches?: unknown[] } | undefined;
    for (const [i, pattern] of (previews?.branches ?? []).entries())
      if (typeof pattern === 'string' && branchPatternProblem(pattern))
        add(`spec.previews.branches[${i}]`, 'is not a branch name pattern (a branch name with * ** or ?)');
  }
  return issues;
}

const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const MAX_ENV_VALUE = 32768;

/**
 * An env value is a string or `{ secretRef: { name, key } }` and nothing else: the schema cannot say
 * "string or object" inside the CRD dialect, so the shape is checked here. There is no namespace
 * field: a reference resolves in the function's own namespace only.
 */
function envValueIssues(value: unknown): { field: string; reason: string }[] {
  if (typeof value === 'string')
    return value.length > MAX_ENV_VALUE
      ? [{ field: '', reason: `must NOT have more than ${MAX_ENV_VALUE} characters` }]
      : [];
  const shape = 'must be a string or { secretRef: { name, key } }';
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return [{ field: '', reason: shape }];
  const record = value as Record<string, unknown>;
  const extra = Object.keys(record).filter((k) => k !== 'secretRef');
  if (extra.length > 0)
    return [
      {
        field: `.${extra[0]}`,
        reason: 'unknown field (a secret reference has only secretRef: { name, key })',
      },
    ];
  const ref = record.secretRef;
  if (ref === null || typeof ref !== 'object' || Array.isArray(ref))
    return [{ field: '.secretRef', reason: 'must be { name, key }' }];
  const out: { field: string; reason: string }[] = [];
  const fields = ref as Record<string, unknown>;
  for (const key of Object.keys(fields).sort())
    if (key !== 'name' && key !== 'key')
      out.push({
        field: `.secretRef.${key}`,
        reason:
          key === 'namespace'
            ? "is not allowed: secrets resolve in the function's own namespace only"
            : 'unknown field',
      });
  const name = fields.name;
  if (typeof name !== 'string') out.push({ field: '.secretRef.name', reason: 'is required' });
  else if (!DNS_LABEL.test(name) || name.length > 63)
    out.push({
      field: '.secretRef.name',
      reason: 'must be a DNS-1123 label (lowercase letters, digits and "-")',
    });
  const key = fields.key;
  if (typeof key !== 'string') out.push({ field: '.secretRef.key', reason: 'is required' });
  else if (!SECRET_KEY.test(key) || key.length > 253)
    out.push({ field: '.secretRef.key', reason: 'must be a secret key (letters, digits, "-", "_" and ".")' });
  return out;
}

/** Where a secret may not be mounted: the system the function runs on, and its own code. */
const RESERVED_MOUNTS = [
  '/usr',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/etc',
  '/proc',
  '/dev',
  '/sys',
  '/tmp',
  '/run',
  '/app',
  '/workspace',
];

function secretMountIssues(value: unknown, where: ValidateOptions): ManifestIssue[] {
  if (!Array.isArray(value)) return [];
  const issues: ManifestIssue[] = [];
  const names = new Set<string>();
  const paths: string[] = [];
  for (const [i, entry] of (value as { name: string; mountPath: string }[]).entries()) {
    const add = (field: string, reason: string) =>
      issues.push({ ...where, field: `spec.secrets.${i}.${field}`, reason });
    if (names.has(entry.name)) add('name', `secret "${entry.name}" is mounted twice`);
    names.add(entry.name);
    const path = entry.mountPath.replace(/\/+$/, '');
    if (path.split('/').some((part, n) => n > 0 && (part === '' || part === '.' || part === '..'))) {
      add('mountPath', 'must be a normalized absolute path (no "//", "." or "..")');
      continue;
    }
    const reserved = RESERVED_MOUNTS.find(
      (r) => path === r || path.startsWith(`${r}/`) || r.startsWith(`${path}/`),
    );
    if (path === '' || reserved) {
      add('mountPath', `may not be ${path || '/'} or overlap ${reserved ?? '/'}`);
      continue;
    }
    const clash = paths.find((p) => p === path || p.startsWith(`${path}/`) || path.startsWith(`${p}/`));
    if (clash) {
      add('mountPath', `overlaps another secret's mountPath ${clash}`);
      continue;
    }
    paths.push(path);
  }
  return issues;
}

function cronProblem(schedule: string): string | undefined {
  try {
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: equivalent, a Cron without a callback never runs anything
    const cron = new Cron(schedule, { paused: true });
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

const QUEUE_FIELDS = [
  'queue',
  'exchange',
  'routingKey',
  'secretRef',
  'maxAttempts',
  'deadLetterExchange',
  'prefetch',
];

/** An amqp Trigger names its queue and its connection secret; other types take no queue fields. */
function queueTriggerIssues(spec: JsonObject, where: ValidateOptions): ManifestIssue[] {
  const issues: ManifestIssue[] = [];
  const add = (field: string, reason: string) => issues.push({ ...where, field, reason });
  if (spec.type === 'amqp') {
    if (spec.queue === undefined) add('spec.queue', 'is required for an amqp trigger');
    if (spec.secretRef === undefined)
      add('spec.secretRef', 'is required for an amqp trigger: a secret whose key holds the amqp:// URL');
    if (spec.routingKey !== undefined && spec.exchange === undefined)
      add('spec.routingKey', 'needs spec.exchange: a routing key binds the queue to an exchange');
    return issues;
  }
  for (const field of QUEUE_FIELDS)
    if (spec[field] !== undefined) add(`spec.${field}`, 'is only allowed for an amqp trigger');
  return issues;
}
