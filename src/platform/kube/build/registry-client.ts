/**
 * Deletes images from an OCI distribution registry (Docker's registry API v2):
 * `DELETE /v2/<name>/manifests/<digest>`, which removes the manifest and every tag on it. Registries
 * refuse it unless their operator enabled deletes (distribution: `storage.delete.enabled: true`); the
 * blobs are reclaimed only by the registry's own garbage collection.
 */
import type { KubeHttp } from '../http.js';
import { getObject, type KubeObject } from '../objects.js';
import { SECRET } from '../resource-types.js';

export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface RegistryClientOptions {
  /** `host[:port][/path]`, as SLESS_REGISTRY. */
  registry: string;
  /** Plain HTTP instead of HTTPS (SLESS_REGISTRY_INSECURE). */
  insecure: boolean;
  /** The push credentials for this registry, read when needed (they may be rotated). */
  credentials?: () => Promise<RegistryCredentials | undefined>;
}

/** `host/repo/name:tag@sha256:…` → the repository name and digest the API wants. */
export function parseImage(image: string): { host: string; repository: string; digest: string } | undefined {
  const match = /^([^/]+)\/(.+?)(?::[\w][\w.-]{0,127})?@(sha256:[0-9a-f]{64})$/.exec(image);
  if (!match) return undefined;
  const [, host, repository, digest] = match as unknown as [string, string, string, string];
  return { host, repository, digest };
}

export class RegistryClient {
  private readonly options: RegistryClientOptions;

  constructor(options: RegistryClientOptions) {
    this.options = options;
  }

  private get host(): string {
    return this.options.registry.split('/')[0] ?? '';
  }

  /** Resolves `deleted`, or `absent` when the registry does not have it (already deleted). */
  async deleteImage(image: string): Promise<'deleted' | 'absent'> {
    const parsed = parseImage(image);
    if (!parsed || parsed.host !== this.host)
      throw new Error(`image ${image} is not in registry ${this.options.registry}`);
    const url = `${this.options.insecure ? 'http' : 'https'}://${parsed.host}/v2/${parsed.repository}/manifests/${parsed.digest}`;
    let response = await fetch(url, { method: 'DELETE' });
    if (response.status === 401) {
      const authorization = await this.authorize(response.headers.get('www-authenticate') ?? '');
      await response.body?.cancel();
      if (authorization) response = await fetch(url, { method: 'DELETE', headers: { authorization } });
    }
    await response.body?.cancel();
    if (response.status === 202 || response.status === 200) return 'deleted';
    if (response.status === 404) return 'absent';
    if (response.status === 405)
      throw new Error(
        `registry ${this.host} refuses deletes (405): enable them (distribution: storage.delete.enabled) or unset SLESS_REGISTRY_DELETE`,
      );
    throw new Error(
      `registry ${this.host} answered ${response.status} to deleting ${parsed.repository}@${parsed.digest}`,
    );
  }

  private async authorize(challenge: string): Promise<string | undefined> {
    return authorizationFor(challenge, await this.options.credentials?.());
  }
}

/** Basic auth, or the bearer token flow a challenge asks for, with the push credentials. */
export async function authorizationFor(
  challenge: string,
  credentials: RegistryCredentials | undefined,
): Promise<string | undefined> {
  if (!credentials) return undefined;
  const basic = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
  if (!/^bearer /i.test(challenge)) return basic;
  const params = Object.fromEntries(
    [...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']),
  );
  if (!params.realm) return undefined;
  const tokenUrl = new URL(params.realm);
  if (params.service) tokenUrl.searchParams.set('service', params.service);
  if (params.scope) tokenUrl.searchParams.set('scope', params.scope);
  const response = await fetch(tokenUrl, { headers: { authorization: basic } });
  if (!response.ok) {
    await response.body?.cancel();
    return undefined;
  }
  const body = (await response.json()) as { token?: string; access_token?: string };
  const token = body.token ?? body.access_token;
  return token ? `Bearer ${token}` : undefined;
}

/** The credentials for `registry`'s host in a dockerconfigjson Secret, if it holds them. */
export async function secretCredentials(
  http: KubeHttp,
  namespace: string,
  secretName: string,
  registry: string,
): Promise<RegistryCredentials | undefined> {
  const secret = await getObject<KubeObject & { data?: Record<string, string> }>(
    http,
    SECRET,
    namespace,
    secretName,
  );
  const encoded = secret?.data?.['.dockerconfigjson'];
  if (!encoded) return undefined;
  return credentialsFor(Buffer.from(encoded, 'base64').toString('utf8'), registry.split('/')[0] ?? '');
}

/** The credentials for `host` in a `.dockerconfigjson` document, if it has them. */
export function credentialsFor(dockerConfigJson: string, host: string): RegistryCredentials | undefined {
  const config = JSON.parse(dockerConfigJson) as {
    auths?: Record<string, { auth?: string; username?: string; password?: string }>;
  };
  const entry = config.auths?.[host] ?? config.auths?.[`https://${host}`] ?? config.auths?.[`http://${host}`];
  if (!entry) return undefined;
  if (entry.username !== undefined && entry.password !== undefined)
    return { username: entry.username, password: entry.password };
  if (!entry.auth) return undefined;
  const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
