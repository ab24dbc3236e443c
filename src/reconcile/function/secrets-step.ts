/**
 * The function reconciler's secrets step: every secret the Function references must be there, in
 * its own namespace, before anything rolls; their values' keyed hash joins the revision.
 */
import { createHash } from 'node:crypto';
import type { SlessFunction } from '../../core/resources.js';
import {
  describeMissing,
  hasSecretRefs,
  resolveSecrets,
  type SecretReader,
} from '../../secrets/references.js';

const NO_SECRETS: SecretReader = { get: async () => undefined };

export type SecretsStepResult =
  | { ok: true; hash: ''; configHash?: undefined }
  | { ok: true; hash: string; configHash: (base: string) => string }
  | { ok: false; message: string };

export async function secretsStep(
  deps: { secrets?: SecretReader },
  fn: SlessFunction,
  /** A disabled function runs nothing, so it needs no secret. */
  enabled: boolean,
): Promise<SecretsStepResult> {
  if (!enabled || !hasSecretRefs(fn)) return { ok: true, hash: '' };
  const resolution = await resolveSecrets(deps.secrets ?? NO_SECRETS, fn);
  if (!resolution.ok)
    return { ok: false, message: describeMissing(fn.metadata.namespace, resolution.missing) };
  const hash = resolution.hash;
  return {
    ok: true,
    hash,
    configHash: (base) => createHash('sha256').update(`${base}\0secrets\0${hash}`).digest('hex'),
  };
}
