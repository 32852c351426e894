/**
 * Rate limiters for the rate-limiting queue, after client-go's
 * `util/workqueue/default_rate_limiters.go`. All delays are in milliseconds.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { TokenBucket } from "./token_bucket.ts";
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

/** Dependencies of {@link BucketRateLimiter}. */
export interface BucketRateLimiterDeps {
  /** Time source of the token bucket; defaults to the real clock. */
  clock?: Clock;
}

/** Options of {@link BucketRateLimiter}. */
export interface BucketRateLimiterOptions {
  /** Overall retries per second (`<= 0` means no limit). */
  qps: number;
  /** Retries allowed at once before the rate applies. */
  burst: number;
}

/**
 * An overall (not per-key) limit on retries: each `when` takes a token from a bucket of `burst`
 * tokens refilled at `qps` per second and returns how long to wait for it. Keys are not tracked:
 * `forget` does nothing and `numRequeues` is always 0.
 */
export class BucketRateLimiter implements RateLimiter {
  #bucket: TokenBucket;

  /**
   * @throws {RangeError} when the bucket options are invalid (see {@link TokenBucket}).
   */
  constructor(deps: BucketRateLimiterDeps, opts: BucketRateLimiterOptions) {
    this.#bucket = new TokenBucket({ clock: deps.clock }, { qps: opts.qps, burst: opts.burst });
  }

  /** Reserves a token and returns the wait for it, ms. */
  when(_key: string): number {
    return this.#bucket.reserve();
  }

  /** Does nothing: the bucket does not track keys. */
  forget(_key: string): void {}

  /** Always 0: the bucket does not track keys. */
  numRequeues(_key: string): number {
    return 0;
  }
}

/**
 * The strictest of several limiters: `when` asks every limiter (so each records the failure) and
 * returns the longest delay; `forget` forgets in all; `numRequeues` is the largest count.
 */
export class MaxOfRateLimiter implements RateLimiter {
  #limiters: readonly RateLimiter[];

  /**
   * @throws {RangeError} when no limiter is given.
   */
  constructor(...limiters: RateLimiter[]) {
    if (limiters.length === 0) throw new RangeError("MaxOfRateLimiter needs at least one limiter");
    this.#limiters = limiters;
  }

  /** The longest delay of all limiters for `key`. */
  when(key: string): number {
    let delay = 0;
    for (const limiter of this.#limiters) delay = Math.max(delay, limiter.when(key));
    return delay;
  }

  /** Forgets `key` in every limiter. */
  forget(key: string): void {
    for (const limiter of this.#limiters) limiter.forget(key);
  }

  /** The largest failure count any limiter has for `key`. */
  numRequeues(key: string): number {
    let n = 0;
    for (const limiter of this.#limiters) n = Math.max(n, limiter.numRequeues(key));
    return n;
  }
}

/** Dependencies of {@link defaultControllerRateLimiter}. */
export interface DefaultControllerRateLimiterDeps {
  /** Time source of the bucket; defaults to the real clock. */
  clock?: Clock;
}

/**
 * client-go's `DefaultControllerRateLimiter`: the max of a per-key exponential backoff from 5 ms
 * to 1000 s and an overall bucket of 10 qps with a burst of 100. (The attacher itself uses only
 * {@link ItemExponentialFailureRateLimiter} with its retry-interval flags.)
 */
export function defaultControllerRateLimiter(
  deps: DefaultControllerRateLimiterDeps = {},
): RateLimiter {
  return new MaxOfRateLimiter(
    new ItemExponentialFailureRateLimiter({ baseMs: 5, maxMs: 1_000_000 }),
    new BucketRateLimiter({ clock: deps.clock }, { qps: 10, burst: 100 }),
  );
}
