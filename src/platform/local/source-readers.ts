/**
 * Local mode's source readers: a GitSource's URL becomes a reader of a repository on this machine
 * or of a remote one, and its `secretRef` is resolved from namespaced environment variables, since
 * local mode keeps no Secret objects.
 */
import { join } from 'node:path';
import type { HttpClient } from 'isomorphic-git';
import { branchOf } from '../../core/defaults.js';
import { SourceError } from '../../core/errors.js';
import type { SourceReader, SourceReaderFactory } from '../../core/interfaces.js';
import { scopedEnvSuffix } from '../../core/naming.js';
import type { GitSource } from '../../core/resources.js';
import { type GitCredentials, LocalRepositoryReader, RemoteRepositoryReader } from '../../source/readers.js';

/**
 * Local mode keeps no Secret objects: a GitSource's `secretRef: {name: x}` in namespace `ns` reads
 * SLESS_SECRET_<NS>__<X>_TOKEN (or _USERNAME and _PASSWORD), upper case with `-` written as `_`. The
 * namespace is part of the variable, so a tenant can only ever name its own namespace's secrets.
 */
export function credentialsFromEnv(
  namespace: string,
  name: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): GitCredentials | undefined {
  const suffix = scopedEnvSuffix(namespace, name);
  if (suffix === undefined) return undefined;
  const prefix = `SLESS_SECRET_${suffix}_`;
  const token = env[`${prefix}TOKEN`];
  const password = env[`${prefix}PASSWORD`] ?? token;
  if (password === undefined || password === '') return undefined;
  return { username: env[`${prefix}USERNAME`] ?? 'x-access-token', password };
}

export class LocalSourceReaderFactory implements SourceReaderFactory {
  private readonly cacheDir: string;
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly http: HttpClient;
  constructor(options: {
    stateDir: string;
    http: HttpClient;
    /** Where SLESS_SECRET_* come from (the config's copy); the process environment by default. */
    env?: Readonly<Record<string, string | undefined>>;
  }) {
    this.cacheDir = join(options.stateDir, 'git-cache');
    this.http = options.http;
    this.env = options.env ?? process.env;
  }

  async create(source: GitSource): Promise<SourceReader> {
    const { url } = source.spec;
    const branch = branchOf(source);
    if (url.startsWith('/') || url.startsWith('file://')) {
      return new LocalRepositoryReader({ path: url.replace(/^file:\/\//, ''), branch });
    }
    const secretName = source.spec.secretRef?.name;
    const namespace = source.metadata.namespace;
    const credentials = secretName ? credentialsFromEnv(namespace, secretName, this.env) : undefined;
    // The same words whether or not the secret exists elsewhere: nothing to guess names with.
    if (secretName && !credentials)
      throw new SourceError(`secretRef "${secretName}": no such secret in ${namespace}`, 'SecretNotFound');
    return new RemoteRepositoryReader({
      url,
      branch,
      cacheDir: join(this.cacheDir, source.metadata.namespace),
      http: this.http,
      ...(credentials ? { credentials } : {}),
    });
  }
}
