/**
 * The basic work queue of string keys, after client-go's `util/workqueue/queue.go`.
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../clock.ts";
import { metricsEnabled, QueueMetrics, type QueueMetricsProvider } from "./metrics.ts";
import type { Queue } from "./types.ts";

/** Dependencies of {@link WorkQueue}. */
export interface WorkQueueDeps {
  /** Time source for the metrics; defaults to {@link realClock}. */
  clock?: Clock;
  /** Creates this queue's metrics; none (or the no-op provider) records nothing. */
  metricsProvider?: QueueMetricsProvider;
}

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** The queue name, used as the metrics' `name` label (e.g. `csi-attacher-va`). */
  name: string;
  /**
   * How often, in ms of the clock, the unfinished-work gauges are refreshed while the queue runs
   * (client-go: 500 ms). Only used when metrics are recorded.
   */
  unfinishedWorkUpdatePeriodMs?: number;
}

/** client-go's `unfinishedWorkUpdatePeriod`. */
const DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS = 500;

/**
 * A work queue of keys with client-go's guarantees:
 *
 * - Fair: keys are handed out in the order they were added.
 * - Stingy: a key is never handed to two workers at once. Adding a key that is being processed
 *   marks it dirty; it becomes ready again (at the back) when the worker calls {@link done}.
 * - Folding: adding a key that is already waiting does nothing.
 *
 * After {@link shutDown} adds are ignored; keys already waiting are still handed out, then
 * {@link get} resolves `undefined`. Any number of workers may wait in {@link get} at once; each
 * ready key goes to the longest-waiting one.
 *
 * When metrics are recorded the queue runs a timer every
 * {@link WorkQueueOptions.unfinishedWorkUpdatePeriodMs} until it is shut down, so a queue
 * created with a metrics provider MUST be shut down.
 *
 * @example
 * ```ts
 * const q = new WorkQueue({}, { name: "csi-attacher-va" });
 * q.add("va-1");
 * const key = await q.get(); // "va-1"
 * try {
 *   // ... process key ...
 * } finally {
 *   q.done(key!);
 * }
 * ```
 */
export class WorkQueue implements Queue {
  /** The queue name (the metrics' `name` label). */
  readonly name: string;
  #metrics: QueueMetrics | undefined;
  /**
   * The order in which keys are handed out; entries before `#head` are consumed. Every entry
   * from `#head` on is in `#dirty` and not in `#processing`.
   */
  #queue: string[] = [];
  #head = 0;
  /** Keys that need processing: everything waiting in `#queue` plus keys re-added while processing. */
  #dirty = new Set<string>();
  /** Keys handed to a worker and not yet done. A key may be both here and in `#dirty`. */
  #processing = new Set<string>();
  /** Pending `get` calls, oldest first. Non-empty only while `#queue` is empty. */
  #waiters: Array<(key: string | undefined) => void> = [];
  /** Pending `drained` calls. */
  #drainWaiters: Array<() => void> = [];
  #shuttingDown = false;
  #metricsTimer: Timer | undefined;

  /**
   * @throws {RangeError} when `unfinishedWorkUpdatePeriodMs` is not a positive number.
   */
  constructor(deps: WorkQueueDeps, opts: WorkQueueOptions) {
    this.name = opts.name;
    const clock = deps.clock ?? realClock;
    const periodMs = opts.unfinishedWorkUpdatePeriodMs ?? DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS;
    if (!(periodMs > 0)) {
      throw new RangeError(`unfinishedWorkUpdatePeriodMs must be positive, got ${periodMs}`);
    }
    if (metricsEnabled(deps.metricsProvider, opts.name)) {
      const metrics = new QueueMetrics({ clock, provider: deps.metricsProvider }, {
        name: opts.name,
      });
      this.#metrics = metrics;
      // Like client-go's updateUnfinishedWorkLoop: refresh until shut down. Only queues that
      // record metrics run it, so metric-less queues hold no timer.
      const tick = () => {
        metrics.updateUnfinishedWork();
        this.#metricsTimer = clock.setTimer(periodMs, tick);
      };
      this.#metricsTimer = clock.setTimer(periodMs, tick);
    }
  }

  /** Marks `key` as needing processing. Ignored after {@link shutDown}. */
  add(key: string): void {
    if (this.#shuttingDown) return;
    if (this.#dirty.has(key)) return;
    this.#metrics?.add(key);
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#queue.push(key);
    this.#handToWaiters();
  }

  /**
   * Waits for a key and marks it as being processed. Resolves `undefined` once the queue is shut
   * down and no key is ready. The caller MUST call {@link done} with the key it received.
   */
  get(): Promise<string | undefined> {
    const key = this.tryGet();
    if (key !== undefined || this.#shuttingDown) return Promise.resolve(key);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /**
   * Takes a ready key without waiting, or returns `undefined` when none is ready. A key returned
   * is being processed: the caller MUST call {@link done} with it.
   */
  tryGet(): string | undefined {
    if (this.#head >= this.#queue.length) return undefined;
    const key = this.#queue[this.#head]!;
    this.#head++;
    if (this.#head >= this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    this.#metrics?.get(key);
    this.#processing.add(key);
    this.#dirty.delete(key);
    return key;
  }

  /**
   * Ends the processing of `key`. If it was added while being processed it becomes ready again,
   * at the back of the queue (also after {@link shutDown}). Calling it for a key that is not
   * being processed does nothing.
   */
  done(key: string): void {
    if (!this.#processing.has(key)) return;
    this.#metrics?.done(key);
    this.#processing.delete(key);
    if (this.#dirty.has(key)) {
      this.#queue.push(key);
      this.#handToWaiters();
    }
    this.#checkDrained();
  }

  /**
   * True while `key` is ready to be handed out or is being processed (including a key added
   * again while it is processed). A key waiting for a delayed add is neither. For callers that
   * must leave a key's work to its worker (the ListVolumes reconciler); do not gate `add` on it.
   */
  isQueuedOrProcessing(key: string): boolean {
    return this.#dirty.has(key) || this.#processing.has(key);
  }

  /**
   * How many keys are ready to be handed out. For information only: do not gate `add` or `get`
   * on it.
   */
  len(): number {
    return this.#queue.length - this.#head;
  }

  /**
   * Stops accepting adds. Keys already ready are still handed out; once none is, every waiting
   * and later {@link get} resolves `undefined`. Stops the metrics timer. Idempotent.
   */
  shutDown(): void {
    this.#shuttingDown = true;
    this.#metricsTimer?.cancel();
    this.#metricsTimer = undefined;
    // Waiters exist only while no key is ready, so all of them are released.
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve(undefined);
    this.#checkDrained();
  }

  /**
   * Resolves once the queue is shut down and no key is being processed, i.e. every key handed out
   * has been {@link done} (client-go's `ShutDownWithDrain`, split in two). Keys still waiting do
   * not delay it.
   */
  drained(): Promise<void> {
    if (this.#isDrained()) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** True once {@link shutDown} was called. */
  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  #handToWaiters(): void {
    while (this.#waiters.length > 0) {
      const key = this.tryGet();
      if (key === undefined) return;
      this.#waiters.shift()!(key);
    }
  }

  #isDrained(): boolean {
    return this.#shuttingDown && this.#processing.size === 0;
  }

  #checkDrained(): void {
    if (this.#drainWaiters.length === 0 || !this.#isDrained()) return;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
