/**
 * Comparing credential headers: the client builds its request header lines once per set of
 * credentials and reuses them while {@link sameCredentials} says the credentials did not change.
 *
 * @module
 */

import type { CredentialHeaders } from "../config.ts";

/** True when `a` and `b` name the same headers with the same values, in any order. */
export function sameCredentials(a: CredentialHeaders, b: CredentialHeaders): boolean {
  if (a === b) return true;
  let count = 0;
  for (const name in b) {
    count++;
    if (!Object.hasOwn(a, name)) return false;
    const x = a[name];
    const y = b[name];
    if (x === y) continue;
    if (!Array.isArray(x) || !Array.isArray(y) || x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  }
  for (const _ in a) count--;
  return count === 0;
}
