/**
 * Builds JSON merge patches (RFC 7386) as the difference of two documents, the way the Go
 * attacher builds its patches (`jsonpatch.CreateMergePatch(old, new)`): only changed fields
 * appear, removed fields become `null`, arrays are replaced whole.
 *
 * @module
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deep equality of two JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => k in b && jsonEqual(a[k], b[k]));
  }
  return false;
}

/**
 * The merge patch that turns `oldDoc` into `newDoc`; `{}` when they are equal.
 * `undefined` values count as absent.
 *
 * @example
 * ```ts
 * createMergePatch({ status: { attached: false } }, { status: { attached: true } });
 * // { status: { attached: true } }
 * ```
 */
export function createMergePatch(oldDoc: unknown, newDoc: unknown): Record<string, Json> {
  if (!isObject(oldDoc) || !isObject(newDoc)) {
    throw new TypeError("Cannot create a merge patch: both documents must be JSON objects");
  }
  return diffObjects(oldDoc, newDoc);
}

function diffObjects(
  oldObj: Record<string, unknown>,
  newObj: Record<string, unknown>,
): Record<string, Json> {
  const patch: Record<string, Json> = {};
  for (const key of Object.keys(oldObj)) {
    if (oldObj[key] !== undefined && newObj[key] === undefined) patch[key] = null;
  }
  for (const [key, value] of Object.entries(newObj)) {
    if (value === undefined) continue;
    const before = oldObj[key];
    if (isObject(before) && isObject(value)) {
      const sub = diffObjects(before, value);
      if (Object.keys(sub).length > 0) patch[key] = sub;
    } else if (!jsonEqual(before, value)) {
      patch[key] = value as Json;
    }
  }
  return patch;
}
