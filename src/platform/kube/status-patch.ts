/**
 * A JSON merge patch that gives the status subresource the semantics the MemoryStore has: each
 * top-level field given replaces the stored one. A merge patch alone would merge nested objects (a
 * successful lastBuild would keep the failed one's message), so nested keys the caller's copy had and
 * the new value lacks are sent as null; `undefined` fields are cleared with null too.
 */
export function statusMergePatch(
  previous: Record<string, unknown> | undefined,
  next: object,
): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(next)) {
    if (value === undefined) {
      patch[key] = null;
      continue;
    }
    const before = previous?.[key];
    patch[key] = isPlainObject(value) && isPlainObject(before) ? replaceObject(before, value) : value;
  }
  return patch;
}

function replaceObject(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(before)) if (!(key in after) || after[key] === undefined) out[key] = null;
  for (const [key, value] of Object.entries(after)) {
    if (value === undefined) continue;
    const old = before[key];
    out[key] = isPlainObject(value) && isPlainObject(old) ? replaceObject(old, value) : value;
  }
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
