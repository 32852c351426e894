/**
 * Kubernetes `MicroTime` and `Time` timestamps.
 *
 * The API server parses a `MicroTime` (Lease `acquireTime` and `renewTime`, Event `eventTime`)
 * with Go's `2006-01-02T15:04:05.000000Z07:00` layout: exactly six fraction digits. JavaScript's
 * `Date.prototype.toISOString()` gives three, which the server rejects with 400
 * (https://github.com/kubernetes-client/javascript/issues/828), so these helpers format the
 * timestamps themselves. A `Time` (`creationTimestamp`, Event `firstTimestamp`) has whole
 * seconds.
 *
 * @module
 */

/**
 * Formats `ms` (milliseconds since the epoch, fractions of a millisecond allowed) as a UTC
 * `MicroTime`: `YYYY-MM-DDTHH:MM:SS.ffffffZ`, always six fraction digits, truncated (not
 * rounded) to the microsecond as Go truncates.
 *
 * @throws {RangeError} when `ms` is not a finite number or lies outside years 0000–9999.
 *
 * @example
 * ```ts
 * formatMicroTime(Date.UTC(2026, 10, 21, 22, 30, 1, 123)); // "2026-11-21T22:30:01.123000Z"
 * formatMicroTime(1.5); // "1970-01-01T00:00:00.001500Z"
 * ```
 */
export function formatMicroTime(ms: number): string {
  // Split before scaling: ms × 1000 would exceed 2^53 (and lose microseconds) after 2255.
  const wholeMs = Math.floor(ms);
  const date = wholeSecondsDate(wholeMs, "formatMicroTime");
  const msInSecond = wholeMs - Math.floor(wholeMs / 1000) * 1000;
  const fraction = msInSecond * 1000 + Math.min(999, Math.floor((ms - wholeMs) * 1000));
  return `${date}.${String(fraction).padStart(6, "0")}Z`;
}

/**
 * Formats `ms` (milliseconds since the epoch) as a UTC Kubernetes `Time`:
 * `YYYY-MM-DDTHH:MM:SSZ`, the fraction truncated.
 *
 * @throws {RangeError} when `ms` is not a finite number or lies outside years 0000–9999.
 *
 * @example
 * ```ts
 * formatTime(Date.UTC(2026, 10, 21, 22, 30, 1, 999)); // "2026-11-21T22:30:01Z"
 * ```
 */
export function formatTime(ms: number): string {
  return `${wholeSecondsDate(Math.floor(ms), "formatTime")}Z`;
}

/** `YYYY-MM-DDTHH:MM:SS` of the second `ms` falls in. */
function wholeSecondsDate(ms: number, fn: string): string {
  const date = new Date(Math.floor(ms / 1000) * 1000);
  const year = date.getUTCFullYear();
  if (!Number.isFinite(ms) || Number.isNaN(date.getTime()) || year < 0 || year > 9999) {
    throw new RangeError(`Cannot format timestamp in ${fn}(): ${ms} ms is out of range`);
  }
  // toISOString() is `YYYY-MM-DDTHH:MM:SS.sssZ` for years 0000–9999.
  return date.toISOString().slice(0, 19);
}
