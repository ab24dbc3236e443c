/**
 * The single source of truth for every kind: ajv validates manifests and API bodies with these, the
 * CRDs in crds/ are generated from them, and the TypeScript types are derived from them.
 *
 * They stay inside the CRD dialect (OpenAPI 3.0 subset): a `type` on every level, no `$ref`, no
 * `const`, no `additionalProperties: false`. Strictness for manifests is added when compiling for ajv.
 */
import type { FromSchema } from 'json-schema-to-ts';
import { DNS_LABEL_PATTERN } from './naming.js';

export const API_GROUP = 'sless.dev';
export const API_VERSION_NAME = 'v1alpha1';
export const API_VERSION = `${API_GROUP}/${API_VERSION_NAME}`;

export const RUNTIMES = [
  'nodejs20',
  'python3.11',
  'go1.21',
  'nodejs22',
  'nodejs24',
  'python3.12',
  'python3.13',
  'go1.25',
  'go1.26',
  'go1.27',
] as const;
export type RuntimeName = (typeof RUNTIMES)[number];

const nameField = { type: 'string', minLength: 1, maxLength: 63, pattern: DNS_LABEL_PATTERN } as const;

const stringMap = { type: 'object', additionalProperties: { type: 'string' } } as const;

const metadataSchema = {
  type: 'object',
  required: ['name'],
  properties: {
    name: nameField,
    namespace: nameField,
    labels: stringMap,
    annotations: stringMap,
  },
} as const;

export const functionSpecSchema = {
  type: 'object',
  required: ['runtime', 'entrypoint'],
  properties: {
    runtime: { type: 'string', enum: [...RUNTIMES] },
    entrypoint: {
      type: 'string',
      minLength: 3,
      maxLength: 253,
      pattern: '^[A-Za-z0-9_][A-Za-z0-9_/-]*(\\.[A-Za-z0-9_-]+)*\\.[A-Za-z_][A-Za-z0-9_]*$',
    },
    memoryMb: { type: 'integer', minimum: 1, maximum: 4096, default: 128 },
    timeoutSec: { type: 'integer', minimum: 1, maximum: 900, default: 30 },
    /**
     * A value is a string, or `{ secretRef: { name, key } }`: a key of a secret in the function's own
     * namespace. The CRD dialect has no "string or object", so the schema leaves the value free and
     * manifest validation (validate.ts, semanticIssues) checks its shape; the type is FunctionEnv.
     */
    env: {
      type: 'object',
      additionalProperties: { 'x-kubernetes-preserve-unknown-fields': true },
    },
    /** Secrets of the function's namespace mounted read-only as files, one file per key. */
    secrets: {
      type: 'array',
      maxItems: 16,
      items: {
        type: 'object',
        required: ['name', 'mountPath'],
        properties: {
          name: nameField,
          mountPath: { type: 'string', minLength: 2, maxLength: 256, pattern: '^/[A-Za-z0-9._/-]+$' },
        },
      },
    },
    replicas: { type: 'integer', minimum: 0, maximum: 100, default: 1 },
    source: {
      type: 'object',
      properties: { path: { type: 'string', minLength: 1, maxLength: 1024, default: '.' } },
    },
    scaleToZero: {
      type: 'object',
      required: ['idleSeconds'],
      properties: {
        idleSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
        // How long a request for the function at zero waits for it to start before a 503; the
        // controller's SLESS_ACTIVATION_TIMEOUT when absent.
        activationTimeoutSec: { type: 'integer', minimum: 1, maximum: 900 },
      },
    },
    // Concurrency-based autoscaling: replicas follow the in-flight requests the proxies count.
    scale: {
      type: 'object',
      properties: {
        min: { type: 'integer', minimum: 0, maximum: 100 },
        max: { type: 'integer', minimum: 1, maximum: 100 },
        // In-flight requests per instance the autoscaler aims at.
        target: { type: 'integer', minimum: 1, maximum: 1000 },
        // The window the stable decision averages over; a panic window a tenth as long reacts to bursts.
        stableWindowSec: { type: 'integer', minimum: 6, maximum: 3600 },
        // The most requests one instance serves at once; the proxy queues the next ones. Absent: no limit.
        concurrency: { type: 'integer', minimum: 1, maximum: 1000 },
        // Requests that may wait for a free instance, per function and proxy; beyond them a 503 at once.
        // Absent: ten times concurrency × instances. Meaningless without concurrency.
        queue: { type: 'integer', minimum: 0, maximum: 10000 },
      },
    },
    // A new revision takes a share of requests per step, and is rolled back when its answers breach
    // a limit. Absent: a new revision takes all requests once it answers /healthz.
    rollout: {
      type: 'object',
      properties: {
        canary: {
          type: 'object',
          required: ['steps'],
          properties: {
            steps: {
              type: 'array',
              minItems: 1,
              maxItems: 10,
              items: { type: 'integer', minimum: 1, maximum: 99 },
            },
            stepSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
            maxErrorRate: { type: 'number', minimum: 0, maximum: 1 },
            maxP99Ms: { type: 'integer', minimum: 1, maximum: 900000 },
            minRequests: { type: 'integer', minimum: 1, maximum: 100000 },
          },
        },
      },
    },
    // Asynchronous invocations (Prefer: respond-async, /fn-async/): retries and their concurrency.
    async: {
      type: 'object',
      properties: {
        // Attempts before an invocation is dead-lettered (a 5xx, a timeout, no answer); default 3.
        maxAttempts: { type: 'integer', minimum: 1, maximum: 100 },
        // The first retry's delay; each next one doubles (with jitter, at most 10 minutes); default 1000.
        backoffMs: { type: 'integer', minimum: 10, maximum: 600000 },
        // Attempts of this function in flight at once; default 4.
        concurrency: { type: 'integer', minimum: 1, maximum: 1000 },
      },
    },
  },
} as const;

export const triggerSpecSchema = {
  type: 'object',
  required: ['type', 'function'],
  properties: {
    type: { type: 'string', enum: ['http', 'cron', 'amqp'] },
    function: nameField,
    schedule: { type: 'string', minLength: 1, maxLength: 128 },
    timezone: { type: 'string', minLength: 1, maxLength: 64 },
    event: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    enabled: { type: 'boolean', default: true },
    // amqp: the RabbitMQ queue consumed, optionally bound to an exchange with a routing key.
    queue: { type: 'string', minLength: 1, maxLength: 255 },
    exchange: { type: 'string', minLength: 1, maxLength: 255 },
    routingKey: { type: 'string', maxLength: 255 },
    // A secret of the Trigger's namespace whose key (default `url`) holds the amqp:// URL.
    secretRef: {
      type: 'object',
      required: ['name'],
      properties: { name: nameField, key: { type: 'string', minLength: 1, maxLength: 253 } },
    },
    // Deliveries of one message before it is dead-lettered (or dropped); default 3.
    maxAttempts: { type: 'integer', minimum: 1, maximum: 100 },
    // Where a message that failed every attempt is published; absent: rejected without requeue.
    deadLetterExchange: { type: 'string', minLength: 1, maxLength: 255 },
    // Unacknowledged messages in flight at once; default 8.
    prefetch: { type: 'integer', minimum: 1, maximum: 1000 },
  },
} as const;

export const functionJobSpecSchema = {
  type: 'object',
  required: ['function'],
  properties: {
    function: nameField,
    event: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    runId: { type: 'integer', minimum: 0, default: 0 },
  },
} as const;

export const gitSourceSpecSchema = {
  type: 'object',
  required: ['url'],
  properties: {
    url: { type: 'string', minLength: 1, maxLength: 2048 },
    branch: { type: 'string', minLength: 1, maxLength: 255, default: 'main' },
    path: { type: 'string', minLength: 1, maxLength: 1024, default: '.' },
    interval: { type: 'string', pattern: '^[0-9]+(ms|s|m|h)$', default: '1m' },
    secretRef: { type: 'object', required: ['name'], properties: { name: nameField } },
    suspend: { type: 'boolean', default: false },
    /** Pins the source to one commit of the branch (instant rollback: its builds already exist). */
    ref: {
      type: 'object',
      properties: { commit: { type: 'string', pattern: '^[0-9a-f]{40}$' } },
    },
    /**
     * A preview per matching branch: its Functions serve at `/fn/{ns}/{name}@{label}`, sharing builds
     * with the main branch by build key, and at rest after idleSeconds without a request.
     */
    previews: {
      type: 'object',
      required: ['branches'],
      properties: {
        branches: {
          type: 'array',
          minItems: 1,
          maxItems: 32,
          items: { type: 'string', minLength: 1, maxLength: 255 },
        },
        idleSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
      },
    },
    /** Posts each synced commit's deploy status to the git host, with the secretRef's token. */
    commitStatus: {
      type: 'object',
      required: ['provider'],
      properties: {
        provider: { type: 'string', enum: ['github', 'gitlab', 'gitea'] },
        apiUrl: { type: 'string', pattern: '^https?://', maxLength: 2048 },
        context: { type: 'string', minLength: 1, maxLength: 255 },
      },
    },
  },
} as const;

function resourceSchema<K extends string, S extends object>(kind: K, spec: S) {
  return {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      apiVersion: { type: 'string', enum: [API_VERSION] },
      kind: { type: 'string', enum: [kind] },
      metadata: metadataSchema,
      spec,
      status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    },
  } as const;
}

export const functionSchema = resourceSchema('Function', functionSpecSchema);
export const triggerSchema = resourceSchema('Trigger', triggerSpecSchema);
export const functionJobSchema = resourceSchema('FunctionJob', functionJobSpecSchema);
export const gitSourceSchema = resourceSchema('GitSource', gitSourceSpecSchema);

/** A key of a secret in the function's own namespace. */
export interface SecretKeyRef {
  name: string;
  key: string;
}
/** One `spec.env` value: a plain string, or a reference to a secret's key. */
export type EnvValue = string | { secretRef: SecretKeyRef };
/** The schema as FromSchema reads it: its JSONSchema type has no room for the free env value. */
const functionSpecTyping = {
  ...functionSpecSchema,
  properties: { ...functionSpecSchema.properties, env: { type: 'object' } },
} as const;
export type FunctionSpec = FromSchema<typeof functionSpecTyping> & {
  env?: Record<string, EnvValue>;
};
export type TriggerSpec = FromSchema<typeof triggerSpecSchema>;
export type FunctionJobSpec = FromSchema<typeof functionJobSpecSchema>;
export type GitSourceSpec = FromSchema<typeof gitSourceSpecSchema>;
export type ObjectMetadata = FromSchema<typeof metadataSchema>;

export const KINDS = {
  GitSource: { schema: gitSourceSchema, plural: 'gitsources', singular: 'gitsource', shortNames: ['gs'] },
  Function: { schema: functionSchema, plural: 'functions', singular: 'function', shortNames: ['fn', 'fns'] },
  Trigger: { schema: triggerSchema, plural: 'triggers', singular: 'trigger', shortNames: ['trg'] },
  FunctionJob: {
    schema: functionJobSchema,
    plural: 'functionjobs',
    singular: 'functionjob',
    shortNames: ['fjob'],
  },
} as const;

export type KindName = keyof typeof KINDS;
export const KIND_NAMES = Object.keys(KINDS) as KindName[];
/** The kinds a repository may hold; GitSources are registered through the API or kubectl. */
export const REPO_KINDS: readonly KindName[] = ['Function', 'Trigger', 'FunctionJob'];
