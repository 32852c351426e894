/**
 * RFC 7386 JSON merge patch: applying one (what kube-apiserver does with
 * `application/merge-patch+json`) and creating one from two versions of an object (what client-go
 * callers do with evanphx/json-patch `CreateMergePatch`).
 *
 * @module
 */

/** True for a JSON object (not an array, not null). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Applies a merge patch to `target` and returns the result; neither argument is modified.
 * A `null` member in the patch removes the member; objects merge recursively; anything else
 * (arrays included) replaces the target's value. A patch that is not an object replaces the
 * whole target.
 *
 * @example
 * ```ts
 * applyMergePatch({ a: 1, b: { c: 2 } }, { b: { c: null, d: 3 } }); // { a: 1, b: { d: 3 } }
 * ```
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isObject(target) ? structuredClone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete out[key];
    } else if (value !== undefined) {
      out[key] = applyMergePatch(out[key], value);
    }
  }
  return out;
}

/** A copy of `value` whose objects have their members sorted by key, as Go marshals maps. */
export function sortedJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedJson);
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    if (value[key] !== undefined) out[key] = sortedJson(value[key]);
  }
  return out;
}

/** Structural equality of two JSON values. */
function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => equal(v, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ak = Object.keys(a).filter((k) => a[k] !== undefined);
    const bk = Object.keys(b).filter((k) => b[k] !== undefined);
    return ak.length === bk.length && ak.every((k) => k in b && equal(a[k], b[k]));
  }
  return false;
}

/** The members of `modified` that differ from `original`, and `null` for removed ones. */
function diff(
  original: Record<string, unknown>,
  modified: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, mv] of Object.entries(modified)) {
    if (mv === undefined) continue;
    const ov = original[key];
    if (ov === undefined) {
      out[key] = mv;
    } else if (isObject(ov) && isObject(mv)) {
      const sub = diff(ov, mv);
      if (Object.keys(sub).length > 0) out[key] = sub;
    } else if (!equal(ov, mv)) {
      out[key] = mv;
    }
  }
  for (const [key, ov] of Object.entries(original)) {
    if (ov !== undefined && modified[key] === undefined) out[key] = null;
  }
  return out;
}

/**
 * The merge patch that turns `original` into `modified`, with members sorted by key at every
 * level: byte for byte what evanphx/json-patch `CreateMergePatch` gives for the same JSON, so
 * `JSON.stringify` of the result equals the patch the Go attacher sends. Only changed members
 * appear; an unchanged object gives `{}`.
 *
 * @example
 * ```ts
 * createMergePatch({ status: { attached: false } }, { status: { attached: true, attachError: null } });
 * // { status: { attachError: null, attached: true } }
 * ```
 * @throws {TypeError} when either argument is not a JSON object.
 */
export function createMergePatch(original: unknown, modified: unknown): Record<string, unknown> {
  if (!isObject(original) || !isObject(modified)) {
    throw new TypeError("createMergePatch: both documents must be JSON objects");
  }
  const d = diff(original, modified);
  const sorted = sortedJson(d);
  return isObject(sorted) ? sorted : {};
}
