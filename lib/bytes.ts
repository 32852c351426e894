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

/**
 * Reads `next` until it returns null and joins what it gave (see {@link concatBytes}): a body read
 * piece by piece, whole. `next` gives one or more non-empty views per call.
 */
export async function readAllChunks(
  next: () => Promise<readonly Uint8Array[] | null>,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let length = 0;
  for (let data = await next(); data !== null; data = await next()) {
    for (const part of data) {
      parts.push(part);
      length += part.length;
    }
  }
  return concatBytes(parts, length);
}
