import { join } from 'node:path';
import { SourceError } from '../../core/errors.js';
import type { SourceReader, SourceReaderFactory } from '../../core/interfaces.js';
import type { GitSource } from '../../core/resources.js';
import { type GitCredentials, LocalRepositoryReader, RemoteRepositoryReader } from '../../source/readers.js';

/**
 * Local mode keeps no Secret objects: a GitSource's `secretRef: {name: x}` reads the environment
 * variables SLESS_SECRET_X_USERNAME and SLESS_SECRET_X_PASSWORD (or _TOKEN).
 */
export function credentialsFromEnv(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): GitCredentials | undefined {
  const prefix = `SLESS_SECRET_${name.toUpperCase().replace(/-/g, '_')}_`;
  const token = env[`${prefix}TOKEN`];
  const password = env[`${prefix}PASSWORD`] ?? token;
  if (password === undefined) return undefined;
  return { username: env[`${prefix}USERNAME`] ?? 'x-access-token', password };
}

export class LocalSourceReaderFactory implements SourceReaderFactory {
  private readonly cacheDir: string;
  constructor(options: { stateDir: string }) {
    this.cacheDir = join(options.stateDir, 'git-cache');
  }

  async create(source: GitSource): Promise<SourceReader> {
    const { url } = source.spec;
    const branch = source.spec.branch ?? 'main';
    if (url.startsWith('/') || url.startsWith('file://')) {
      return new LocalRepositoryReader({ path: url.replace(/^file:\/\//, ''), branch });
    }
    const secretName = source.spec.secretRef?.name;
    const credentials = secretName ? credentialsFromEnv(secretName) : undefined;
    if (secretName && !credentials) {
      throw new SourceError(
        `secretRef "${secretName}": set SLESS_SECRET_${secretName.toUpperCase().replace(/-/g, '_')}_TOKEN`,
        'SecretNotFound',
      );
    }
    return new RemoteRepositoryReader({
      url,
      branch,
      cacheDir: this.cacheDir,
      ...(credentials ? { credentials } : {}),
    });
  }
}
