/**
 * Test helpers that talk to a real registry with plain fetch, independently of the code under test:
 * push an image made of given tar layers and config (as Docker's v2 schema 2 manifest), pull one back
 * with its config and uncompressed layers, and read a tar's entries.
 */
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Parser } from 'tar';

const MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
const CONFIG = 'application/vnd.docker.container.image.v1+json';
const LAYER = 'application/vnd.docker.image.rootfs.diff.tar.gzip';

const sha = (bytes: Uint8Array) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

async function putBlob(
  url: string,
  repository: string,
  bytes: Uint8Array,
  headers: Record<string, string> = {},
): Promise<string> {
  const digest = sha(bytes);
  const started = await fetch(`${url}/v2/${repository}/blobs/uploads/`, { method: 'POST', headers });
  await started.arrayBuffer();
  const location = new URL(started.headers.get('location') ?? '', url);
  location.searchParams.set('digest', digest);
  const put = await fetch(location, { method: 'PUT', body: bytes, headers });
  await put.arrayBuffer();
  if (put.status !== 201) throw new Error(`blob upload: ${put.status}`);
  return digest;
}

export interface TestImage {
  manifest: {
    mediaType: string;
    config: { digest: string; size: number; mediaType: string };
    layers: { digest: string; size: number; mediaType: string }[];
  };
  config: Record<string, unknown> & {
    config?: Record<string, unknown>;
    rootfs: { type: string; diff_ids: string[] };
    history?: { created_by?: string; empty_layer?: boolean }[];
  };
  /** Uncompressed layer tars. */
  layers: Buffer[];
  digest: string;
}

/** Pushes an image of `layers` (uncompressed tars) and `config` (rootfs filled in); returns its digest. */
export async function pushTestImage(
  url: string,
  repository: string,
  tag: string,
  layers: Buffer[],
  config: Record<string, unknown>,
  /** Sent with every request (a registry that requires credentials). */
  headers: Record<string, string> = {},
): Promise<string> {
  const descriptors = [];
  for (const tar of layers) {
    const blob = gzipSync(tar);
    descriptors.push({
      mediaType: LAYER,
      size: blob.length,
      digest: await putBlob(url, repository, blob, headers),
    });
  }
  const configBytes = Buffer.from(
    JSON.stringify({ ...config, rootfs: { type: 'layers', diff_ids: layers.map(sha) } }),
  );
  const configDigest = await putBlob(url, repository, configBytes, headers);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MANIFEST,
      config: { mediaType: CONFIG, size: configBytes.length, digest: configDigest },
      layers: descriptors,
    }),
  );
  const res = await fetch(`${url}/v2/${repository}/manifests/${tag}`, {
    method: 'PUT',
    headers: { ...headers, 'content-type': MANIFEST },
    body: manifest,
  });
  await res.arrayBuffer();
  if (res.status !== 201) throw new Error(`manifest PUT: ${res.status}`);
  return sha(manifest);
}

/** Pulls an image back by tag or digest, checking every digest on the way. */
export async function pullTestImage(
  url: string,
  repository: string,
  reference: string,
  headers: Record<string, string> = {},
): Promise<TestImage> {
  const res = await fetch(`${url}/v2/${repository}/manifests/${reference}`, {
    headers: { ...headers, accept: `${MANIFEST}, application/vnd.oci.image.manifest.v1+json` },
  });
  if (!res.ok) throw new Error(`no manifest ${repository}:${reference} (${res.status})`);
  const bytes = Buffer.from(await res.arrayBuffer());
  const manifest = JSON.parse(bytes.toString('utf8')) as TestImage['manifest'];
  const blob = async (digest: string) => {
    const r = await fetch(`${url}/v2/${repository}/blobs/${digest}`, { headers });
    if (!r.ok) throw new Error(`no blob ${digest} (${r.status})`);
    const b = Buffer.from(await r.arrayBuffer());
    if (sha(b) !== digest) throw new Error(`blob ${digest} has other content`);
    return b;
  };
  const config = JSON.parse((await blob(manifest.config.digest)).toString('utf8')) as TestImage['config'];
  const layers: Buffer[] = [];
  for (const layer of manifest.layers) layers.push(gunzipSync(await blob(layer.digest)));
  layers.forEach((tar, i) => {
    if (sha(tar) !== config.rootfs.diff_ids[i]) throw new Error(`layer ${i} does not match its diff_id`);
  });
  return { manifest, config, layers, digest: sha(bytes) };
}

export interface TarEntry {
  path: string;
  type: string;
  mode: number;
  uid: number;
  gid: number;
  linkpath?: string;
  content?: string;
}

/** The entries of an uncompressed tar, in archive order, with the content of regular files. */
export async function tarEntries(tar: Buffer): Promise<TarEntry[]> {
  const entries: TarEntry[] = [];
  const parser = new Parser({
    onReadEntry: (entry) => {
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      entry.on('end', () => {
        entries.push({
          path: entry.path,
          type: entry.type,
          mode: (entry.mode ?? 0) & 0o7777,
          uid: entry.uid ?? 0,
          gid: entry.gid ?? 0,
          ...(entry.linkpath ? { linkpath: entry.linkpath } : {}),
          ...(entry.type === 'File' ? { content: Buffer.concat(chunks).toString('utf8') } : {}),
        });
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('end', () => resolve());
    parser.on('error', reject);
    parser.end(tar);
  });
  return entries;
}
