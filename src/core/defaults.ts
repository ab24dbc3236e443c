/**
 * The defaults of optional spec fields, read from the schemas that declare them. Manifests, API bodies
 * and the CRDs all apply the schema's defaults on the way in; code that reads a spec written before a
 * default existed (or built by hand) asks here, so each default has one source.
 */
import type { GitSource, SlessFunction } from './resources.js';
import { functionSpecSchema, gitSourceSpecSchema } from './schemas.js';

const fnProps = functionSpecSchema.properties;

export const DEFAULT_TIMEOUT_SEC: number = fnProps.timeoutSec.default;
export const DEFAULT_MEMORY_MB: number = fnProps.memoryMb.default;
export const DEFAULT_REPLICAS: number = fnProps.replicas.default;
export const DEFAULT_BRANCH: string = gitSourceSpecSchema.properties.branch.default;

type FunctionSpecOf = Pick<SlessFunction['spec'], 'timeoutSec' | 'memoryMb' | 'replicas'>;

/** How long one invocation may take, in seconds. */
export function timeoutSecOf(fn: { spec: FunctionSpecOf }): number {
  return fn.spec.timeoutSec ?? DEFAULT_TIMEOUT_SEC;
}

/** The memory limit of one instance, in MiB. */
export function memoryMbOf(fn: { spec: FunctionSpecOf }): number {
  return fn.spec.memoryMb ?? DEFAULT_MEMORY_MB;
}

/** The instances a function runs when it is not scaled by load or to zero. */
export function replicasOf(fn: { spec: FunctionSpecOf }): number {
  return fn.spec.replicas ?? DEFAULT_REPLICAS;
}

/** The branch a source follows. */
export function branchOf(source: { spec: Pick<GitSource['spec'], 'branch'> }): string {
  return source.spec.branch ?? DEFAULT_BRANCH;
}
