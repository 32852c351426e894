/**
 * The plain work queue of string keys, after client-go's `util/workqueue/queue.go` (`Typed`):
 * a dirty set, a processing set and the list of ready keys. Delays
 * (`delaying_queue.ts`), per-key backoff (`rate_limiting_queue.ts`) and the attacher's lanes
 * (`lanes.ts`) are built around it.
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../clock.ts";
import { metricsEnabled, QueueMetrics, type QueueMetricsProvider } from "./metrics.ts";
import type { Queue } from "./types.ts";

/**
 * A key the queue holds: in the dirty set, the processing set or both (client-go keeps two sets
 * and, for its metrics, an `addTimes` map; one record per key keeps one hash table instead of
 * three: with 20 000 keys queued at once each table took 1.3-1.8 MiB of V8's large-object space,
 * plus as much garbage as it grew).
 */
export interface QueuedKey {
  readonly key: string;
  /** When the key became dirty (ms of the queue clock); undefined when it is not dirty. */
  dirtyAt: number | undefined;
  /** True while a worker holds it (between `get` and `done`). */
  processing: boolean;
}

/**
 * Where the ready keys wait, in the order `get` hands them out: client-go's `Queue[T]`
 * (`queue.go`, `TypedQueueConfig.Queue`; `DefaultQueue` is a FIFO), which it opened so that an
 * implementation may change an item's priority when it is added again (`Touch`). Here it holds
 * the queue's records rather than bare keys, makes them (so that it can keep its own fields in
 * them), and `len` and `pop` may be narrowed by `from` (e.g. a lane, `lanes.ts`).
 *
 * The queue calls `push` for a dirty key that is not being processed, `touch` when a ready key
 * is added again, `pop` to hand a key out and `finished` when the worker is done with it. Each
 * call is the last thing the queue does in the operation that makes it, so a `push` may hand the
 * key out again at once.
 */
export interface ReadyList<K extends QueuedKey, F> {
  /** A new record for `key`, neither dirty nor processing. */
  newKey(key: string): K;
  push(item: K): void;
  touch(item: K): void;
  /** The ready keys (of `from`; of all when undefined). */
  len(from?: F): number;
  /** Takes the next ready key (of `from`), or undefined when none is ready. */
  pop(from?: F): K | undefined;
  /** The worker called `done` for `item`, which `pop` handed out. */
  finished(item: K): void;
}

/** A plain FIFO of ready keys: client-go's `DefaultQueue`. */
export class FifoList implements ReadyList<QueuedKey, never> {
  #items: QueuedKey[] = [];
  #head = 0;

  newKey(key: string): QueuedKey {
    return { key, dirtyAt: undefined, processing: false };
  }

  push(item: QueuedKey): void {
    this.#items.push(item);
  }

  touch(): void {}

  len(): number {
    return this.#items.length - this.#head;
  }

  pop(): QueuedKey | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head++]!;
    if (this.#head >= this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  finished(): void {}
}

/** Dependencies of {@link WorkQueue}. */
export interface WorkQueueDeps {
  /** Time source for the metrics; defaults to {@link realClock}. */
  clock?: Clock;
  /** Creates this queue's metrics; none (or the no-op provider) records nothing. */
  metricsProvider?: QueueMetricsProvider;
}

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions<K extends QueuedKey = QueuedKey, F = never> {
  /** The queue name, used as the metrics' `name` label (e.g. `csi-attacher-va`). */
  name: string;
  /**
   * How often, in ms of the clock, the unfinished-work gauges are refreshed while the queue runs
   * (client-go: 500 ms). Only used when metrics are recorded.
   */
  unfinishedWorkUpdatePeriodMs?: number;
  /** Where the ready keys wait; default a {@link FifoList}. */
  ready?: ReadyList<K, F>;
}

/** client-go's `unfinishedWorkUpdatePeriod`. */
const DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS = 500;

/**
 * A work queue of keys with client-go's guarantees:
 *
 * - Fair: keys are handed out in the order they were added (with the default {@link FifoList}).
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
 * const q = new WorkQueue({}, { name: "csi-attacher-pv" });
 * q.add("pv-1");
 * const key = await q.get(); // "pv-1"
 * try {
 *   // ... process key ...
 * } finally {
 *   q.done(key!);
 * }
 * ```
 */
export class WorkQueue<K extends QueuedKey = QueuedKey, F = never> implements Queue {
  /** The queue name (the metrics' `name` label). */
  readonly name: string;
  #clock: Clock;
  #metrics: QueueMetrics | undefined;
  #ready: ReadyList<K, F>;
  /** The dirty and processing sets: every key that is dirty, being processed, or both. */
  #keys = new Map<string, K>();
  #processingCount = 0;
  /** Pending `get()` calls, oldest first. Non-empty only while no key is ready. */
  #waiters: Array<(key: string | undefined) => void> = [];
  /** Resolved by `done` once nothing is processed, after {@link shutDownWithDrain}. */
  #drained: Array<() => void> = [];
  #shuttingDown = false;
  #metricsTimer: Timer | undefined;

  /** @throws {RangeError} when `unfinishedWorkUpdatePeriodMs` is not a positive number. */
  constructor(deps: WorkQueueDeps, opts: WorkQueueOptions<K, F>) {
    this.name = opts.name;
    const clock = deps.clock ?? realClock;
    this.#clock = clock;
    this.#ready = opts.ready ?? (new FifoList() as unknown as ReadyList<K, F>);
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

  /**
   * Marks `key` as needing processing. Ignored after {@link shutDown}. A key that is already
   * ready keeps its place (the ready list is told, and may move it).
   */
  add(key: string): void {
    if (this.#shuttingDown) return;
    let item = this.#keys.get(key);
    if (item?.dirtyAt !== undefined) {
      if (!item.processing) this.#ready.touch(item);
      return;
    }
    const now = this.#clock.now();
    this.#metrics?.add();
    if (item === undefined) {
      item = this.#ready.newKey(key);
      this.#keys.set(key, item);
    }
    item.dirtyAt = now;
    if (item.processing) return;
    this.#ready.push(item);
    this.#handToWaiters();
  }

  /**
   * Waits for a key and marks it as being processed; a key that is ready is taken at once.
   * Resolves `undefined` once the queue is shut down and no key is ready. The caller MUST call
   * {@link done} with the key it received.
   */
  get(): Promise<string | undefined> {
    const key = this.tryGet();
    if (key !== undefined || this.#shuttingDown) return Promise.resolve(key);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /**
   * Takes a ready key (of `from`, passed to the ready list) without waiting, or returns
   * `undefined` when none is ready. Not in client-go, whose `Get` blocks: for the layers that
   * wait by themselves (`lanes.ts`). A key returned is being processed: the caller MUST call
   * {@link done} with it.
   */
  tryGet(from?: F): string | undefined {
    const item = this.#ready.pop(from);
    if (item === undefined) return undefined;
    this.#metrics?.get(item.key, item.dirtyAt!);
    item.dirtyAt = undefined;
    item.processing = true;
    this.#processingCount++;
    return item.key;
  }

  /**
   * Ends the processing of `key`. If it was added while being processed it becomes ready again
   * (also after {@link shutDown}). Calling it for a key that is not being processed does nothing.
   */
  done(key: string): void {
    const item = this.#keys.get(key);
    if (item === undefined || !item.processing) return;
    this.#metrics?.done(key);
    item.processing = false;
    this.#processingCount--;
    if (this.#processingCount === 0 && this.#drained.length > 0) {
      const drained = this.#drained;
      this.#drained = [];
      for (const resolve of drained) resolve();
    }
    this.#ready.finished(item);
    if (item.dirtyAt === undefined) {
      this.#keys.delete(key);
      return;
    }
    this.#ready.push(item);
    this.#handToWaiters();
  }

  /** How many keys are ready to be handed out. For information only: do not gate on it. */
  len(): number {
    return this.#ready.len();
  }

  /**
   * True while `key` is in the dirty set or the processing set: ready, added again while it is
   * processed, or processed. Not in client-go (whose sets are private): for the questions the
   * layers above answer (`lanes.ts`).
   */
  has(key: string): boolean {
    return this.#keys.has(key);
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
  }

  /**
   * Shuts down (see {@link shutDown}) and resolves once every key handed out is done: client-go's
   * `ShutDownWithDrain`. The workers MUST call `done`, or it never resolves.
   */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.#processingCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
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
}
