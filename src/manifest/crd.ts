/**
 * CustomResourceDefinitions generated from the one schema per kind. crds/ holds the output, checked
 * in; a test fails when the two drift.
 */
import { stringify } from 'yaml';
import { API_GROUP, API_VERSION_NAME, KINDS, type KindName } from '../core/schemas.js';

interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'boolean' | 'date';
  jsonPath: string;
  priority?: number;
  description?: string;
}

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const READY: PrinterColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};

const PRINTER_COLUMNS: Record<KindName, PrinterColumn[]> = {
  GitSource: [
    { name: 'URL', type: 'string', jsonPath: '.spec.url' },
    { name: 'Branch', type: 'string', jsonPath: '.spec.branch' },
    { name: 'Commit', type: 'string', jsonPath: '.status.shortCommit' },
    READY,
    AGE,
    {
      name: 'Status',
      type: 'string',
      jsonPath: '.status.conditions[?(@.type=="Ready")].message',
      priority: 1,
    },
  ],
  Function: [
    { name: 'Runtime', type: 'string', jsonPath: '.spec.runtime' },
    { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
    { name: 'Commit', type: 'string', jsonPath: '.status.shortCommit' },
    { name: 'URL', type: 'string', jsonPath: '.status.url' },
    { name: 'Instances', type: 'integer', jsonPath: '.status.instances.ready' },
    AGE,
    { name: 'Desired', type: 'integer', jsonPath: '.status.instances.desired', priority: 1 },
    { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas', priority: 1 },
    { name: 'Image', type: 'string', jsonPath: '.status.image', priority: 1 },
  ],
  Trigger: [
    { name: 'Type', type: 'string', jsonPath: '.spec.type' },
    { name: 'Function', type: 'string', jsonPath: '.spec.function' },
    { name: 'Schedule', type: 'string', jsonPath: '.spec.schedule' },
    { name: 'Enabled', type: 'boolean', jsonPath: '.spec.enabled' },
    { name: 'Last Run', type: 'date', jsonPath: '.status.lastRun' },
    AGE,
  ],
  FunctionJob: [
    { name: 'Function', type: 'string', jsonPath: '.spec.function' },
    { name: 'Run', type: 'integer', jsonPath: '.spec.runId' },
    { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
    { name: 'Exit', type: 'integer', jsonPath: '.status.exitCode' },
    AGE,
  ],
};

/** The API server owns apiVersion, kind and metadata; a CRD may not constrain them beyond `type`. */
function crdSchema(kind: KindName): Record<string, unknown> {
  const schema = KINDS[kind].schema;
  return {
    type: 'object',
    required: ['spec'],
    properties: {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      spec: schema.properties.spec,
      status: schema.properties.status,
    },
  };
}

export function generateCrd(kind: KindName): Record<string, unknown> {
  const info = KINDS[kind];
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${info.plural}.${API_GROUP}` },
    spec: {
      group: API_GROUP,
      names: {
        kind,
        listKind: `${kind}List`,
        plural: info.plural,
        singular: info.singular,
        shortNames: [...info.shortNames],
        categories: ['sless'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: API_VERSION_NAME,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: crdSchema(kind) },
          subresources: { status: {} },
          additionalPrinterColumns: PRINTER_COLUMNS[kind],
        },
      ],
    },
  };
}

export function crdFileName(kind: KindName): string {
  return `${API_GROUP}_${KINDS[kind].plural}.yaml`;
}

export function renderCrd(kind: KindName): string {
  return `# Generated from src/core/schemas.ts by \`npm run crds\`. Do not edit.\n${stringify(generateCrd(kind), { lineWidth: 0 })}`;
}
