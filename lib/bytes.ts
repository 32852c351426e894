/**
 * Byte arrays joined: the one helper the protocol code (`wire/`) and the Kubernetes client's
 * body readers share.
 *
 * @module
 */

/**
 * The bytes of `parts` in one array: the part itself when there is one (no copy), else a new
 * array of `length` bytes (their total, counted here when not given).
 */
export function concatBytes(parts: readonly Uint8Array[], length?: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let total = length;
  if (total === undefined) {
    total = 0;
    for (const part of parts) total += part.length;
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
