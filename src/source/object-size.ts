/**
 * The size of a git object, read from its header without inflating its content. isomorphic-git
 * inflates a whole blob to read it, so a 300 MB blob that compresses to 1.6 MB would cost 300 MB of
 * memory before any size check could run. Loose objects keep the size in the first inflated bytes
 * ("blob 123\0"); packed ones in the entry header (and, for deltas, at the start of the delta).
 */
import { open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { constants, inflateSync } from 'node:zlib';

const OFS_DELTA = 6;
const REF_DELTA = 7;
/** Compressed bytes inflated to reach a header: a header is tiny, so this is plenty. */
const PEEK = 512;

/** Inflates only the start of a zlib stream. */
function inflatePrefix(compressed: Buffer): Buffer {
  return inflateSync(compressed.subarray(0, PEEK), {
    finishFlush: constants.Z_SYNC_FLUSH,
    // Deflate expands at most ~1032:1, so PEEK compressed bytes stay well under this.
    maxOutputLength: 1024 * 1024,
  });
}

/** Git's little-endian base-128 size, as at the start of a delta. */
function deltaSize(bytes: Buffer, start: number): { value: number; next: number } {
  let value = 0;
  let shift = 0;
  let i = start;
  for (;;) {
    const byte = bytes[i++];
    if (byte === undefined) throw new Error('truncated delta header');
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if ((byte & 0x80) === 0) return { value, next: i };
  }
}

export class ObjectSizeReader {
  private readonly gitdir: string;
  /** Pack index files, by path; a fetch only ever adds new ones. */
  private readonly indexes = new Map<string, Buffer>();

  constructor(gitdir: string) {
    this.gitdir = gitdir;
  }

  /** The object's inflated size, or undefined when it is not found here. */
  async size(oid: string): Promise<number | undefined> {
    const loose = await this.looseSize(oid);
    if (loose !== undefined) return loose;
    return this.packedSize(oid);
  }

  private async looseSize(oid: string): Promise<number | undefined> {
    let compressed: Buffer;
    try {
      const file = await open(join(this.gitdir, 'objects', oid.slice(0, 2), oid.slice(2)));
      try {
        const buffer = Buffer.alloc(PEEK);
        const { bytesRead } = await file.read(buffer, 0, PEEK, 0);
        compressed = buffer.subarray(0, bytesRead);
      } finally {
        await file.close();
      }
    } catch {
      return undefined;
    }
    const header = inflatePrefix(compressed);
    const nul = header.indexOf(0);
    const match = /^[a-z]+ (\d+)$/.exec(header.subarray(0, nul).toString('latin1'));
    if (!match) throw new Error(`object ${oid}: unreadable loose header`);
    return Number(match[1]);
  }

  private async packedSize(oid: string): Promise<number | undefined> {
    const packDir = join(this.gitdir, 'objects', 'pack');
    let names: string[];
    try {
      names = (await readdir(packDir)).filter((n) => n.endsWith('.idx')).sort();
    } catch {
      return undefined;
    }
    const wanted = Buffer.from(oid, 'hex');
    for (const name of names) {
      const path = join(packDir, name);
      let index = this.indexes.get(path);
      if (!index) {
        index = await readFile(path);
        this.indexes.set(path, index);
      }
      const offset = findOffset(index, wanted);
      if (offset !== undefined) return this.entrySize(join(packDir, name.replace(/\.idx$/, '.pack')), offset);
    }
    return undefined;
  }

  private async entrySize(packPath: string, offset: number): Promise<number> {
    const file = await open(packPath);
    try {
      const buffer = Buffer.alloc(PEEK + 64);
      const { bytesRead } = await file.read(buffer, 0, buffer.length, offset);
      const bytes = buffer.subarray(0, bytesRead);
      let i = 0;
      let byte = bytes[i++] as number;
      const type = (byte >> 4) & 7;
      let size = byte & 0x0f;
      let shift = 4;
      while (byte & 0x80) {
        byte = bytes[i++] as number;
        size += (byte & 0x7f) * 2 ** shift;
        shift += 7;
      }
      if (type !== OFS_DELTA && type !== REF_DELTA) return size;
      if (type === REF_DELTA) i += 20;
      else {
        do byte = bytes[i++] as number;
        while (byte & 0x80);
      }
      // A delta starts with the base's size, then the size of the object it makes.
      const delta = inflatePrefix(bytes.subarray(i));
      const base = deltaSize(delta, 0);
      return deltaSize(delta, base.next).value;
    } finally {
      await file.close();
    }
  }
}

/** The pack offset of an object in a version-2 pack index, or undefined. */
function findOffset(index: Buffer, oid: Buffer): number | undefined {
  if (index.readUInt32BE(0) !== 0xff744f63 || index.readUInt32BE(4) !== 2) return undefined;
  const fanout = 8;
  const first = oid[0] as number;
  const count = index.readUInt32BE(fanout + 255 * 4);
  let low = first === 0 ? 0 : index.readUInt32BE(fanout + (first - 1) * 4);
  let high = index.readUInt32BE(fanout + first * 4);
  const names = fanout + 256 * 4;
  while (low < high) {
    const mid = (low + high) >>> 1;
    const cmp = oid.compare(index, names + mid * 20, names + mid * 20 + 20);
    if (cmp === 0) {
      const offsets = names + count * 20 + count * 4;
      const small = index.readUInt32BE(offsets + mid * 4);
      if ((small & 0x80000000) === 0) return small;
      const large = offsets + count * 4 + (small & 0x7fffffff) * 8;
      return Number(index.readBigUInt64BE(large));
    }
    if (cmp < 0) high = mid;
    else low = mid + 1;
  }
  return undefined;
}
