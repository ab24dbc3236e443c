/** Git sources on Kubernetes: a GitSource's secretRef names a Secret in its own namespace. */
import { join } from 'node:path';
import type { HttpClient } from 'isomorphic-git';
import { branchOf } from '../../core/defaults.js';
import { SourceError } from '../../core/errors.js';
import type { SourceReader, SourceReaderFactory } from '../../core/interfaces.js';
import type { GitSource } from '../../core/resources.js';
import { type GitCredentials, RemoteRepositoryReader } from '../../source/readers.js';
import type { KubeHttp } from './http.js';
import { getObject, type KubeObject } from './objects.js';
import { SECRET } from './resource-types.js';

export class KubeSourceReaderFactory implements SourceReaderFactory {
  private readonly http: KubeHttp;
  private readonly cacheDir: string;
  private readonly gitHttp: HttpClient;

  /** `gitHttp` reaches git servers through the outbound policy; `http` is the Kubernetes API. */
  constructor(options: { http: KubeHttp; stateDir: string; gitHttp: HttpClient }) {
    this.http = options.http;
    this.cacheDir = join(options.stateDir, 'git-cache');
    this.gitHttp = options.gitHttp;
  }

  async create(source: GitSource): Promise<SourceReader> {
    const { url } = source.spec;
    if (!/^https?:\/\//.test(url))
      throw new SourceError(
        `url "${url}": the controller reads remote repositories over http(s) only`,
        'InvalidURL',
      );
    const secretName = source.spec.secretRef?.name;
    const credentials = secretName
      ? await this.credentials(source.metadata.namespace, secretName)
      : undefined;
    return new RemoteRepositoryReader({
      url,
      branch: branchOf(source),
      cacheDir: join(this.cacheDir, source.metadata.namespace, source.metadata.name),
      http: this.gitHttp,
      ...(credentials ? { credentials } : {}),
    });
  }

  /** Keys `username` + `password`, or `token` (username x-access-token). */
  private async credentials(namespace: string, name: string): Promise<GitCredentials> {
    const secret = await getObject<KubeObject & { data?: Record<string, string> }>(
      this.http,
      SECRET,
      namespace,
      name,
    );
    // Only the source's own namespace is ever read; the words are the same as local mode's.
    if (!secret)
      throw new SourceError(`secretRef "${name}": no such secret in ${namespace}`, 'SecretNotFound');
    const read = (key: string) => {
      const value = secret.data?.[key];
      return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
    };
    const password = read('password') ?? read('token');
    if (password === undefined)
      throw new SourceError(`secretRef "${name}": needs a "password" or "token" key`, 'SecretInvalid');
    return { username: read('username') ?? 'x-access-token', password };
  }
}
