/**
 * The leader's lease fence for one term of leadership (see `../lease_fence.ts` for the seam).
 *
 * The leader counts as leader only while `now - start < leaseDurationSeconds - margin` on its
 * monotonic clock, `start` being when its last successful acquire or renew request started.
 * Another replica starts counting the lease when it reads the record, which is after the request
 * started (client-go `leaderelection.go`, `tryAcquireOrRenew`: `observedTime` is set when the
 * record is read), so before the fence says no, nobody can have taken the lease over. The first
 * question that finds the fence closed ends the term; a timer ends it too when nobody asks.
 *
 * @module
 */

import type { Clock, Timer } from "../clock.ts";
import type { LeaseFence } from "../lease_fence.ts";

/**
 * How much sooner than the lease duration the leader stops counting itself leader: a tenth of
 * the duration written into the Lease, at most 1 s (1 s of the default 15 s lease).
 *
 * It covers what the fence cannot see: the difference between the rates of two replicas'
 * monotonic clocks (NTP slews a clock by at most 500 ppm, 15 ms over 15 s), the time a request
 * takes from our socket to the driver's handler once written (well under a millisecond on the
 * unix socket of a sidecar, tens of milliseconds when the node is loaded), and the time between
 * the fence's answer and the write (microseconds, ARCHITECTURE.md "One leader at a time"). It
 * costs a healthy leader nothing: with the default timing the leader's last attempt before the
 * fence closes is the same as client-go's last attempt before its renew deadline (the second
 * retry after the last success).
 */
export function fenceMarginMs(leaseDurationSeconds: number): number {
  return Math.min(1000, leaseDurationSeconds * 100);
}

/** The text logged when the fence closes: the lease could have passed to another replica. */
export const LEASE_LAPSED_MESSAGE = "Lease could have expired, stopping leading";

/** The fence of one term; closed for good once it lapsed or the term was ended. */
export class TermFence implements LeaseFence {
  readonly #clock: Clock;
  /** How long after a request's start the fence stays open. */
  readonly #openMs: number;
  readonly #onLapse: (err: Error) => void;
  readonly #describe: string;
  /** Monotonic time (ms) until which the fence is open. */
  #validUntil: number;
  #closed = false;
  #timer: Timer | undefined;

  /**
   * @param leaseDurationSeconds the duration written into the Lease (what other replicas count)
   * @param wroteAt when the write that acquired the lease started (monotonic ms)
   * @param onLapse called once, synchronously, when a question or the timer finds the fence
   *   lapsed
   */
  constructor(
    clock: Clock,
    leaseDurationSeconds: number,
    wroteAt: number,
    onLapse: (err: Error) => void,
  ) {
    this.#clock = clock;
    const margin = fenceMarginMs(leaseDurationSeconds);
    this.#openMs = leaseDurationSeconds * 1000 - margin;
    this.#describe = `${this.#openMs} ms (lease duration minus ${margin} ms)`;
    this.#onLapse = onLapse;
    this.#validUntil = wroteAt + this.#openMs;
    this.#arm();
  }

  /** True while the term lasts and its lease cannot have passed; see the module doc. */
  valid(): boolean {
    if (this.#closed) return false;
    if (this.#clock.now() < this.#validUntil) return true;
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#onLapse(new Error(`Lease not renewed for ${this.#describe}`));
    return false;
  }

  /** A write naming this replica, started at `startedAt`, succeeded: the fence moves. */
  wrote(startedAt: number): void {
    if (this.#closed) return;
    this.#validUntil = Math.max(this.#validUntil, startedAt + this.#openMs);
    this.#arm();
  }

  /** The term ended otherwise: the fence closes without lapsing. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** The timer that closes the fence when no question is asked in time. */
  #arm(): void {
    this.#timer?.cancel();
    this.#timer = this.#clock.setTimer(Math.max(0, this.#validUntil - this.#clock.now()), () => {
      this.#timer = undefined;
      this.valid();
    });
  }
}
