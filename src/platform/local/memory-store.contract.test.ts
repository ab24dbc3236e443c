/** MemoryStore, the local platform's object store, held to the shared object-store contract. */
import { objectStoreContract } from '../../../test/helpers/store-contract.js';
import { MemoryStore } from './memory-store.js';

// The same contract KubeStore passes against the real API server (test/kube/store-contract.test.ts).
objectStoreContract('MemoryStore', async () => ({ store: new MemoryStore(), namespace: 'default' }));
