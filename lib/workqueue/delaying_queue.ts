/**
 * A work queue that can add keys later, after client-go's `util/workqueue/delaying_queue.go`
 * (`delayingType`, which holds the `TypedInterface` below it and adds to it when a key is due).
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../clock.ts";
import { type DueEntry, DueHeap } from "../due_heap.ts";
import { type CounterMetric, metricsEnabled } from "./metrics.ts";
import { WorkQueue, type WorkQueueDeps } from "./queue.ts";
import type { DelayingQueue, Queue } from "./types.ts";

/** Dependencies of {@link DelayingWorkQueue}. */
export interface DelayingWorkQueueDeps extends WorkQueueDeps {
  /**
   * The queue due keys are added to (client-go's `DelayingQueueConfig.Queue`); default a plain
   * {@link WorkQueue} made from these deps and the options.
   */
  queue?: Queue;
}

/** Options of {@link DelayingWorkQueue}. */
export interface DelayingWorkQueueOptions {
  /** The queue name, the `name` label of the retries metric (and of the default queue's). */
  name: string;
  /** Passed to the default queue (see {@link import("./queue.ts").WorkQueueOptions}). */
  unfinishedWorkUpdatePeriodMs?: number;
}

/**
 * The longest delay one runtime timer can take (`setTimeout` fires at once beyond it); longer
 * waits are split and re-armed.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A key waiting for its due time (ms of the queue clock; equal ones first added, first ready). */
interface WaitingEntry extends DueEntry {
  key: string;
}

/**
 * A queue with {@link addAfter}, around the queue below it: waiting keys are held here (they do
 * not count in `len()`) and are added to the queue below, in order of due time, when the clock
 * reaches it. Everything else is the queue below's.
 *
 * Guarantees:
 * - a key waits at most once: adding it again with an earlier due time moves it earlier, a later
 *   due time is ignored (client-go keeps the earliest);
 * - a key may wait and be ready at the same time (e.g. `add` after `addAfter`); when its due time
 *   comes the add folds as usual;
 * - one clock timer is armed at a time, for the earliest due key; {@link shutDown} cancels it and
 *   drops every waiting key, so nothing is left scheduled.
 */
export class DelayingWorkQueue implements DelayingQueue {
  #queue: Queue;
  #clock: Clock;
  #retries: CounterMetric | undefined;
  /** Every entry is also in `#waiting` under its key. */
  #heap = new DueHeap<WaitingEntry>();
  #waiting = new Map<string, WaitingEntry>();
  #seq = 0;
  #timer: Timer | undefined;
  /** Due time of the entry `#timer` was armed for. */
  #timerFor: number | undefined;

  /**
   * @throws {RangeError} when `unfinishedWorkUpdatePeriodMs` is not a positive number.
   */
  constructor(deps: DelayingWorkQueueDeps, opts: DelayingWorkQueueOptions) {
    this.#queue = deps.queue ?? new WorkQueue(deps, opts);
    this.#clock = deps.clock ?? realClock;
    if (metricsEnabled(deps.metricsProvider, opts.name)) {
      this.#retries = deps.metricsProvider.newRetriesMetric(opts.name);
    }
  }

  /**
   * Adds `key` after `ms` milliseconds of the queue's clock; `ms <= 0` adds it at once. Ignored
   * after {@link shutDown}. Counts one retry in the metrics (as client-go does for every
   * `AddAfter`).
   *
   * @throws {RangeError} when `ms` is NaN.
   */
  addAfter(key: string, ms: number): void {
    if (Number.isNaN(ms)) throw new RangeError(`addAfter(${JSON.stringify(key)}): delay is NaN`);
    if (this.#queue.shuttingDown()) return;
    this.#retries?.inc();
    if (ms <= 0) {
      this.#queue.add(key);
      return;
    }
    const at = this.#clock.now() + ms;
    const existing = this.#waiting.get(key);
    if (existing !== undefined) {
      if (at < existing.due) {
        existing.due = at;
        this.#heap.movedEarlier(existing);
        this.#arm();
      }
      return;
    }
    const entry: WaitingEntry = { key, due: at, seq: this.#seq++, index: -1 };
    this.#heap.push(entry);
    this.#waiting.set(key, entry);
    this.#arm();
  }

  /** Adds `key` to the queue below at once. */
  add(key: string): void {
    this.#queue.add(key);
  }

  /** The queue below's {@link Queue.get}. */
  get(): Promise<string | undefined> {
    return this.#queue.get();
  }

  /** The queue below's {@link Queue.done}. */
  done(key: string): void {
    this.#queue.done(key);
  }

  /** The keys ready in the queue below (waiting keys are not counted). */
  len(): number {
    return this.#queue.len();
  }

  /** Cancels the timer, drops every waiting key and shuts the queue below down. */
  shutDown(): void {
    this.#stop();
    this.#queue.shutDown();
  }

  /** Like {@link shutDown}, and resolves once the queue below is drained. */
  shutDownWithDrain(): Promise<void> {
    this.#stop();
    return this.#queue.shutDownWithDrain();
  }

  /** The queue below's {@link Queue.shuttingDown}. */
  shuttingDown(): boolean {
    return this.#queue.shuttingDown();
  }

  #stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#timerFor = undefined;
    this.#heap.clear();
    this.#waiting.clear();
  }

  /** Arms the timer for the earliest entry, unless it is already armed for it. */
  #arm(): void {
    const first = this.#heap.peek();
    if (first === undefined) {
      this.#timer?.cancel();
      this.#timer = undefined;
      this.#timerFor = undefined;
      return;
    }
    if (this.#timer !== undefined && this.#timerFor === first.due) return;
    this.#timer?.cancel();
    this.#timerFor = first.due;
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, first.due - this.#clock.now()));
    this.#timer = this.#clock.setTimer(wait, () => this.#fire());
  }

  /** Adds every entry that is due, earliest first, then re-arms for the next one. */
  #fire(): void {
    this.#timer = undefined;
    this.#timerFor = undefined;
    const now = this.#clock.now();
    for (;;) {
      const first = this.#heap.peek();
      if (first === undefined || first.due > now) break;
      this.#heap.remove(first);
      this.#waiting.delete(first.key);
      this.#queue.add(first.key);
    }
    this.#arm();
  }
}
