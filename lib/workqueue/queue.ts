/**
 * The basic work queue of string keys, after client-go's `util/workqueue/queue.go`.
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../clock.ts";
import { metricsEnabled, QueueMetrics, type QueueMetricsProvider } from "./metrics.ts";
import type { LanedQueue, OldestReady } from "./types.ts";

export type { OldestReady } from "./types.ts";

/** Dependencies of {@link WorkQueue}. */
export interface WorkQueueDeps {
  /** Time source for the metrics; defaults to {@link realClock}. */
  clock?: Clock;
  /** Creates this queue's metrics; none (or the no-op provider) records nothing. */
  metricsProvider?: QueueMetricsProvider;
}

/**
 * Ready keys split into lanes, each served by its own workers (e.g. attach and detach, so that a
 * burst of one never waits behind the other). Which lane a key goes to is decided each time it
 * becomes ready, and again when it is added while it waits: a key moves to the lane its current
 * state belongs to. The per-key guarantees hold across lanes, since a key is in at most one lane
 * and never handed out while it is being processed.
 */
export interface QueueLanes {
  /** The lane names; the first one also takes keys {@link laneOf} puts in no known lane. */
  names: readonly string[];
  /** The lane `key` belongs in now. */
  laneOf(key: string): string;
}

/** The lane of a queue made without {@link WorkQueueOptions.lanes}. */
export const DEFAULT_LANE = "";

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** The queue name, used as the metrics' `name` label (e.g. `csi-attacher-va`). */
  name: string;
  /**
   * How often, in ms of the clock, the unfinished-work gauges are refreshed while the queue runs
   * (client-go: 500 ms). Only used when metrics are recorded.
   */
  unfinishedWorkUpdatePeriodMs?: number;
  /**
   * Lanes of ready keys; default one lane, {@link DEFAULT_LANE}. With metrics, each lane also
   * records the workqueue metrics under `<name>-<lane>`, besides the queue's own under `<name>`.
   */
  lanes?: QueueLanes;
}

/** One lane's ready keys in FIFO order. */
interface Lane {
  name: string;
  /**
   * Keys from `head` on, in the order they became ready, with the `seq` each got then (in
   * `seqs`, same index). An entry is live only while its key's state still names this lane and
   * the same `seq`; entries of keys that were handed out or moved to another lane are skipped
   * (and dropped) when reached.
   */
  entries: KeyState[];
  seqs: number[];
  head: number;
  /** Number of live entries. */
  size: number;
  /** Pending `get(lane)` calls, oldest first. Non-empty only while the lane has no live entry. */
  waiters: Array<(key: string | undefined) => void>;
  metrics: QueueMetrics | undefined;
}

/**
 * Everything the queue knows of one key that is dirty or being processed (client-go keeps a
 * `dirty` set, a `processing` set and, for its metrics, an `addTimes` map; one record per key
 * keeps one hash table instead of five: with 20 000 keys queued at once each table took 1.3-1.8
 * MiB of V8's large-object space, plus as much garbage as it grew).
 */
interface KeyState {
  readonly key: string;
  /** When the key became dirty (ms of the queue clock); undefined when it is not dirty. */
  dirtyAt: number | undefined;
  /** The lane the key is ready in; undefined when it is not ready. */
  lane: Lane | undefined;
  /** Its place in `lane` (see {@link Lane.entries}). */
  seq: number;
  /** When it became ready in `lane` (the lane's queue latency counts from here). */
  readyAt: number;
  /** The lane it was handed out from; undefined when it is not being processed. */
  processing: Lane | undefined;
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
 * ready key goes to the longest-waiting one of its lane.
 *
 * It is a {@link LanedQueue}: with {@link WorkQueueOptions.lanes} the ready keys are split into
 * lanes and workers take keys of one lane; the guarantees above hold for each key whatever lane
 * it is in: a key is never ready in two lanes, nor ready while it is being processed. Without,
 * it has one lane and is used as a plain {@link Queue} (the lane is where a ready key waits, so
 * the lanes live in the ready list itself rather than in a wrapper around it).
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
export class WorkQueue implements LanedQueue {
  /** The queue name (the metrics' `name` label). */
  readonly name: string;
  #clock: Clock;
  #metrics: QueueMetrics | undefined;
  #lanes: Lane[];
  #laneOf: ((key: string) => string) | undefined;
  /** Every key that is dirty (ready, or added again while processed) or being processed. */
  #keys = new Map<string, KeyState>();
  /** Number of ready keys, in all lanes. */
  #readyCount = 0;
  #seq = 0;
  /** Pending `get()` calls of any lane, oldest first. Non-empty only while no key is ready. */
  #anyWaiters: Array<(key: string | undefined) => void> = [];
  #shuttingDown = false;
  #metricsTimer: Timer | undefined;

  /**
   * @throws {RangeError} when `unfinishedWorkUpdatePeriodMs` is not a positive number, or the
   *   lanes are empty or named twice.
   */
  constructor(deps: WorkQueueDeps, opts: WorkQueueOptions) {
    this.name = opts.name;
    const clock = deps.clock ?? realClock;
    this.#clock = clock;
    const periodMs = opts.unfinishedWorkUpdatePeriodMs ?? DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS;
    if (!(periodMs > 0)) {
      throw new RangeError(`unfinishedWorkUpdatePeriodMs must be positive, got ${periodMs}`);
    }
    const laneNames = opts.lanes?.names ?? [DEFAULT_LANE];
    if (laneNames.length === 0 || new Set(laneNames).size !== laneNames.length) {
      throw new RangeError(
        `Cannot create queue ${opts.name}: lanes must be distinct and at least one, got ${
          JSON.stringify(laneNames)
        }`,
      );
    }
    this.#laneOf = opts.lanes?.laneOf;
    const provider = metricsEnabled(deps.metricsProvider, opts.name)
      ? deps.metricsProvider
      : undefined;
    this.#lanes = laneNames.map((name) => ({
      name,
      entries: [],
      seqs: [],
      head: 0,
      size: 0,
      waiters: [],
      metrics: provider !== undefined && opts.lanes !== undefined
        ? new QueueMetrics({ clock, provider }, {
          name: `${opts.name}-${name}`,
        })
        : undefined,
    }));
    if (provider !== undefined) {
      const metrics = new QueueMetrics({ clock, provider }, {
        name: opts.name,
      });
      this.#metrics = metrics;
      // Like client-go's updateUnfinishedWorkLoop: refresh until shut down. Only queues that
      // record metrics run it, so metric-less queues hold no timer.
      const tick = () => {
        metrics.updateUnfinishedWork();
        for (const lane of this.#lanes) lane.metrics?.updateUnfinishedWork();
        this.#metricsTimer = clock.setTimer(periodMs, tick);
      };
      this.#metricsTimer = clock.setTimer(periodMs, tick);
    }
  }

  /**
   * Marks `key` as needing processing. Ignored after {@link shutDown}. A key that is already
   * ready keeps its place, unless its lane changed: then it moves to the back of its new lane.
   */
  add(key: string): void {
    if (this.#shuttingDown) return;
    let state = this.#keys.get(key);
    if (state?.dirtyAt !== undefined) {
      if (this.#laneOf !== undefined && state.processing === undefined) this.#reclassify(state);
      return;
    }
    const now = this.#clock.now();
    this.#metrics?.add();
    if (state === undefined) {
      state = { key, dirtyAt: now, lane: undefined, seq: 0, readyAt: 0, processing: undefined };
      this.#keys.set(key, state);
    } else {
      state.dirtyAt = now;
    }
    if (state.processing !== undefined) return;
    this.#makeReady(state);
  }

  /**
   * Waits for a key of `lane` (any lane when undefined) and marks it as being processed.
   * Resolves `undefined` once the queue is shut down and no such key is ready. The caller MUST
   * call {@link done} with the key it received.
   *
   * @throws {RangeError} for a lane the queue does not have.
   */
  get(lane?: string): Promise<string | undefined> {
    const key = this.#tryGet(lane);
    if (key !== undefined || this.#shuttingDown) return Promise.resolve(key);
    const waiters = lane === undefined ? this.#anyWaiters : this.#lane(lane).waiters;
    return new Promise((resolve) => waiters.push(resolve));
  }

  /**
   * Takes a ready key of `lane` without waiting (when undefined: the key that became ready first,
   * whatever its lane), or returns `undefined` when none is ready. A key returned is being
   * processed: the caller MUST call {@link done} with it.
   *
   * @throws {RangeError} for a lane the queue does not have.
   */
  #tryGet(lane?: string): string | undefined {
    let from: Lane | undefined;
    if (lane !== undefined) {
      from = this.#lane(lane);
    } else {
      let first: number | undefined;
      for (const l of this.#lanes) {
        const head = this.#peek(l);
        if (head !== undefined && (first === undefined || head.seq < first)) {
          first = head.seq;
          from = l;
        }
      }
    }
    if (from === undefined) return undefined;
    const state = this.#peek(from);
    if (state === undefined) return undefined;
    from.head++;
    this.#compact(from);
    const key = state.key;
    state.lane = undefined;
    from.size--;
    this.#readyCount--;
    this.#metrics?.get(key, state.dirtyAt!);
    from.metrics?.get(key, state.readyAt);
    state.dirtyAt = undefined;
    state.processing = from;
    return key;
  }

  /**
   * Ends the processing of `key`. If it was added while being processed it becomes ready again,
   * at the back of the lane it now belongs to (also after {@link shutDown}). Calling it for a key
   * that is not being processed does nothing.
   */
  done(key: string): void {
    const state = this.#keys.get(key);
    const lane = state?.processing;
    if (state === undefined || lane === undefined) return;
    this.#metrics?.done(key);
    lane.metrics?.done(key);
    state.processing = undefined;
    if (state.dirtyAt !== undefined) this.#makeReady(state);
    else this.#keys.delete(key);
  }

  /**
   * How many keys are ready to be handed out (in `lane`, or in all lanes). For information only:
   * do not gate `add` or `get` on it.
   *
   * @throws {RangeError} for a lane the queue does not have.
   */
  len(lane?: string): number {
    if (lane !== undefined) return this.#lane(lane).size;
    return this.#readyCount;
  }

  /** The lane names, in the order given at construction. */
  lanes(): readonly string[] {
    return this.#lanes.map((l) => l.name);
  }

  /**
   * The ready key of `lane` that was added first, or undefined when the lane has none (for
   * backlog reports).
   *
   * @throws {RangeError} for a lane the queue does not have.
   */
  oldestReady(lane: string): OldestReady | undefined {
    const l = this.#lane(lane);
    let oldest: OldestReady | undefined;
    // A key that moved lanes may sit behind younger ones, so every live entry is looked at.
    for (let i = l.head; i < l.entries.length; i++) {
      const state = l.entries[i]!;
      if (state.lane !== l || state.seq !== l.seqs[i]) continue;
      const addedAt = state.dirtyAt!;
      if (oldest === undefined || addedAt < oldest.addedAt) {
        oldest = { key: state.key, addedAt };
      }
    }
    return oldest;
  }

  /**
   * True while `key` is ready to be handed out or is being processed (including a key added
   * again while it is processed): a sync of it is coming or running. A key waiting for a delayed
   * add is neither. For callers that must leave a key's work to its worker (the ListVolumes
   * reconciler); do not gate `add` on it.
   */
  isQueuedOrProcessing(key: string): boolean {
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
    // Waiters exist only while no key of their lane is ready, so all of them are released.
    const waiters = [...this.#anyWaiters, ...this.#lanes.flatMap((l) => l.waiters)];
    this.#anyWaiters = [];
    for (const l of this.#lanes) l.waiters = [];
    for (const resolve of waiters) resolve(undefined);
  }

  /** True once {@link shutDown} was called. */
  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  #lane(name: string): Lane {
    const lane = this.#lanes.find((l) => l.name === name);
    if (lane === undefined) {
      throw new RangeError(`Queue ${this.name} has no lane ${JSON.stringify(name)}`);
    }
    return lane;
  }

  /** The lane `key` belongs in now; a name the queue does not know means the first lane. */
  #classify(key: string): Lane {
    if (this.#laneOf === undefined) return this.#lanes[0]!;
    const name = this.#laneOf(key);
    return this.#lanes.find((l) => l.name === name) ?? this.#lanes[0]!;
  }

  /** Puts a dirty key that is not being processed at the back of its lane. */
  #makeReady(state: KeyState): void {
    const lane = this.#classify(state.key);
    const seq = this.#seq++;
    lane.entries.push(state);
    lane.seqs.push(seq);
    lane.size++;
    this.#readyCount++;
    state.lane = lane;
    state.seq = seq;
    state.readyAt = this.#clock.now();
    lane.metrics?.add();
    this.#handToWaiters(lane);
  }

  /** Moves a ready key to the lane it belongs in now, if that changed. */
  #reclassify(state: KeyState): void {
    const from = state.lane;
    if (from === undefined) return;
    const lane = this.#classify(state.key);
    if (lane === from) return;
    // The old lane's entry is now stale and is skipped when reached.
    from.size--;
    this.#readyCount--;
    from.metrics?.withdraw();
    state.lane = undefined;
    this.#makeReady(state);
  }

  /** The first live entry of `lane`, dropping stale entries before it. */
  #peek(lane: Lane): KeyState | undefined {
    while (lane.head < lane.entries.length) {
      const state = lane.entries[lane.head]!;
      if (state.lane === lane && state.seq === lane.seqs[lane.head]) return state;
      lane.head++;
    }
    this.#compact(lane);
    return undefined;
  }

  /** Frees the consumed part of the lane's array. */
  #compact(lane: Lane): void {
    if (lane.head >= lane.entries.length) {
      lane.entries = [];
      lane.seqs = [];
      lane.head = 0;
    } else if (lane.head >= 1024 && lane.head * 2 >= lane.entries.length) {
      lane.entries = lane.entries.slice(lane.head);
      lane.seqs = lane.seqs.slice(lane.head);
      lane.head = 0;
    }
  }

  #handToWaiters(lane: Lane): void {
    while (lane.waiters.length > 0) {
      const key = this.#tryGet(lane.name);
      if (key === undefined) return;
      lane.waiters.shift()!(key);
    }
    while (this.#anyWaiters.length > 0) {
      const key = this.#tryGet(lane.name);
      if (key === undefined) return;
      this.#anyWaiters.shift()!(key);
    }
  }
}
