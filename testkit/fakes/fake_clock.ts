/**
 * A clock that moves only when told to, for tests: a test that checks a backoff, a timeout or a
 * retry moves it instead of sleeping (what still runs on real time: `lib/clock.ts`).
 *
 * @module
 */

import { type Clock, sleepOn, type Timer } from "../../lib/clock.ts";

interface PendingTimer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when told to. Timers fire in order of their due time during
 * {@link FakeClock.advance}. It keeps both readings of {@link Clock}: {@link advance} moves the
 * monotonic and the wall clock together; {@link stepWall} moves the wall clock alone (an NTP
 * correction, an operator setting the date), which must change no duration, timer or deadline.
 * Both start at `start`.
 *
 * @example
 * ```ts
 * const clock = new FakeClock(0);
 * let fired = false;
 * clock.setTimer(1000, () => fired = true);
 * clock.advance(999); // fired === false
 * clock.advance(1);   // fired === true
 * ```
 */
export class FakeClock implements Clock {
  #now: number;
  /** wallNow() - now(): changed only by {@link stepWall}. */
  #wallOffset = 0;
  #seq = 0;
  #timers: PendingTimer[] = [];

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  wallNow(): number {
    return this.#now + this.#wallOffset;
  }

  /**
   * Steps the wall clock alone by `ms` (negative: back in time). Fires no timer: timers and
   * every duration follow the monotonic clock.
   */
  stepWall(ms: number): void {
    this.#wallOffset += ms;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const t: PendingTimer = {
      at: this.#now + Math.max(0, ms),
      seq: this.#seq++,
      fn,
      cancelled: false,
    };
    this.#timers.push(t);
    return { cancel: () => t.cancelled = true };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Number of timers not yet fired or cancelled. */
  pendingTimers(): number {
    return this.#timers.filter((t) => !t.cancelled).length;
  }

  /** Due time of the earliest pending timer, or undefined. */
  nextTimerAt(): number | undefined {
    const live = this.#timers.filter((t) => !t.cancelled);
    if (live.length === 0) return undefined;
    return Math.min(...live.map((t) => t.at));
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      this.#timers = this.#timers.filter((t) => !t.cancelled);
      const due = this.#timers.filter((t) => t.at <= target);
      if (due.length === 0) break;
      due.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = due[0]!;
      this.#timers.splice(this.#timers.indexOf(next), 1);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = target;
  }

  /**
   * Moves time forward by `ms` without firing any timer, as a stopped process (SIGSTOP, a frozen
   * VM) finds it when it runs again: the timers that fell due fire at the next {@link advance},
   * late, in their order.
   */
  pause(ms: number): void {
    this.#now += Math.max(0, ms);
  }

  /** Moves time to the earliest pending timer and fires it; false when none is pending. */
  advanceToNextTimer(): boolean {
    const at = this.nextTimerAt();
    if (at === undefined) return false;
    this.advance(Math.max(0, at - this.#now));
    return true;
  }
}
