/**
 * RFC 7386 JSON merge patch applied as kube-apiserver applies `application/merge-patch+json`.
 * Building one is the attacher's side: `lib/kube/patches.ts` `createMergePatch`.
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
