/**
 * The clock of one attacher replica of a chaos schedule, over the world's {@link FakeClock}: it
 * can be frozen as a stopped process is (SIGSTOP, a frozen VM), while the world's time and the
 * other replica go on. Frozen, it reads the time it stopped at, and its timers that fall due are
 * held; thawed, it reads the world's time again (a jump), and released, the held timers fire,
 * late, in their order.
 *
 * @module
 */

import { type Clock, sleepOn, type Timer } from "../../lib/clock.ts";
import type { FakeClock } from "../../testkit/fakes/fake_clock.ts";

/** A timer whose callback is held while the clock is frozen. */
interface HeldTimer {
  fn: () => void;
  cancelled: boolean;
}

/** See the module doc. */
export class ReplicaClock implements Clock {
  readonly #world: FakeClock;
  #frozenAt: { now: number; wall: number } | undefined;
  #holding = false;
  #held: HeldTimer[] = [];

  constructor(world: FakeClock) {
    this.#world = world;
  }

  now(): number {
    return this.#frozenAt?.now ?? this.#world.now();
  }

  wallNow(): number {
    return this.#frozenAt?.wall ?? this.#world.wallNow();
  }

  setTimer(ms: number, fn: () => void): Timer {
    const timer: HeldTimer = { fn, cancelled: false };
    const inner = this.#world.setTimer(ms, () => {
      if (this.#holding) this.#held.push(timer);
      else fn();
    });
    return {
      cancel: () => {
        timer.cancelled = true;
        inner.cancel();
      },
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** True between {@link freeze} and {@link release}. */
  get holding(): boolean {
    return this.#holding;
  }

  /** The process stops: time stands still for it and its timers are held. */
  freeze(): void {
    this.#frozenAt = { now: this.#world.now(), wall: this.#world.wallNow() };
    this.#holding = true;
  }

  /** The process runs again: it reads the world's time; its held timers still wait. */
  thaw(): void {
    this.#frozenAt = undefined;
  }

  /** The held timers fire, in the order they fell due; new ones fire when due. */
  release(): void {
    this.#frozenAt = undefined;
    this.#holding = false;
    for (const timer of this.#held.splice(0)) if (!timer.cancelled) timer.fn();
  }
}
