/**
 * The JSON Schemas of the API's routes. Resource bodies reuse the one schema per kind from
 * core/schemas.ts; `x-sless-kind` tells the validator compiler (validation.ts) to validate them with
 * the manifest validator, so API and manifest errors read the same.
 */
import { DNS_LABEL_PATTERN } from '../core/naming.js';
import { KINDS, type KindName } from '../core/schemas.js';

export const BODY_KIND_KEYWORD = 'x-sless-kind';

const label = { type: 'string', minLength: 1, maxLength: 63, pattern: DNS_LABEL_PATTERN } as const;

export const nsParams = {
  type: 'object',
  required: ['ns'],
  properties: { ns: label },
} as const;

export const nameParams = {
  type: 'object',
  required: ['ns', 'name'],
  properties: { ns: label, name: label },
} as const;

export const webhookParams = {
  type: 'object',
  required: ['ns', 'source'],
  properties: { ns: label, source: label },
} as const;

export const errorBody = {
  type: 'object',
  required: ['error'],
  properties: { error: { type: 'string' } },
} as const;

/** An open object: resources carry status the API does not restate. */
export const anyObject = { type: 'object', additionalProperties: true } as const;

export const listBody = {
  type: 'object',
  required: ['items'],
  properties: { items: { type: 'array', items: anyObject } },
} as const;

/** Error responses every `/v1` route may give; declared for the OpenAPI document. */
export function errorResponses(...codes: readonly number[]): Record<string, object> {
  const out: Record<string, object> = {};
  for (const code of codes) out[String(code)] = errorBody;
  return out;
}

/**
 * A resource body: the kind's full document, or the short `{name, spec}` form. Both are turned
 * into the full document before validation.
 */
export function resourceBody(kind: KindName) {
  const schema = KINDS[kind].schema;
  return {
    [BODY_KIND_KEYWORD]: kind,
    oneOf: [
      schema,
      {
        type: 'object',
        required: ['name', 'spec'],
        properties: {
          name: label,
          labels: schema.properties.metadata.properties.labels,
          spec: schema.properties.spec,
        },
      },
    ],
  };
}

/** Any kind, dispatched on `kind` (the dry-run validate route). */
export function anyResourceBody() {
  return {
    [BODY_KIND_KEYWORD]: '*',
    oneOf: Object.values(KINDS).map((k) => k.schema),
  };
}
