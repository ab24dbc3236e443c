/**
 * A map that forgets everything once it holds `limit` entries. For caches of what can be computed
 * again (parsed manifests, build-key hashes, a commit's manifest file list): memory stays bounded over
 * a controller's whole life, whatever the number of commits, and starting over costs one recompute
 * per entry, without the bookkeeping an LRU pays on every read.
 */
export class BoundedCache<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(readonly limit: number) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    return this.entries.get(key);
  }

  set(key: K, value: V): void {
    if (this.entries.size >= this.limit && !this.entries.has(key)) this.entries.clear();
    this.entries.set(key, value);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }
}
