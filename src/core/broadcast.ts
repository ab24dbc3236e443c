/**
 * One event, many listeners, wired in any order: a part built early (a builder) emits, and a part
 * built after it (the build collector, which needs the builder first) listens. It replaces a
 * holder filled in later, whose emptiness before then nobody could see.
 */
export class Broadcast<Args extends unknown[]> {
  private readonly listeners = new Set<(...args: Args) => void>();

  /** Calls every listener, in the order they subscribed; bound, so it can be handed on as is. */
  readonly emit = (...args: Args): void => {
    for (const listener of [...this.listeners]) listener(...args);
  };

  /** Listens until the returned function is called. */
  subscribe(listener: (...args: Args) => void): () => void {
    const entry = (...args: Args) => listener(...args);
    this.listeners.add(entry);
    return () => this.listeners.delete(entry);
  }
}
