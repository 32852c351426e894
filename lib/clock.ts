/**
 * Time as a dependency: production uses {@link realClock}; tests use the test kit's `FakeClock`
 * (`testkit/fakes/fake_clock.ts`) and move time forward by hand for the backoffs, timeouts and
 * retries they check. What still runs on real time: the hostile-peer tables
 * (`tests/adversarial/`: real sockets, retries of 10 ms or none) and the tests that run the
 * attacher as a child process (`tests/processes/`, the end-to-end suite), whose clock a test
 * cannot reach, and which shorten its backoffs by flags.
 *
 * @module
 */

import { TimerQueue } from "./timers.ts";

/** A cancellable timer. */
export interface Timer {
  cancel(): void;
}

/**
 * The source of time for queues, backoff, leader election and the reflector.
 *
 * Two readings, as Go's `time.Now()` carries both (`k8s.io/utils/clock`): {@link now} is
 * monotonic and measures every duration, deadline, timer, bucket refill and lease observation;
 * {@link wallNow} is the calendar time, read only for timestamps written to objects (Lease
 * acquire/renew times, `attachError.time`, Event times) and log lines. A wall clock stepped by
 * NTP or by hand moves {@link wallNow} only.
 */
export interface Clock {
  /**
   * Monotonic milliseconds from an arbitrary origin: never goes back, never jumps with the
   * wall clock. Only differences between two readings mean anything.
   */
  now(): number;
  /** Milliseconds since the Unix epoch (wall time), for timestamps only: never for durations. */
  wallNow(): number;
  /** Calls `fn` once after `ms` milliseconds. */
  setTimer(ms: number, fn: () => void): Timer;
  /** Resolves after `ms` milliseconds, or rejects with the signal's reason when it aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Sleeps on `clock`: a timer that an abort cancels; every `Clock` can implement `sleep` with it. */
export function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      timer.cancel();
      reject(signal?.reason);
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The runtime timers under {@link realClock}'s: one `setTimeout` for many timers (`./timers.ts`). */
const runtimeTimers = new TimerQueue({
  now: () => performance.now(),
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
});

/**
 * The runtime's monotonic clock (`performance.now()`), its wall clock and its timers (a
 * {@link TimerQueue} over `setTimeout`).
 */
export const realClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimer(ms, fn) {
    return runtimeTimers.schedule(ms, fn);
  },
  sleep(ms, signal) {
    return sleepOn(realClock, ms, signal);
  },
};

/** The bounds of `Date.now() - monotonic` (none at first), see {@link preciseWallNow}. */
const wallOffset = { low: Infinity, high: -Infinity };

/**
 * The wall time in milliseconds with a fraction (microseconds), for log line timestamps:
 * `Date.now()` has whole milliseconds. The offset between the wall clock and the monotonic one
 * (`performance`) is narrowed from each reading: `Date.now()` is the true time rounded down, so
 * the true offset lies in `[d, d + 1)` for each reading `d`. A reading outside those bounds means
 * the wall clock was stepped: the bounds start again, from the moment `Date.now()` next ticks
 * (at most 1 ms of waiting, at the first call and after a step), where `d` is the offset itself.
 * Between steps the result never goes back.
 */
export function preciseWallNow(): number {
  const monotonic = performance.timeOrigin + performance.now();
  const wall = Date.now();
  const d = wall - monotonic;
  if (d > wallOffset.high || d + 1 < wallOffset.low) {
    let tick = wall;
    let at = monotonic;
    while (tick === wall) {
      at = performance.timeOrigin + performance.now();
      tick = Date.now();
    }
    wallOffset.low = tick - at;
    wallOffset.high = tick - at + 1;
  } else {
    if (d > wallOffset.low) wallOffset.low = d;
    if (d + 1 < wallOffset.high) wallOffset.high = d + 1;
  }
  return monotonic + wallOffset.low;
}
