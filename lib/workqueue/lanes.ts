/**
 * Lanes of ready keys, each served by its own workers (the attacher's attach and detach lanes,
 * `../controller/lanes.ts`), and the questions a controller asks of its queue (the oldest key of
 * a lane, whether a key is queued or processed). Not in client-go, which has one list of ready
 * keys per queue: built on its `Queue[T]` seam (`queue.go`), whose `Touch` exists so that an
 * item may change priority when it is added again.
 *
 * The layers: a {@link LanedWorkQueue} holds a {@link RateLimitingWorkQueue}, around a
 * {@link DelayingWorkQueue}, around a plain {@link WorkQueue} whose ready keys wait in a
 * {@link LaneList}.
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../clock.ts";
import { DelayingWorkQueue } from "./delaying_queue.ts";
import { metricsEnabled, QueueMetrics, type QueueMetricsProvider } from "./metrics.ts";
import { type QueuedKey, type ReadyList, WorkQueue } from "./queue.ts";
import { RateLimitingWorkQueue } from "./rate_limiting_queue.ts";
import type { LanedQueue, OldestReady, RateLimiter, RateLimitingQueue } from "./types.ts";

export type { OldestReady } from "./types.ts";

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

/** The lane of a queue made without {@link LanedWorkQueueOptions.lanes}. */
export const DEFAULT_LANE = "";

/** One lane's ready keys in FIFO order. */
interface Lane {
  name: string;
  /**
   * Keys from `head` on, in the order they became ready, with the `seq` each got then (in
   * `seqs`, same index). An entry is live only while its key's record still names this lane and
   * the same `seq`; entries of keys that were handed out or moved to another lane are skipped
   * (and dropped) when reached.
   */
  entries: LanedKey[];
  seqs: number[];
  head: number;
  /** Number of live entries. */
  size: number;
  metrics: QueueMetrics | undefined;
}

/** A key of the queue, with where it waits (kept by the {@link LaneList}). */
interface LanedKey extends QueuedKey {
  /** The lane the key is ready in; undefined when it is not ready. */
  lane: Lane | undefined;
  /** Its place in `lane` (see {@link Lane.entries}). */
  seq: number;
  /** When it became ready in `lane` (the lane's queue latency counts from here). */
  readyAt: number;
  /** The lane it was handed out from; undefined when it is not being processed. */
  from: Lane | undefined;
}

/** Dependencies of {@link LaneList}. */
export interface LaneListDeps {
  /** Time source for the lanes' metrics; defaults to {@link realClock}. */
  clock?: Clock;
  /** Creates the metrics of each lane (named `<name>-<lane>`), when lanes are given. */
  metricsProvider?: QueueMetricsProvider;
  /** Called when a key becomes ready in `lane`, after it is in it. */
  onReady(lane: string): void;
}

/**
 * The ready list of a plain {@link WorkQueue} split into lanes: `push` puts a key at the back of
 * the lane it belongs in, `touch` moves a waiting key whose lane changed, `pop(lane)` takes the
 * first key of one lane and `pop()` the key that became ready first, whatever its lane.
 */
export class LaneList implements ReadyList<LanedKey, string> {
  #name: string;
  #clock: Clock;
  #lanes: Lane[];
  #laneOf: ((key: string) => string) | undefined;
  #onReady: (lane: string) => void;
  /** Number of ready keys, in all lanes. */
  #readyCount = 0;
  #seq = 0;

  /** @throws {RangeError} when the lanes are empty or named twice. */
  constructor(deps: LaneListDeps, opts: { name: string; lanes?: QueueLanes }) {
    const clock = deps.clock ?? realClock;
    this.#name = opts.name;
    this.#clock = clock;
    this.#onReady = deps.onReady;
    const laneNames = opts.lanes?.names ?? [DEFAULT_LANE];
    if (laneNames.length === 0 || new Set(laneNames).size !== laneNames.length) {
      throw new RangeError(
        `Cannot create queue ${opts.name}: lanes must be distinct and at least one, got ${
          JSON.stringify(laneNames)
        }`,
      );
    }
    this.#laneOf = opts.lanes?.laneOf;
    const provider = opts.lanes !== undefined && metricsEnabled(deps.metricsProvider, opts.name)
      ? deps.metricsProvider
      : undefined;
    this.#lanes = laneNames.map((name) => ({
      name,
      entries: [],
      seqs: [],
      head: 0,
      size: 0,
      metrics: provider === undefined
        ? undefined
        : new QueueMetrics({ clock, provider }, { name: `${opts.name}-${name}` }),
    }));
  }

  /** True when some lane records metrics (and so needs {@link updateUnfinishedWork}). */
  get hasMetrics(): boolean {
    return this.#lanes.some((l) => l.metrics !== undefined);
  }

  newKey(key: string): LanedKey {
    return {
      key,
      dirtyAt: undefined,
      processing: false,
      lane: undefined,
      seq: 0,
      readyAt: 0,
      from: undefined,
    };
  }

  /** Puts a dirty key that is not being processed at the back of its lane. */
  push(item: LanedKey): void {
    const lane = this.#classify(item.key);
    const seq = this.#seq++;
    lane.entries.push(item);
    lane.seqs.push(seq);
    lane.size++;
    this.#readyCount++;
    item.lane = lane;
    item.seq = seq;
    item.readyAt = this.#clock.now();
    lane.metrics?.add();
    this.#onReady(lane.name);
  }

  /** Moves a ready key to the lane it belongs in now, if that changed. */
  touch(item: LanedKey): void {
    const from = item.lane;
    if (this.#laneOf === undefined || from === undefined) return;
    if (this.#classify(item.key) === from) return;
    // The old lane's entry is now stale and is skipped when reached.
    from.size--;
    this.#readyCount--;
    from.metrics?.withdraw();
    item.lane = undefined;
    this.push(item);
  }

  /** @throws {RangeError} for a lane the list does not have. */
  len(lane?: string): number {
    if (lane !== undefined) return this.#lane(lane).size;
    return this.#readyCount;
  }

  /** @throws {RangeError} for a lane the list does not have. */
  pop(lane?: string): LanedKey | undefined {
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
    const item = this.#peek(from);
    if (item === undefined) return undefined;
    from.head++;
    this.#compact(from);
    item.lane = undefined;
    from.size--;
    this.#readyCount--;
    from.metrics?.get(item.key, item.readyAt);
    item.from = from;
    return item;
  }

  finished(item: LanedKey): void {
    item.from?.metrics?.done(item.key);
    item.from = undefined;
  }

  /** The lane names, in the order given at construction. */
  names(): readonly string[] {
    return this.#lanes.map((l) => l.name);
  }

  /** @throws {RangeError} for a lane the list does not have. */
  oldestReady(lane: string): OldestReady | undefined {
    const l = this.#lane(lane);
    let oldest: OldestReady | undefined;
    // A key that moved lanes may sit behind younger ones, so every live entry is looked at.
    for (let i = l.head; i < l.entries.length; i++) {
      const item = l.entries[i]!;
      if (item.lane !== l || item.seq !== l.seqs[i]) continue;
      const addedAt = item.dirtyAt!;
      if (oldest === undefined || addedAt < oldest.addedAt) {
        oldest = { key: item.key, addedAt };
      }
    }
    return oldest;
  }

  /** Refreshes each lane's unfinished-work gauges. */
  updateUnfinishedWork(): void {
    for (const lane of this.#lanes) lane.metrics?.updateUnfinishedWork();
  }

  #lane(name: string): Lane {
    const lane = this.#lanes.find((l) => l.name === name);
    if (lane === undefined) {
      throw new RangeError(`Queue ${this.#name} has no lane ${JSON.stringify(name)}`);
    }
    return lane;
  }

  /** The lane `key` belongs in now; a name the list does not know means the first lane. */
  #classify(key: string): Lane {
    if (this.#laneOf === undefined) return this.#lanes[0]!;
    const name = this.#laneOf(key);
    return this.#lanes.find((l) => l.name === name) ?? this.#lanes[0]!;
  }

  /** The first live entry of `lane`, dropping stale entries before it. */
  #peek(lane: Lane): LanedKey | undefined {
    while (lane.head < lane.entries.length) {
      const item = lane.entries[lane.head]!;
      if (item.lane === lane && item.seq === lane.seqs[lane.head]) return item;
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
}

/** Dependencies of {@link LanedWorkQueue}. */
export interface LanedWorkQueueDeps {
  /** Time source of the delays and the metrics; defaults to {@link realClock}. */
  clock?: Clock;
  /** Creates the metrics; none (or the no-op provider) records nothing. */
  metricsProvider?: QueueMetricsProvider;
  /** Decides each key's backoff, e.g. an {@link import("./rate_limiters.ts").ItemExponentialFailureRateLimiter}. */
  rateLimiter: RateLimiter;
}

/** Options of {@link LanedWorkQueue}. */
export interface LanedWorkQueueOptions {
  /** The queue name, used as the metrics' `name` label (e.g. `csi-attacher-va`). */
  name: string;
  /** See {@link import("./queue.ts").WorkQueueOptions}; also the lanes' gauges' period. */
  unfinishedWorkUpdatePeriodMs?: number;
  /**
   * Lanes of ready keys; default one lane, {@link DEFAULT_LANE}. With metrics, each lane also
   * records the workqueue metrics under `<name>-<lane>`, besides the queue's own under `<name>`.
   */
  lanes?: QueueLanes;
}

/** client-go's `unfinishedWorkUpdatePeriod`. */
const DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS = 500;

/**
 * A rate-limiting queue whose ready keys wait in lanes, each with its own workers: the
 * controller's queue. The queue work (folding, one worker per key, delays, backoff, metrics)
 * is the layers' below (see the module doc); this layer adds `get(lane)`, waiting for a key of
 * one lane, and the controller's questions.
 *
 * A key is never ready in two lanes, nor ready while it is being processed; each ready key goes
 * to the longest-waiting worker of its lane (or of any lane). After {@link shutDown} the keys
 * already ready are still handed out, then `get` resolves `undefined`.
 *
 * @example
 * ```ts
 * import { ItemExponentialFailureRateLimiter } from "./rate_limiters.ts";
 *
 * const q = new LanedWorkQueue({
 *   rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 }),
 * }, {
 *   name: "csi-attacher-va",
 *   lanes: { names: ["attach", "detach"], laneOf: (key) => key.startsWith("d") ? "detach" : "attach" },
 * });
 * q.add("a-1");
 * const key = await q.get("attach"); // "a-1"
 * q.done(key!);
 * q.shutDown();
 * ```
 */
export class LanedWorkQueue implements RateLimitingQueue, LanedQueue {
  /** The queue name (the metrics' `name` label). */
  readonly name: string;
  #list: LaneList;
  #base: WorkQueue<LanedKey, string>;
  #queue: RateLimitingWorkQueue;
  /** Pending `get(lane)` calls per lane, oldest first; non-empty only while it has no key ready. */
  #waiters = new Map<string, Array<(key: string | undefined) => void>>();
  /** Pending `get()` calls of any lane, oldest first. Non-empty only while no key is ready. */
  #anyWaiters: Array<(key: string | undefined) => void> = [];
  /** Number of pending `get` calls, of one lane or any (so that a push without one costs nothing). */
  #waiting = 0;
  #metricsTimer: Timer | undefined;

  /**
   * @throws {RangeError} when `unfinishedWorkUpdatePeriodMs` is not a positive number, or the
   *   lanes are empty or named twice.
   */
  constructor(deps: LanedWorkQueueDeps, opts: LanedWorkQueueOptions) {
    this.name = opts.name;
    const clock = deps.clock ?? realClock;
    this.#list = new LaneList({
      clock,
      metricsProvider: deps.metricsProvider,
      onReady: (lane) => this.#handToWaiters(lane),
    }, opts);
    for (const lane of this.#list.names()) this.#waiters.set(lane, []);
    this.#base = new WorkQueue(deps, { ...opts, ready: this.#list });
    const delaying = new DelayingWorkQueue({ ...deps, queue: this.#base }, opts);
    this.#queue = new RateLimitingWorkQueue({ ...deps, queue: delaying }, opts);
    if (this.#list.hasMetrics) {
      const periodMs = opts.unfinishedWorkUpdatePeriodMs ??
        DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD_MS;
      const tick = () => {
        this.#list.updateUnfinishedWork();
        this.#metricsTimer = clock.setTimer(periodMs, tick);
      };
      this.#metricsTimer = clock.setTimer(periodMs, tick);
    }
  }

  /** Marks `key` as needing processing (see {@link WorkQueue.add}); it goes to its lane. */
  add(key: string): void {
    this.#queue.add(key);
  }

  /** See {@link DelayingWorkQueue.addAfter}. */
  addAfter(key: string, ms: number): void {
    this.#queue.addAfter(key, ms);
  }

  /** See {@link RateLimitingWorkQueue.addRateLimited}. */
  addRateLimited(key: string): void {
    this.#queue.addRateLimited(key);
  }

  /** See {@link RateLimitingWorkQueue.forget}. */
  forget(key: string): void {
    this.#queue.forget(key);
  }

  /** See {@link RateLimitingWorkQueue.numRequeues}. */
  numRequeues(key: string): number {
    return this.#queue.numRequeues(key);
  }

  /**
   * Waits for a key of `lane` (any lane when undefined) and marks it as being processed.
   * Resolves `undefined` once the queue is shut down and no such key is ready. The caller MUST
   * call {@link done} with the key it received.
   *
   * @throws {RangeError} for a lane the queue does not have.
   */
  get(lane?: string): Promise<string | undefined> {
    const key = this.#base.tryGet(lane);
    if (key !== undefined || this.#base.shuttingDown()) return Promise.resolve(key);
    const waiters = lane === undefined ? this.#anyWaiters : this.#waiters.get(lane)!;
    this.#waiting++;
    return new Promise((resolve) => waiters.push(resolve));
  }

  /** Ends the processing of `key`; added meanwhile, it goes to the back of its lane now. */
  done(key: string): void {
    this.#queue.done(key);
  }

  /**
   * How many keys are ready to be handed out (in `lane`, or in all lanes). For information only:
   * do not gate `add` or `get` on it.
   *
   * @throws {RangeError} for a lane the queue does not have.
   */
  len(lane?: string): number {
    return this.#list.len(lane);
  }

  /** The lane names, in the order given at construction. */
  lanes(): readonly string[] {
    return this.#list.names();
  }

  /**
   * The ready key of `lane` that was added first, or undefined when the lane has none (for
   * backlog reports).
   *
   * @throws {RangeError} for a lane the queue does not have.
   */
  oldestReady(lane: string): OldestReady | undefined {
    return this.#list.oldestReady(lane);
  }

  /**
   * True while `key` is ready to be handed out or is being processed (including a key added
   * again while it is processed): a sync of it is coming or running. A key waiting for a delayed
   * add is neither. For callers that must leave a key's work to its worker (the ListVolumes
   * reconciler); do not gate `add` on it.
   */
  isQueuedOrProcessing(key: string): boolean {
    return this.#base.has(key);
  }

  /**
   * Stops accepting adds and drops the delayed ones. Keys already ready are still handed out;
   * once none is, every waiting and later `get` resolves `undefined`. Idempotent.
   */
  shutDown(): void {
    this.#queue.shutDown();
    this.#release();
  }

  /** Like {@link shutDown}, and resolves once every key handed out is done. */
  shutDownWithDrain(): Promise<void> {
    const drained = this.#queue.shutDownWithDrain();
    this.#release();
    return drained;
  }

  /** True once the queue is shut down. */
  shuttingDown(): boolean {
    return this.#queue.shuttingDown();
  }

  /** Stops the lanes' metrics timer and releases every waiter. */
  #release(): void {
    this.#metricsTimer?.cancel();
    this.#metricsTimer = undefined;
    // Waiters exist only while no key of their lane is ready, so all of them are released.
    const waiters = [...this.#anyWaiters, ...[...this.#waiters.values()].flat()];
    this.#anyWaiters = [];
    for (const lane of this.#waiters.keys()) this.#waiters.set(lane, []);
    this.#waiting = 0;
    for (const resolve of waiters) resolve(undefined);
  }

  /** Hands the ready keys of `lane` to its waiters, then to the waiters of any lane. */
  #handToWaiters(lane: string): void {
    if (this.#waiting === 0) return;
    const waiters = this.#waiters.get(lane)!;
    while (waiters.length > 0) {
      const key = this.#base.tryGet(lane);
      if (key === undefined) return;
      this.#waiting--;
      waiters.shift()!(key);
    }
    while (this.#anyWaiters.length > 0) {
      const key = this.#base.tryGet(lane);
      if (key === undefined) return;
      this.#waiting--;
      this.#anyWaiters.shift()!(key);
    }
  }
}
