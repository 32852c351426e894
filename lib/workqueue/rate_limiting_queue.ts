/**
 * A delaying queue with per-key backoff, after client-go's `util/workqueue/rate_limiting_queue.go`
 * (`rateLimitingType`, which holds the `TypedDelayingInterface` below it).
 *
 * @module
 */

import { DelayingWorkQueue, type DelayingWorkQueueOptions } from "./delaying_queue.ts";
import type { WorkQueueDeps } from "./queue.ts";
import type { DelayingQueue, RateLimiter, RateLimitingQueue } from "./types.ts";

/** Dependencies of {@link RateLimitingWorkQueue}. */
export interface RateLimitingWorkQueueDeps extends WorkQueueDeps {
  /** Decides each key's delay, e.g. an {@link import("./rate_limiters.ts").ItemExponentialFailureRateLimiter}. */
  rateLimiter: RateLimiter;
  /**
   * The delaying queue below (client-go's `RateLimitingQueueConfig.DelayingQueue`); default a
   * {@link DelayingWorkQueue} around a plain queue, made from these deps and the options.
   */
  queue?: DelayingQueue;
}

/** Options of {@link RateLimitingWorkQueue}. */
export type RateLimitingWorkQueueOptions = DelayingWorkQueueOptions;

/**
 * A delaying queue whose {@link addRateLimited} waits as long as the rate limiter says, around
 * the delaying queue below it (which it delegates everything else to).
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
export class RateLimitingWorkQueue implements RateLimitingQueue {
  #queue: DelayingQueue;
  #rateLimiter: RateLimiter;

  /**
   * @throws {RangeError} when `unfinishedWorkUpdatePeriodMs` is not a positive number.
   */
  constructor(deps: RateLimitingWorkQueueDeps, opts: RateLimitingWorkQueueOptions) {
    this.#queue = deps.queue ?? new DelayingWorkQueue(deps, opts);
    this.#rateLimiter = deps.rateLimiter;
  }

  /** Adds `key` after the delay the rate limiter gives it (which counts one failure). */
  addRateLimited(key: string): void {
    this.#queue.addAfter(key, this.#rateLimiter.when(key));
  }

  /** The queue below's {@link DelayingQueue.addAfter}. */
  addAfter(key: string, ms: number): void {
    this.#queue.addAfter(key, ms);
  }

  /** The queue below's {@link DelayingQueue.add}. */
  add(key: string): void {
    this.#queue.add(key);
  }

  /** The queue below's {@link DelayingQueue.get}. */
  get(): Promise<string | undefined> {
    return this.#queue.get();
  }

  /** The queue below's {@link DelayingQueue.done}. */
  done(key: string): void {
    this.#queue.done(key);
  }

  /** The queue below's {@link DelayingQueue.len}. */
  len(): number {
    return this.#queue.len();
  }

  /** Shuts the queue below down. */
  shutDown(): void {
    this.#queue.shutDown();
  }

  /** Shuts the queue below down and resolves once it is drained. */
  shutDownWithDrain(): Promise<void> {
    return this.#queue.shutDownWithDrain();
  }

  /** The queue below's {@link DelayingQueue.shuttingDown}. */
  shuttingDown(): boolean {
    return this.#queue.shuttingDown();
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
