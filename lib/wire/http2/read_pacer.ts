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

/** Counts the frames of one turn and says when the read loop must yield. */
export class ReadPacer {
  readonly #clock: Clock;
  #frames = 0;
  #turnStart = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** A new turn of the event loop began (a read returned, or the loop yielded). */
  startTurn(): void {
    this.#frames = 0;
    this.#turnStart = this.#clock.now();
  }

  /** Counts one frame; true when the turn's budget is spent and the loop must yield. */
  frameHandled(): boolean {
    if (++this.#frames < FRAMES_PER_BATCH) return false;
    this.#frames = 0;
    return this.#clock.now() - this.#turnStart >= TURN_BUDGET_MS;
  }
}

/**
 * Resolves after the event loop ran its due timers and I/O: a timer task, which a message
 * channel or a microtask would not give.
 */
export function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
