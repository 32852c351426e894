/**
 * The one place resourceVersions are ordered. The API conventions make them opaque strings that
 * clients compare only for equality; since Kubernetes 1.35 the API server's are also documented
 * as comparable (KEP-5504, "comparable resource versions"), with the rule of apimachinery's
 * `pkg/util/resourceversion` `CompareResourceVersion`: a well-formed resourceVersion is a
 * non-empty string of decimal digits without a leading zero, and the longer one is the greater,
 * equal lengths comparing as text. Anything else is not ordered: callers treat it as unknown,
 * never as older or newer.
 *
 * @module
 */

/** True when `rv` is a resourceVersion that can be ordered (see the module doc). */
function isWellFormed(rv: string): boolean {
  if (rv.length === 0 || rv.charCodeAt(0) === 0x30) return false;
  for (let i = 0; i < rv.length; i++) {
    const c = rv.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

/**
 * Orders two resourceVersions: negative when `a` is older than `b`, 0 when equal, positive when
 * newer; `undefined` when either is missing or not well formed, and so has no order.
 *
 * @example
 * ```ts
 * import { compareResourceVersions } from "./resource_version.ts";
 *
 * compareResourceVersions("999", "1000"); // < 0: the longer is newer
 * compareResourceVersions("abc", "1"); // undefined: not ordered
 * ```
 */
export function compareResourceVersions(
  a: string | undefined,
  b: string | undefined,
): number | undefined {
  if (a === undefined || b === undefined || !isWellFormed(a) || !isWellFormed(b)) {
    return undefined;
  }
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
