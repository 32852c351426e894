/**
 * The check kube-apiserver makes when it decodes a `metav1.MicroTime` (Lease `acquireTime`,
 * `renewTime`): Go's `time.Parse` with layout `2006-01-02T15:04:05.000000Z07:00`, which takes
 * exactly six fraction digits. The error texts are Go's.
 *
 * @module
 */

/** The layout Go parses MicroTime with (`metav1.RFC3339Micro`). */
export const MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00";

/** The layout's elements in order: the layout text and what it takes from the value. */
const ELEMENTS: readonly (readonly [string, RegExp])[] = [
  ["2006", /^\d{4}/],
  ["-", /^-/],
  ["01", /^\d\d/],
  ["-", /^-/],
  ["02", /^\d\d/],
  ["T", /^T/],
  ["15", /^\d\d/],
  [":", /^:/],
  ["04", /^\d\d/],
  [":", /^:/],
  ["05", /^\d\d/],
  [".000000", /^\.\d{6}/],
  ["Z07:00", /^(Z|[+-]\d\d:\d\d)/],
];

/**
 * Go's error for parsing `value` as a MicroTime, e.g. `parsing time "2026-01-01T00:00:00.000Z"
 * as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".000Z" as ".000000"`; undefined when it
 * parses. Range checks (month 13, hour 25) are not made.
 */
export function microTimeParseError(value: string): string | undefined {
  let rest = value;
  for (const [elem, pattern] of ELEMENTS) {
    const m = pattern.exec(rest);
    if (m === null) {
      return `parsing time ${JSON.stringify(value)} as ${
        JSON.stringify(MICRO_TIME_LAYOUT)
      }: cannot parse ${JSON.stringify(rest)} as ${JSON.stringify(elem)}`;
    }
    rest = rest.slice(m[0].length);
  }
  if (rest !== "") {
    return `parsing time ${JSON.stringify(value)}: extra text: ${JSON.stringify(rest)}`;
  }
  return undefined;
}
