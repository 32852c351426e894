/**
 * How long the HTTP/2 read loop may handle frames before it lets the event loop run timers and
 * other I/O. A 64 KiB read holds up to 7 281 empty frames; without a bound, a flood of tiny
 * frames on a connection whose reads never wait (CVE-2019-9511 and -9518 from the client's
 * side) would hold the event loop for as long as the flood lasts. With it, a flood costs CPU in
 * proportion to its octets but never holds the loop much longer than {@link TURN_BUDGET_MS}.
 *
 * @module
 */

import type { Clock } from "../../clock.ts";

/** Frames handled between two looks at the clock. */
export const FRAMES_PER_BATCH = 256;
/** Time a turn of the event loop may spend on frames, in ms. */
export const TURN_BUDGET_MS = 5;

/**
 * Counts frames and says when the read loop must yield. A read usually ends a turn of the event
 * loop, but not always (a read that finds bytes waiting can resolve without timers running in
 * between), so the pacer does not trust reads: every {@link FRAMES_PER_BATCH} frames it arms a
 * probe timer, and the turn counts from the last time a timer of the runtime ran.
 */
export class ReadPacer {
  readonly #clock: Clock;
  #frames = 0;
  #lastTurn: number;
  #armed = false;

  constructor(clock: Clock) {
    this.#clock = clock;
    this.#lastTurn = clock.now();
  }

  /** The loop just yielded: timers ran. */
  yielded(): void {
    this.#lastTurn = this.#clock.now();
  }

  /** Counts one frame; true when the turn's budget is spent and the loop must yield. */
  frameHandled(): boolean {
    if (++this.#frames < FRAMES_PER_BATCH) return false;
    this.#frames = 0;
    const now = this.#clock.now();
    if (!this.#armed) {
      this.#armed = true;
      setTimeout(() => {
        this.#armed = false;
        this.#lastTurn = this.#clock.now();
      }, 0);
      // No timer known to have run lately (frames after a quiet spell): count from here.
      if (now - this.#lastTurn >= TURN_BUDGET_MS) this.#lastTurn = now;
    }
    return now - this.#lastTurn >= TURN_BUDGET_MS;
  }
}

/**
 * Resolves after the event loop ran its due timers and I/O: a timer task, which a message
 * channel or a microtask would not give.
 */
export function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
