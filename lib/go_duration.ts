/**
 * Go `time.Duration` text, both ways: {@link parseGoDuration} reads what `time.ParseDuration`
 * accepts ("300ms", "1.5h", "1m30s") and {@link formatGoDuration} writes what
 * `Duration.String()` prints ("15s", "5m0s"), so flags and usage text read exactly as they do
 * for the Go sidecars.
 *
 * Durations are milliseconds in this code base (they may be fractional: "1.5us" is 0.0015).
 *
 * @module
 */

/** Nanoseconds per unit, as in Go's `time` package (both micro signs are accepted). */
const UNIT_NANOS: ReadonlyMap<string, bigint> = new Map([
  ["ns", 1n],
  ["us", 1_000n],
  ["\u00b5s", 1_000n], // U+00B5 MICRO SIGN
  ["\u03bcs", 1_000n], // U+03BC GREEK SMALL LETTER MU
  ["ms", 1_000_000n],
  ["s", 1_000_000_000n],
  ["m", 60_000_000_000n],
  ["h", 3_600_000_000_000n],
]);

/** 2^63: one more than the largest Go duration; the magnitude of the smallest. */
const MAX_MAGNITUDE = 1n << 63n;

/** Quotes `s` the way Go's `time` package quotes it in error messages. */
function quote(s: string): string {
  return `"${s.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= "0" && c <= "9";
}

/**
 * Parses a Go duration string into milliseconds.
 *
 * Accepts exactly what Go's `time.ParseDuration` accepts: an optional sign, then one or more
 * decimal numbers (with optional fraction) each followed by a unit (`ns`, `us`, `µs`, `ms`, `s`,
 * `m`, `h`), or the bare string `"0"`. The value is computed in integer nanoseconds like Go, so
 * `"1.1s"` is exactly 1100 ms.
 *
 * @example
 * ```ts
 * parseGoDuration("1m30s"); // 90000
 * parseGoDuration("300ms"); // 300
 * parseGoDuration("-1.5h"); // -5400000
 * ```
 * @param s the duration text
 * @returns the duration in milliseconds (may be fractional for sub-millisecond units)
 * @throws {Error} with Go's message, e.g. `time: invalid duration "abc"`,
 *   `time: missing unit in duration "10"`, `time: unknown unit "d" in duration "1d"`
 */
export function parseGoDuration(s: string): number {
  const orig = s;
  const invalid = () => new Error(`time: invalid duration ${quote(orig)}`);
  let rest = s;
  let negative = false;
  if (rest !== "" && (rest[0] === "-" || rest[0] === "+")) {
    negative = rest[0] === "-";
    rest = rest.slice(1);
  }
  if (rest === "0") return 0;
  if (rest === "") throw invalid();

  let total = 0n;
  while (rest !== "") {
    if (!(rest[0] === "." || isDigit(rest[0]))) throw invalid();

    // Integer part.
    let i = 0;
    let whole = 0n;
    while (isDigit(rest[i])) {
      whole = whole * 10n + BigInt(rest.charCodeAt(i) - 48);
      if (whole > MAX_MAGNITUDE) throw invalid();
      i++;
    }
    const hasWhole = i > 0;
    rest = rest.slice(i);

    // Fraction part: Go keeps digits while they fit in an int64 and ignores the rest.
    let fraction = 0n;
    let scale = 1n;
    let hasFraction = false;
    if (rest[0] === ".") {
      rest = rest.slice(1);
      let j = 0;
      let overflow = false;
      while (isDigit(rest[j])) {
        if (!overflow) {
          const next = fraction * 10n + BigInt(rest.charCodeAt(j) - 48);
          if (fraction > (MAX_MAGNITUDE - 1n) / 10n || next > MAX_MAGNITUDE) {
            overflow = true;
          } else {
            fraction = next;
            scale *= 10n;
          }
        }
        j++;
      }
      hasFraction = j > 0;
      rest = rest.slice(j);
    }
    if (!hasWhole && !hasFraction) throw invalid();

    // Unit: everything up to the next digit or dot.
    let k = 0;
    while (k < rest.length && rest[k] !== "." && !isDigit(rest[k])) k++;
    if (k === 0) throw new Error(`time: missing unit in duration ${quote(orig)}`);
    const unitText = rest.slice(0, k);
    rest = rest.slice(k);
    const unit = UNIT_NANOS.get(unitText);
    if (unit === undefined) {
      throw new Error(`time: unknown unit ${quote(unitText)} in duration ${quote(orig)}`);
    }

    if (whole > MAX_MAGNITUDE / unit) throw invalid();
    let value = whole * unit;
    if (fraction > 0n) {
      // Go computes the fractional part in float64 (nanosecond-accurate up to hours).
      value += BigInt(Math.trunc(Number(fraction) * (Number(unit) / Number(scale))));
      if (value > MAX_MAGNITUDE) throw invalid();
    }
    total += value;
    if (total > MAX_MAGNITUDE) throw invalid();
  }
  if (!negative && total > MAX_MAGNITUDE - 1n) throw invalid();
  const nanos = negative ? -total : total;
  return Number(nanos) / 1e6;
}

/**
 * Writes `v` (an integer) with `prec` digits moved behind a decimal point, trailing zeros and a
 * bare point removed: `fraction(1500n, 3)` is `"1.5"`, `fraction(2000n, 3)` is `"2"`.
 */
function fraction(v: bigint, prec: number): string {
  const divisor = 10n ** BigInt(prec);
  const whole = v / divisor;
  const frac = (v % divisor).toString().padStart(prec, "0").replace(/0+$/, "");
  return frac === "" ? whole.toString() : `${whole}.${frac}`;
}

/**
 * Formats milliseconds the way Go's `time.Duration.String()` does.
 *
 * The value is rounded to whole nanoseconds first. Zero is `"0s"`; below one second the largest
 * fitting unit among `ns`, `µs`, `ms` is used (`"300ms"`, `"1.5µs"`); from one second up the
 * form is `[h]h[m]m[s.frac]s` with every smaller unit written once a larger one is present
 * (`"15s"`, `"1m30s"`, `"5m0s"`, `"1h0m0s"`).
 *
 * @example
 * ```ts
 * formatGoDuration(300_000); // "5m0s"
 * formatGoDuration(1_500);   // "1.5s"
 * ```
 * @param ms a duration in milliseconds
 * @returns Go's text for the duration
 * @throws {RangeError} when `ms` is not a finite number
 */
export function formatGoDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new RangeError(`Cannot format duration ${ms}: not finite`);
  let nanos = BigInt(Math.round(ms * 1e6));
  const sign = nanos < 0n ? "-" : "";
  if (nanos < 0n) nanos = -nanos;

  if (nanos < 1_000_000_000n) {
    if (nanos === 0n) return "0s";
    if (nanos < 1_000n) return `${sign}${nanos}ns`;
    if (nanos < 1_000_000n) return `${sign}${fraction(nanos, 3)}µs`;
    return `${sign}${fraction(nanos, 6)}ms`;
  }

  const seconds = fraction(nanos % 60_000_000_000n, 9);
  const totalMinutes = nanos / 60_000_000_000n;
  if (totalMinutes === 0n) return `${sign}${seconds}s`;
  const hours = totalMinutes / 60n;
  const minutes = totalMinutes % 60n;
  if (hours === 0n) return `${sign}${minutes}m${seconds}s`;
  return `${sign}${hours}h${minutes}m${seconds}s`;
}
