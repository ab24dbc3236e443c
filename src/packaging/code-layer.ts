/**
 * The code layer of a function image: the function's files at one commit, read from git objects as
 * the build context reads them (manifests and links out of the function's directory excluded, modes
 * normalised to 755/644, a fixed mtime), laid out where the image's `COPY code/ /sless/code/` puts
 * them and owned as kaniko leaves them, as a deterministic tar and its gzip. The same tree gives the
 * same bytes and digests.
 */
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { create as createTar, Header } from 'tar';
import type { SourceSnapshot } from '../core/interfaces.js';
import { OwnedTempDirs } from '../core/owned-temp-dirs.js';
import { FIXED_MTIME, walk } from './build-context.js';
import { INSTALL_UID } from './install-step.js';
import { materializeFunction } from './materialize.js';

/** Where the image keeps the function's code (the kaniko Dockerfile's WORKDIR and COPY target). */
export const CODE_ROOT = 'sless/code';

export interface CodeLayer {
  /** The layer as stored in the registry (gzip). */
  blob: Buffer;
  /** sha256 of `blob`: the layer's descriptor digest. */
  digest: string;
  /** sha256 of the uncompressed tar: the image config's diff_id. */
  diffId: string;
  /** Entry paths in archive order (directories end with '/'). */
  entries: string[];
}

let stagingDirs: OwnedTempDirs | undefined;

const sha256 = (bytes: Uint8Array) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

export async function createCodeLayer(options: {
  snapshot: SourceSnapshot;
  codeDir: string;
  excludedFiles: ReadonlySet<string>;
}): Promise<CodeLayer> {
  stagingDirs ??= new OwnedTempDirs('sless-code-layer-');
  const staging = await stagingDirs.create();
  try {
    await mkdir(join(staging, CODE_ROOT), { recursive: true });
    await materializeFunction({
      snapshot: options.snapshot,
      codeDir: options.codeDir,
      excludedFiles: options.excludedFiles,
      target: join(staging, CODE_ROOT),
    });
    const entries = await walk(staging, '');
    const stream = createTar(
      { cwd: staging, portable: true, mtime: FIXED_MTIME, noDirRecurse: true },
      entries,
    );
    const chunks: Buffer[] = [];
    for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(Buffer.from(chunk));
    const tar = ownAsKanikoDoes(Buffer.concat(chunks));
    const blob = gzipSync(tar, { level: 6 });
    return { blob, digest: sha256(blob), diffId: sha256(tar), entries };
  } finally {
    await stagingDirs.remove(staging);
  }
}

/**
 * Gives the code's entries the owner and modes kaniko's COPY of the install step's workspace gives
 * them (see INSTALL_UID): the install uid and gid, and setgid directories. `sless/` itself comes
 * from the Dockerfile's WORKDIR, root's.
 */
function ownAsKanikoDoes(tar: Buffer): Buffer {
  const out = Buffer.from(tar);
  for (let offset = 0; offset + 512 <= out.length; ) {
    const block = out.subarray(offset, offset + 512);
    if (block.every((b) => b === 0)) break;
    const header = new Header(block);
    const size = header.size ?? 0;
    const meta = header.type === 'ExtendedHeader' || header.type === 'GlobalExtendedHeader';
    if (!meta && header.path?.startsWith(`${CODE_ROOT}/`)) {
      header.uid = INSTALL_UID;
      header.gid = INSTALL_UID;
      if (header.type === 'Directory') header.mode = (header.mode ?? 0o755) | 0o2000;
      header.encode(out, offset);
    }
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}
