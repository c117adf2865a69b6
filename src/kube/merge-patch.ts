// JSON merge patch (RFC 7386) from two documents: fields removed in `next` become null, objects
// are diffed recursively, arrays and scalars are replaced whole. Unchanged fields are left out,
// so a status write sends only what changed.

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The merge patch turning `prev` into `next`; undefined when they are equal. */
export function createMergePatch(prev: unknown, next: unknown): unknown {
  if (!isObject(prev) || !isObject(next)) return deepEqual(prev, next) ? undefined : (next);
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(prev)) {
    if (prev[key] !== undefined && next[key] === undefined) patch[key] = null;
  }
  for (const [key, value] of Object.entries(next)) {
    if (value === undefined) continue;
    const sub = key in prev && prev[key] !== undefined ? createMergePatch(prev[key], value) : value;
    if (sub !== undefined) patch[key] = sub;
  }
  return Object.keys(patch).length ? patch : undefined;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}
