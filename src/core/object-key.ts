/**
 * The `namespace/name` key of a namespaced object, built and split in one place: work queues, caches
 * and maps across the code hold objects by it. A Kubernetes name never holds a slash, so the split
 * is exact; a key that is not one namespace and one name is refused, never guessed at.
 */
export function objectKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The namespace and name a key stands for; throws on anything but exactly `namespace/name`. */
export function splitObjectKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  if (slash <= 0 || slash === key.length - 1 || key.indexOf('/', slash + 1) >= 0)
    throw new Error(`not a namespace/name key: ${JSON.stringify(key)}`);
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
