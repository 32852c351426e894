/**
 * Small statistics for the benchmark: percentiles of latency samples and medians across runs.
 *
 * @module
 */

/** Percentiles and extremes of a set of durations (same unit as the samples). */
export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

/**
 * The `p`-th percentile (0–100) of `sorted` (ascending) by the nearest-rank method: the smallest
 * sample such that at least p % of the samples are ≤ it. NaN for no samples.
 *
 * @throws {RangeError} when `p` is outside 0–100.
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`Cannot take percentile: p is ${p}`);
  if (sorted.length === 0) return NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] as number;
}

/** Summarises durations; every field is NaN (count 0) for no samples. */
export function summarize(samples: readonly number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    count: sorted.length,
    mean: sorted.length === 0 ? NaN : sum / sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted.length === 0 ? NaN : sorted[sorted.length - 1] as number,
  };
}

/**
 * The median of the finite values (mean of the two middle ones for an even count); NaN when
 * there is none. Runs that failed to produce a figure report NaN and are skipped.
 */
export function median(values: readonly number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? sorted[mid] as number
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Counts divided by `per` (NaN-free: an empty map for `per` ≤ 0). */
export function perOperation(
  counts: Readonly<Record<string, number>>,
  per: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  if (!(per > 0)) return out;
  for (const [key, value] of Object.entries(counts)) out[key] = value / per;
  return out;
}

/** The sum of a map's values. */
export function total(counts: Readonly<Record<string, number>>): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}
