/**
 * A token bucket, after client-go's `util/flowcontrol` token bucket rate limiter (itself on
 * `golang.org/x/time/rate`): the limiter behind `--kube-api-qps` / `--kube-api-burst`.
 *
 * @module
 */

import { type Clock, realClock } from "../clock.ts";

/** Dependencies of {@link TokenBucket}. */
export interface TokenBucketDeps {
  /** Time source; defaults to {@link realClock}. */
  clock?: Clock;
}

/** Options of {@link TokenBucket}. */
export interface TokenBucketOptions {
  /** Tokens added per second. `<= 0` or infinite means no limit. */
  qps: number;
  /** Bucket size, the number of tokens it starts with; a positive integer when limited. */
  burst: number;
}

/**
 * The longest delay one runtime timer can take (`setTimeout` fires at once beyond it); longer
 * waits are split.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Tolerance for float noise when turning a token deficit into milliseconds. */
const EPSILON_MS = 1e-6;

/**
 * A token bucket that starts full with `burst` tokens and refills at `qps` tokens per second, up
 * to `burst`.
 *
 * Takers reserve a token at once, letting the balance go negative, and wait until the balance
 * they reserved against has refilled. So waiters are served strictly in the order they called
 * {@link take} / {@link reserve}, and a long queue of waiters drains at exactly `qps`.
 *
 * @example
 * ```ts
 * const bucket = new TokenBucket({}, { qps: 5, burst: 10 });
 * await bucket.take(); // the first 10 are immediate, then one every 200 ms
 * ```
 */
export class TokenBucket {
  #clock: Clock;
  #qps: number;
  #burst: number;
  #unlimited: boolean;
  /** Token balance at `#last`; negative while takers wait. */
  #tokens: number;
  /** Clock time (ms) `#tokens` was computed for. */
  #last: number;
  /** When the latest reservation may act (ms); used to undo it on abort. */
  #lastReadyAt: number;

  /**
   * @throws {RangeError} when `qps` is NaN, or the bucket is limited and `burst` is not a
   * positive integer.
   */
  constructor(deps: TokenBucketDeps, opts: TokenBucketOptions) {
    if (Number.isNaN(opts.qps)) throw new RangeError("TokenBucket: qps is NaN");
    this.#clock = deps.clock ?? realClock;
    this.#qps = opts.qps;
    this.#unlimited = !(opts.qps > 0) || !Number.isFinite(opts.qps);
    if (!this.#unlimited && !(Number.isInteger(opts.burst) && opts.burst >= 1)) {
      throw new RangeError(`TokenBucket: burst must be a positive integer, got ${opts.burst}`);
    }
    this.#burst = opts.burst;
    this.#tokens = opts.burst;
    this.#last = this.#clock.now();
    this.#lastReadyAt = this.#last;
  }

  /** True when this bucket does not limit (qps `<= 0` or infinite). */
  get unlimited(): boolean {
    return this.#unlimited;
  }

  /** Takes a token if one is available now, without waiting; false otherwise. */
  tryTake(): boolean {
    if (this.#unlimited) return true;
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /**
   * Reserves a token and returns how many ms to wait before using it (0 when one is available).
   * The reservation always succeeds and is final; it is what {@link take} builds on and what a
   * rate limiter's `when` returns.
   */
  reserve(): number {
    return this.#reserveAt() - this.#clock.now();
  }

  /**
   * Waits until a token is available and takes it. Waiters are served in call order.
   * If `signal` aborts while waiting, the promise rejects with its reason and the reservation is
   * given back when no later taker depends on it.
   */
  async take(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.#unlimited) return;
    const readyAt = this.#reserveAt();
    try {
      for (;;) {
        const remaining = readyAt - this.#clock.now();
        if (remaining <= 0) return;
        await this.#clock.sleep(Math.min(MAX_TIMER_MS, remaining), signal);
      }
    } catch (err) {
      this.#cancel(readyAt);
      throw err;
    }
  }

  /** Brings `#tokens` up to the clock's now. */
  #refill(): void {
    const now = this.#clock.now();
    if (now <= this.#last) return;
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) * this.#qps) / 1000);
    this.#last = now;
  }

  /** Reserves one token; returns the clock time (ms) at which it may be used. */
  #reserveAt(): number {
    const now = this.#clock.now();
    if (this.#unlimited) return now;
    this.#refill();
    this.#tokens -= 1;
    if (this.#tokens >= 0) return now;
    const waitMs = Math.max(0, Math.ceil((-this.#tokens * 1000) / this.#qps - EPSILON_MS));
    const readyAt = now + waitMs;
    this.#lastReadyAt = readyAt;
    return readyAt;
  }

  /**
   * Gives an aborted reservation back, like x/time/rate's cancel: only if it is the latest one,
   * so the waiters behind it keep their turn.
   */
  #cancel(readyAt: number): void {
    if (readyAt !== this.#lastReadyAt || readyAt <= this.#clock.now()) return;
    this.#refill();
    this.#tokens = Math.min(this.#burst, this.#tokens + 1);
    this.#lastReadyAt = readyAt - 1000 / this.#qps;
  }
}
