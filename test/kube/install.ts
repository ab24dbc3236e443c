// Installs sless's CRDs and namespaces on a test API server. No vitest here: benchmarks use it too.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { PACKAGE_ROOT } from '../../src/config/config.js';
import type { KubeHttp } from '../../src/platform/kube/http.js';
import { apply, type KubeObject } from '../../src/platform/kube/objects.js';
import { NAMESPACE } from '../../src/platform/kube/resource-types.js';

export async function installCrds(http: KubeHttp): Promise<void> {
  const dir = join(PACKAGE_ROOT, 'crds');
  for (const file of (await readdir(dir)).filter((f) => f.startsWith('sless.dev_')).sort()) {
    const crd = parse(await readFile(join(dir, file), 'utf8')) as KubeObject;
    await http.request(
      'PATCH',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`,
      {
        query: { fieldManager: 'sless-test-install', force: true },
        body: crd,
        contentType: 'application/apply-patch+yaml',
      },
    );
  }
  // A new CRD is served a moment after it is created.
  for (const plural of ['functions', 'gitsources', 'triggers', 'functionjobs']) {
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await http.request('GET', `/apis/sless.dev/v1alpha1/${plural}`, { query: { limit: 1 } });
        break;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`CRD ${plural} not served after 20 s: ${(error as Error).message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

export async function createNamespace(http: KubeHttp, name: string): Promise<void> {
  await apply(http, NAMESPACE, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
}
