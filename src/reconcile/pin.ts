/**
 * Pinning a GitSource to a commit of its branch (instant rollback) and unpinning it. The pin is
 * `spec.ref.commit`, so it is the same whether set through the API, kubectl or a manifest; the API's
 * way checks the commit first, so a wrong one is refused at once instead of stalling the source.
 */

import { branchOf } from '../core/defaults.js';
import { BadRequestError, NotFoundError } from '../core/errors.js';
import type { ObjectStore, SourceReader } from '../core/interfaces.js';
import type { GitSource } from '../core/resources.js';

export interface PinDeps {
  store: ObjectStore;
  /** The open reader of a source (the controller's). */
  readerFor(source: GitSource): Promise<SourceReader>;
}

export async function setPin(
  deps: PinDeps,
  namespace: string,
  name: string,
  commit: string | undefined,
): Promise<GitSource> {
  const source = await deps.store.get('GitSource', namespace, name);
  if (!source) throw new NotFoundError(`GitSource ${namespace}/${name} not found`);
  if (commit !== undefined) {
    const reader = await deps.readerFor(source);
    const head = await reader.resolveHead();
    if (!(await reader.isOnBranch(commit, head)))
      throw new BadRequestError(
        `commit: ${commit} is not a commit of branch "${branchOf(source)}" of GitSource ${name}`,
      );
  }
  const { ref: _ref, ...spec } = source.spec;
  return (await deps.store.apply({
    apiVersion: source.apiVersion,
    kind: 'GitSource',
    metadata: {
      name,
      namespace,
      ...(source.metadata.labels ? { labels: source.metadata.labels } : {}),
      ...(source.metadata.annotations ? { annotations: source.metadata.annotations } : {}),
    },
    spec: commit === undefined ? spec : { ...spec, ref: { commit } },
  })) as GitSource;
}
