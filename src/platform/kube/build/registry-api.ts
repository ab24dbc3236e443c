/**
 * Reads and writes images through an OCI distribution registry's HTTP API (Docker's registry API
 * v2): manifests and blobs by digest, blob uploads (POST then one PUT with the digest) and a manifest
 * PUT under a tag. Every blob read is checked against its digest, so a registry or a proxy that
 * hands back other bytes is caught here, before those bytes become part of a new image.
 */
import { createHash } from 'node:crypto';
import { authorizationFor, type RegistryCredentials } from './registry-client.js';

export const MANIFEST_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
] as const;

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

export interface ImageManifest {
  schemaVersion: number;
  mediaType?: string;
  config: Descriptor;
  layers: Descriptor[];
  annotations?: Record<string, string>;
}

export interface FetchedManifest {
  manifest: ImageManifest;
  mediaType: string;
  digest: string;
}

/** A registry answer that is not what the API promises, or a refusal; says which request it was. */
export class RegistryError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.name = 'RegistryError';
    this.status = status;
  }
}

export const digestOf = (bytes: Uint8Array): string =>
  `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

const DIGEST = /^sha256:[0-9a-f]{64}$/;
/** Manifests and configs are small; more than this is not an image sless made. */
const MAX_METADATA_BYTES = 4 * 1024 * 1024;

export interface RegistryApiOptions {
  /** host[:port] */
  host: string;
  insecure: boolean;
  credentials?: () => Promise<RegistryCredentials | undefined>;
  /** Per request; a registry that stops answering fails the fast path, which then falls back. */
  timeoutMs?: number;
}

export class RegistryApi {
  private readonly options: RegistryApiOptions;
  /** The last authorization the registry accepted, reused until it answers 401 again. */
  private authorization: string | undefined;

  constructor(options: RegistryApiOptions) {
    this.options = options;
  }

  private url(path: string): string {
    return `${this.options.insecure ? 'http' : 'https'}://${this.options.host}${path}`;
  }

  /** One request, with the push credentials when the registry asks for them (Basic or a token). */
  private async send(
    method: string,
    url: string,
    init: { headers?: Record<string, string>; body?: Uint8Array } = {},
  ): Promise<Response> {
    const attempt = (authorization: string | undefined) =>
      fetch(url, {
        method,
        headers: { ...init.headers, ...(authorization ? { authorization } : {}) },
        ...(init.body ? { body: init.body } : {}),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 60_000),
      });
    let response = await attempt(this.authorization);
    if (response.status !== 401) return response;
    await response.body?.cancel();
    const authorization = await authorizationFor(
      response.headers.get('www-authenticate') ?? '',
      await this.options.credentials?.(),
    );
    if (!authorization) throw new RegistryError(`registry ${this.options.host} refused ${method} (401)`, 401);
    response = await attempt(authorization);
    if (response.status !== 401) this.authorization = authorization;
    return response;
  }

  private async fail(response: Response, what: string): Promise<never> {
    const text = (await response.text().catch(() => '')).slice(0, 300);
    throw new RegistryError(
      `registry ${this.options.host} answered ${response.status} to ${what}${text ? `: ${text}` : ''}`,
      response.status,
    );
  }

  /** The manifest at a tag or digest; undefined when the registry has none. */
  async manifest(repository: string, reference: string): Promise<FetchedManifest | undefined> {
    const response = await this.send('GET', this.url(`/v2/${repository}/manifests/${reference}`), {
      headers: { accept: MANIFEST_TYPES.join(', ') },
    });
    if (response.status === 404) {
      await response.body?.cancel();
      return undefined;
    }
    if (!response.ok) return this.fail(response, `GET manifest ${repository}:${reference}`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (bytes.length > MAX_METADATA_BYTES)
      throw new RegistryError(`manifest ${repository}@${reference} is over ${MAX_METADATA_BYTES} bytes`);
    const digest = digestOf(bytes);
    if (DIGEST.test(reference) && digest !== reference)
      throw new RegistryError(`manifest ${repository}@${reference} came back with digest ${digest}`);
    let manifest: ImageManifest;
    try {
      manifest = JSON.parse(Buffer.from(bytes).toString('utf8')) as ImageManifest;
    } catch {
      throw new RegistryError(`manifest ${repository}@${reference} is not JSON`);
    }
    const mediaType = manifest.mediaType ?? response.headers.get('content-type') ?? '';
    if (!(MANIFEST_TYPES as readonly string[]).includes(mediaType))
      throw new RegistryError(
        `manifest ${repository}@${reference} is a ${mediaType || 'manifest of no type'}`,
      );
    if (!manifest.config || !Array.isArray(manifest.layers))
      throw new RegistryError(`manifest ${repository}@${reference} has no config or layers`);
    return { manifest, mediaType, digest };
  }

  /** A small blob (an image config), checked against its digest. */
  async blob(repository: string, digest: string): Promise<Uint8Array> {
    const response = await this.send('GET', this.url(`/v2/${repository}/blobs/${digest}`));
    if (!response.ok) return this.fail(response, `GET blob ${repository}@${digest}`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (bytes.length > MAX_METADATA_BYTES)
      throw new RegistryError(`blob ${repository}@${digest} is over ${MAX_METADATA_BYTES} bytes`);
    if (digestOf(bytes) !== digest)
      throw new RegistryError(`blob ${repository}@${digest} came back with other content`);
    return bytes;
  }

  async hasBlob(repository: string, digest: string): Promise<boolean> {
    const response = await this.send('HEAD', this.url(`/v2/${repository}/blobs/${digest}`));
    await response.body?.cancel();
    if (response.status === 404) return false;
    if (!response.ok) return this.fail(response, `HEAD blob ${repository}@${digest}`);
    return true;
  }

  /** Uploads a blob unless the repository has it: one POST, one PUT with the whole content. */
  async pushBlob(repository: string, bytes: Uint8Array, digest = digestOf(bytes)): Promise<string> {
    if (await this.hasBlob(repository, digest)) return digest;
    const started = await this.send('POST', this.url(`/v2/${repository}/blobs/uploads/`));
    await started.body?.cancel();
    const location = started.headers.get('location');
    if (started.status !== 202 || !location) return this.fail(started, `POST blob upload to ${repository}`);
    const target = new URL(location, this.url('/'));
    target.searchParams.set('digest', digest);
    const put = await this.send('PUT', target.toString(), {
      headers: { 'content-type': 'application/octet-stream' },
      body: bytes,
    });
    await put.body?.cancel();
    if (put.status !== 201) return this.fail(put, `PUT blob ${repository}@${digest}`);
    return digest;
  }

  /** PUTs a manifest under `tag`; returns its digest, as the registry computed it too. */
  async putManifest(repository: string, tag: string, bytes: Uint8Array, mediaType: string): Promise<string> {
    const response = await this.send('PUT', this.url(`/v2/${repository}/manifests/${tag}`), {
      headers: { 'content-type': mediaType },
      body: bytes,
    });
    await response.body?.cancel();
    if (response.status !== 201) return this.fail(response, `PUT manifest ${repository}:${tag}`);
    const digest = digestOf(bytes);
    const reported = response.headers.get('docker-content-digest');
    if (reported && reported !== digest)
      throw new RegistryError(`registry stored manifest ${repository}:${tag} as ${reported}, not ${digest}`);
    return digest;
  }
}
