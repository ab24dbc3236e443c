/**
 * The CRDs in crds/ are exactly what the schemas generate for each kind, and every generated schema
 * stays inside the structural dialect Kubernetes accepts (types everywhere, no $ref, oneOf and the like).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../config/config.js';
import { KIND_NAMES } from '../core/schemas.js';
import { crdFileName, generateCrd, renderCrd } from './crd.js';

/** Walks a schema and returns the paths of nodes that break the CRD dialect. */
function dialectProblems(node: unknown, path = ''): string[] {
  if (node === null || typeof node !== 'object') return [];
  const schema = node as Record<string, unknown>;
  const problems: string[] = [];
  // Kubernetes' structural schemas let a node that preserves unknown fields go without a type.
  if (!('type' in schema) && schema['x-kubernetes-preserve-unknown-fields'] !== true)
    problems.push(`${path}: no type`);
  for (const banned of ['$ref', 'const', 'oneOf', 'anyOf', 'allOf', 'if', 'then'])
    if (banned in schema) problems.push(`${path}: ${banned}`);
  if (schema.additionalProperties === false) problems.push(`${path}: additionalProperties false`);
  for (const [key, child] of Object.entries((schema.properties ?? {}) as Record<string, unknown>))
    problems.push(...dialectProblems(child, `${path}.${key}`));
  if (typeof schema.additionalProperties === 'object')
    problems.push(...dialectProblems(schema.additionalProperties, `${path}[*]`));
  return problems;
}

describe('CRDs', () => {
  it.each(KIND_NAMES)('crds/ holds exactly what the schema generates for %s', async (kind) => {
    const onDisk = await readFile(join(PACKAGE_ROOT, 'crds', crdFileName(kind)), 'utf8');
    expect(onDisk, 'run `npm run crds` to regenerate').toBe(renderCrd(kind));
    expect(parse(onDisk)).toEqual(generateCrd(kind));
  });

  it.each(KIND_NAMES)('the %s schema stays inside the CRD dialect', (kind) => {
    const crd = generateCrd(kind) as { spec: { versions: { schema: { openAPIV3Schema: unknown } }[] } };
    expect(dialectProblems(crd.spec.versions[0]?.schema.openAPIV3Schema)).toEqual([]);
  });
});
