/**
 * The rate limiter of the rate-limiting queue, after client-go's
 * `util/workqueue/default_rate_limiters.go` (`ItemExponentialFailureRateLimiter`), the one the
 * Go attacher builds from `--retry-interval-start` and `--retry-interval-max`. client-go's
 * other limiters (bucket, max-of, fast-slow) have no user here. All delays are in milliseconds.
 *
 * @module
 */

import type { RateLimiter } from "./types.ts";

/** Options of {@link ItemExponentialFailureRateLimiter}. */
export interface ItemExponentialFailureRateLimiterOptions {
  /** Delay after the first failure, ms (the attacher's `--retry-interval-start`). */
  baseMs: number;
  /** Cap of the delay, ms (the attacher's `--retry-interval-max`). */
  maxMs: number;
}

/**
 * Per-key exponential backoff: the n-th failure of a key since it was last forgotten waits
 * `baseMs · 2^(n-1)`, capped at `maxMs`. With 1 s and 5 m: 1 s, 2 s, 4 s, …, 256 s, 300 s, 300 s.
 *
 * Guarantees: the delay never exceeds `maxMs` and never overflows, however many failures;
 * {@link forget} resets the key to its first delay.
 */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  #baseMs: number;
  #maxMs: number;
  #failures = new Map<string, number>();

  /**
   * @throws {RangeError} when `baseMs` or `maxMs` is negative or NaN.
   */
  constructor(opts: ItemExponentialFailureRateLimiterOptions) {
    if (!(opts.baseMs >= 0)) throw new RangeError(`baseMs must be >= 0, got ${opts.baseMs}`);
    if (!(opts.maxMs >= 0)) throw new RangeError(`maxMs must be >= 0, got ${opts.maxMs}`);
    this.#baseMs = opts.baseMs;
    this.#maxMs = opts.maxMs;
  }

  /** Counts one more failure of `key` and returns its delay. */
  when(key: string): number {
    const exp = this.#failures.get(key) ?? 0;
    this.#failures.set(key, exp + 1);
    // 2 ** exp turns to Infinity long before the count could overflow; both cap at max.
    const backoff = this.#baseMs * 2 ** exp;
    if (!(backoff <= this.#maxMs)) return this.#maxMs;
    return backoff;
  }

  /** Forgets the failures of `key`. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Failures of `key` since it was last forgotten. */
  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}
