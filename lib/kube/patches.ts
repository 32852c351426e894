/**
 * The parts of JSON patching the attacher ships: building the RFC 7386 merge patches it sends
 * (byte for byte what the Go attacher sends, built with evanphx/json-patch `CreateMergePatch`)
 * and comparing JSON values. Applying patches is the API server's job; the in-memory API server
 * of the test kit does it (`testkit/apiserver/merge_patch.ts`, `json_patch.ts`).
 *
 * @module
 */

/** True for a JSON object (not an array, not null). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Deep structural equality of two JSON values (object member order does not matter). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => jsonEqual(v, b[i]));
  }
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ak = Object.keys(a).filter((k) => a[k] !== undefined);
    const bk = Object.keys(b).filter((k) => b[k] !== undefined);
    if (ak.length !== bk.length) return false;
    return ak.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
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
    } else if (!jsonEqual(ov, mv)) {
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
