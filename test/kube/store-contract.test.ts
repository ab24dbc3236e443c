/** The ObjectStore contract MemoryStore passes, run against KubeStore on the real API server. */
import { afterAll, beforeAll } from 'vitest';
import { KubeStore } from '../../src/platform/kube/kube-store.js';
import { objectStoreContract } from '../helpers/store-contract.js';
import { createNamespace, type KubeEnv, kubeEnv, logger, suffix } from './harness.js';

let env: KubeEnv;
const stores: KubeStore[] = [];
beforeAll(async () => {
  env = await kubeEnv('contract');
});
afterAll(async () => {
  for (const store of stores) store.stop();
  await env?.close();
});

objectStoreContract('KubeStore', async () => {
  // A namespace per test, watched by a store of its own, so no test sees another's objects.
  const namespace = `contract-${suffix()}`;
  await createNamespace(env.http, namespace);
  const store = new KubeStore({ http: env.http, logger, namespaces: [namespace] });
  stores.push(store);
  return { store, namespace };
});
