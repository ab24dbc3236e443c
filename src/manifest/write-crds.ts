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
