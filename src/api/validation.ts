/**
 * Fastify's validator compiler. Params, querystring and headers use a plain ajv; resource bodies
 * (marked with `x-sless-kind`) go through the manifest validator, so the API reports
 * `spec.memoryMb: must be <= 4096` exactly as a manifest would, and never clamps a value.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';
import { API_VERSION, KIND_NAMES, type KindName } from '../core/schemas.js';
import { validateResource } from '../manifest/validate.js';
import { BodyValidationError } from './errors.js';
import { BODY_KIND_KEYWORD } from './schemas.js';

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * `{name, spec}` → the full document. A full document is passed through untouched so its own
 * apiVersion/kind are checked.
 */
export function toResource(kind: KindName, body: unknown): unknown {
  if (!isObject(body) || 'apiVersion' in body || 'kind' in body || 'metadata' in body) return body;
  const { name, labels, spec, ...rest } = body;
  return {
    apiVersion: API_VERSION,
    kind,
    metadata: { name, ...(labels === undefined ? {} : { labels }) },
    spec,
    ...rest,
  };
}

const WHERE = { file: 'body', index: 0 };

/** Validates (and defaults) one body of the given kind; throws BodyValidationError. */
export function validateBody(kind: KindName, body: unknown): JsonObject {
  const doc = toResource(kind, body);
  const issues = validateResource(kind, doc, WHERE);
  if (issues.length > 0) throw new BodyValidationError(issues);
  return doc as JsonObject;
}

function bodyKind(doc: unknown): KindName {
  const kind = isObject(doc) ? doc.kind : undefined;
  if (typeof kind === 'string' && (KIND_NAMES as string[]).includes(kind)) return kind as KindName;
  throw new BodyValidationError([
    { ...WHERE, field: 'kind', reason: `must be one of: ${KIND_NAMES.join(', ')}` },
  ]);
}

/** One compiler per app: no module-level state. */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  // Fastify's own defaults: coerce path/query strings, fill defaults, drop unknown query keys.
  const ajv = new Ajv({ coerceTypes: 'array', useDefaults: true, removeAdditional: true, allErrors: false });
  return ({ schema, httpPart }) => {
    const marker = httpPart === 'body' && isObject(schema) ? schema[BODY_KIND_KEYWORD] : undefined;
    if (typeof marker === 'string') {
      return (data: unknown) => {
        try {
          const kind = marker === '*' ? bodyKind(data) : (marker as KindName);
          return { value: validateBody(kind, data) };
        } catch (error) {
          return { error: error as Error };
        }
      };
    }
    return compiledOnFirstUse(ajv, schema as object);
  };
}

/**
 * Fastify compiles every route's schemas while the app starts; compiling each one when its route is
 * first called takes that work off the start (most routes of a local start are never called).
 */
function compiledOnFirstUse(ajv: Ajv, schema: object): (data: unknown) => boolean {
  let compiled: ValidateFunction | undefined;
  const validate = (data: unknown): boolean => {
    compiled ??= ajv.compile(schema);
    const valid = compiled(data);
    // Fastify reads a failed validation's errors from the function it was given.
    validate.errors = compiled.errors;
    return valid;
  };
  validate.errors = undefined as ValidateFunction['errors'];
  return validate;
}
