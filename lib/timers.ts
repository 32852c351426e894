/**
 * Many timers over one runtime timer: {@link TimerQueue}, behind {@link import("./clock.ts").realClock}.
 *
 * Every API request, CSI call and watch arms a timeout that almost never fires: it is cancelled
 * when the answer comes. In Deno 2.9 each `setTimeout` builds a Node-compatible `Timeout` object
 * and schedules it, about 1.5 KB allocated and 1.5 µs with its `clearTimeout` (measured), a few
 * times per attach. A timer here is one small record in a binary heap ordered by due time, and
 * the runtime timer is armed only for the earliest one: a cancelled timer leaves it armed (it
 * fires, finds nothing due, and waits for the new earliest), so a burst of requests with 30 s
 * timeouts arms it about once per 30 s instead of once per request. Node.js keeps one runtime
 * timer per duration for the same reason (`lib/internal/timers.js`, its timer lists).
 *
 * Contract: a callback runs no earlier than its delay after it was scheduled; timers run in due
 * order, equal due times in the order they were scheduled; a cancelled timer never runs. Every
 * timer that is due when the runtime timer fires runs in that one task, one after the other
 * (microtasks run after the last of them, not between two); a timer scheduled by one of those
 * callbacks waits for a later firing, so a callback that re-schedules itself at 0 ms cannot hold
 * the task. Running the due timers in one firing matters: a runtime timer set from a timer
 * callback is clamped to about 1 ms and more (HTML's nesting rule, 426 ms for 200 nested
 * `setTimeout(0)` under Deno 2.9.6), so a firing per timer took 4.2 s for 2,000 timers due within
 * 5 ms, where `setTimeout` takes 30 ms. The runtime timer is pending exactly while a timer is (it
 * is cleared when the last one is cancelled), so the queue keeps the process alive as the timers
 * it holds would. A callback that throws throws from the runtime timer, as it would from
 * `setTimeout`; the queue has armed itself for the timers left.
 *
 * @module
 */

import { type DueEntry, DueHeap } from "./due_heap.ts";

/**
 * What {@link TimerQueue} needs of the runtime: `performance.now`, `setTimeout` and
 * `clearTimeout` in production.
 */
export interface TimerRuntime {
  /** Monotonic milliseconds. */
  now(): number;
  /** Calls `fn` once after `ms`; returns a handle for {@link TimerRuntime.clear}. */
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/** One scheduled callback; its place in the heap is {@link QueuedTimer.index}, -1 once gone. */
class QueuedTimer implements DueEntry {
  readonly due: number;
  readonly seq: number;
  readonly fn: () => void;
  readonly #queue: TimerQueue;
  index = -1;

  constructor(queue: TimerQueue, due: number, seq: number, fn: () => void) {
    this.#queue = queue;
    this.due = due;
    this.seq = seq;
    this.fn = fn;
  }

  /** Removes the timer; nothing happens when it already ran or was cancelled. */
  cancel(): void {
    this.#queue.remove(this);
  }
}

/**
 * The longest delay one runtime timer takes (`setTimeout` fires at once beyond 2^31 - 1 ms); the
 * queue re-arms for the rest of a longer one.
 */
const MAX_RUNTIME_DELAY_MS = 2 ** 31 - 1;

/** Timers in a binary heap by due time, run from one runtime timer; see the module doc. */
export class TimerQueue {
  readonly #runtime: TimerRuntime;
  readonly #heap = new DueHeap<QueuedTimer>();
  #seq = 0;
  /** The runtime timer, while one is pending ({@link TimerQueue.#armedFor} is finite). */
  #handle: unknown;
  /** When the pending runtime timer was set to fire (runtime ms); Infinity when none is. */
  #armedFor = Infinity;
  readonly #fire = () => this.#onFire();
  /** True while {@link TimerQueue.#onFire} runs callbacks: it arms once when they are done. */
  #firing = false;

  /** A queue over `runtime`. */
  constructor(runtime: TimerRuntime) {
    this.#runtime = runtime;
  }

  /** Timers scheduled and not yet run or cancelled. */
  get size(): number {
    return this.#heap.size;
  }

  /** Calls `fn` once after `ms` milliseconds (a negative or NaN delay counts as 0). */
  schedule(ms: number, fn: () => void): { cancel(): void } {
    const now = this.#runtime.now();
    const delay = ms > 0 ? ms : 0;
    const timer = new QueuedTimer(this, now + delay, this.#seq++, fn);
    this.#heap.push(timer);
    if (!this.#firing && timer.due < this.#armedFor) this.#arm(now);
    return timer;
  }

  /** Takes `timer` out of the heap (see {@link QueuedTimer.cancel}). */
  remove(timer: QueuedTimer): void {
    if (timer.index < 0) return;
    this.#heap.remove(timer);
    if (this.#heap.size === 0 && this.#armedFor !== Infinity && !this.#firing) {
      this.#runtime.clear(this.#handle);
      this.#handle = undefined;
      this.#armedFor = Infinity;
    }
  }

  /** (Re)sets the runtime timer for the earliest timer. */
  #arm(now: number): void {
    const head = this.#heap.peek();
    if (this.#armedFor !== Infinity) this.#runtime.clear(this.#handle);
    this.#handle = undefined;
    this.#armedFor = Infinity;
    if (head === undefined) return;
    this.#armedFor = head.due;
    const delay = Math.min(MAX_RUNTIME_DELAY_MS, Math.max(0, Math.ceil(head.due - now)));
    this.#handle = this.#runtime.set(this.#fire, delay);
  }

  /**
   * The runtime timer fired: run every timer due now that was scheduled before this firing, and
   * arm for the next.
   */
  #onFire(): void {
    this.#handle = undefined;
    this.#armedFor = Infinity;
    this.#firing = true;
    const now = this.#runtime.now();
    const seqLimit = this.#seq;
    try {
      for (;;) {
        const head = this.#heap.peek();
        if (head === undefined || head.due > now || head.seq >= seqLimit) break;
        this.remove(head);
        head.fn();
      }
    } finally {
      this.#firing = false;
      // Also when a callback threw: the timers left keep their runtime timer.
      this.#arm(this.#runtime.now());
    }
  }
}
