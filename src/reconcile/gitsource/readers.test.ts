/**
 * SourceReaders.snapshotFor on a real git repository: a build leaves out the commit's manifest files
 * and its SOPS files, the same set whether the sync that planned it is still in memory or not (after a
 * restart it is not), so the build context and key do not depend on the controller's memory.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { functionManifest, gitSource, nodeHandler, TestRepo } from '../../../test/helpers/git.js';
import { ANNOTATION_COMMIT, LABEL_SOURCE, type SlessFunction } from '../../core/resources.js';
import { ParsedManifestCache } from '../../manifest/load.js';
import { SopsDecryptor } from '../../manifest/sops.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { RepoSecrets } from '../../secrets/repo-secrets.js';
import { LocalRepositoryReader } from '../../source/readers.js';
import { SourceReaders } from './readers.js';

/** What `sops --encrypt` leaves in a file: the values replaced, and a `sops` map with a `mac`. */
const SOPS_FILE = `apiVersion: v1
kind: Secret
metadata:
  name: payments
stringData:
  stripe: ENC[AES256_GCM,data:AAAA,iv:BBBB,tag:CCCC,type:str]
sops:
  mac: ENC[AES256_GCM,data:DDDD,iv:EEEE,tag:FFFF,type:str]
  version: 3.13.3
`;

let repo: TestRepo | undefined;
afterEach(async () => {
  await repo?.remove();
});

describe('SourceReaders.snapshotFor', () => {
  it('leaves the SOPS files out of a build after a restart as the planning sync did', async () => {
    repo = await TestRepo.create({
      'pay/function.yaml': functionManifest('pay'),
      'pay/handler.js': nodeHandler(`return 'pay';`),
      'pay/secret.sops.yaml': SOPS_FILE,
    });
    const store = new MemoryStore();
    const source = gitSource('repo', 'ns', repo.dir);
    await store.apply(source);
    const readers = new SourceReaders({
      factory: { create: async () => new LocalRepositoryReader({ path: repo?.dir ?? '', branch: 'main' }) },
      store,
      parsedManifests: new ParsedManifestCache(),
      wake: () => undefined,
      repoSecrets: new RepoSecrets({
        decryptor: new SopsDecryptor({ key: undefined }),
        sink: { reconcile: async () => undefined },
      }),
    });
    const reader = await readers.open(source);
    const commit = await reader.resolveHead();
    const fn = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: {
        name: 'pay',
        namespace: 'ns',
        labels: { [LABEL_SOURCE]: 'repo' },
        annotations: { [ANNOTATION_COMMIT]: commit },
      },
      spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 128, timeoutSec: 30 },
    } as unknown as SlessFunction;
    // Nothing remembered from a sync: the files are found again from the commit.
    const { manifestFiles } = await readers.snapshotFor(fn);
    expect([...manifestFiles].sort()).toEqual(['pay/function.yaml', 'pay/secret.sops.yaml']);
    await readers.closeAll();
  });
});
