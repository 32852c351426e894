/**
 * A delaying queue with per-key backoff, after client-go's `util/workqueue/rate_limiting_queue.go`.
 *
 * @module
 */

import { DelayingWorkQueue, type DelayingWorkQueueDeps } from "./delaying_queue.ts";
import type { WorkQueueOptions } from "./queue.ts";
import type { RateLimiter, RateLimitingQueue } from "./types.ts";

/** Dependencies of {@link RateLimitingWorkQueue}. */
export interface RateLimitingWorkQueueDeps extends DelayingWorkQueueDeps {
  /** Decides each key's delay, e.g. an {@link import("./rate_limiters.ts").ItemExponentialFailureRateLimiter}. */
  rateLimiter: RateLimiter;
}

/** Options of {@link RateLimitingWorkQueue}. */
export type RateLimitingWorkQueueOptions = WorkQueueOptions;

/**
 * A {@link DelayingWorkQueue} whose {@link addRateLimited} waits as long as the rate limiter says.
 *
 * Remember to call {@link forget} when a key succeeds: otherwise its failures are tracked
 * forever and its next failure waits longer than it should. `forget` only clears the rate
 * limiter: the worker still has to call `done`.
 *
 * @example
 * ```ts
 * import { ItemExponentialFailureRateLimiter } from "./rate_limiters.ts";
 *
 * async function sync(_key: string): Promise<void> {}
 * const q = new RateLimitingWorkQueue({
 *   rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 }),
 * }, { name: "csi-attacher-va" });
 * q.add("va-1");
 * const key = await q.get();
 * if (key !== undefined) {
 *   try {
 *     await sync(key);
 *     q.forget(key);
 *   } catch {
 *     q.addRateLimited(key);
 *   } finally {
 *     q.done(key);
 *   }
 * }
 * q.shutDown();
 * ```
 */
export class RateLimitingWorkQueue extends DelayingWorkQueue implements RateLimitingQueue {
  #rateLimiter: RateLimiter;

  /**
   * @throws {RangeError} when `unfinishedWorkUpdatePeriodMs` is not a positive number.
   */
  constructor(deps: RateLimitingWorkQueueDeps, opts: RateLimitingWorkQueueOptions) {
    super(deps, opts);
    this.#rateLimiter = deps.rateLimiter;
  }

  /** Adds `key` after the delay the rate limiter gives it (which counts one failure). */
  addRateLimited(key: string): void {
    this.addAfter(key, this.#rateLimiter.when(key));
  }

  /** Resets the backoff of `key`. Only clears the rate limiter: still call `done`. */
  forget(key: string): void {
    this.#rateLimiter.forget(key);
  }

  /** How many times `key` was rate-limited since it was last forgotten. */
  numRequeues(key: string): number {
    return this.#rateLimiter.numRequeues(key);
  }
}
