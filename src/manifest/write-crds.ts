/**
 * The `npm run crds` script: writes the CustomResourceDefinitions under crds/ from the same schemas
 * the API and the controller validate with, so the cluster's CRDs never drift from the code.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../config/config.js';
import { KIND_NAMES } from '../core/schemas.js';
import { crdFileName, renderCrd } from './crd.js';

for (const kind of KIND_NAMES) {
  const path = join(PACKAGE_ROOT, 'crds', crdFileName(kind));
  await writeFile(path, renderCrd(kind));
  process.stdout.write(`wrote ${path}\n`);
}
