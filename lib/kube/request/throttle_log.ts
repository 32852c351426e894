/**
 * Client-side throttling made visible, as client-go v0.37 shows it (`rest/request.go`
 * `tryThrottleWithInfo`, `throttledLogger`; the Go csi-attacher v4.13 is built with it): a
 * request that waited for the rate limiter more than 50 ms is logged at verbosity 3 as
 *
 *     "Waited before sending request" delay="1.2s" reason="client-side throttling, not priority and fairness" verb="PATCH" URL="https://…"
 *
 * and one that waited more than 1 s also through a {@link ThrottledLogger}: at verbosity 2 at
 * most once a second when `--v` is 2 or more, otherwise at level 0 at most once every 10 s. The
 * `delay` is written as Go prints a `time.Duration`. A retry names its retry reason instead
 * (`rest/with_retry.go` `getRetryReason`). Operators see in the log, at the default `--v`, that
 * the client's QPS, not the driver, is what makes attaches slow.
 *
 * @module
 */

import type { Clock } from "../../clock.ts";
import type { Logger } from "../../observe/logger.ts";
import { formatGoDuration } from "../../go_duration.ts";

/** A wait for the rate limiter longer than this is logged at V(3) (client-go `longThrottleLatency`). */
export const LONG_THROTTLE_LATENCY_MS = 50;
/**
 * A wait longer than this is also logged through the throttled logger (client-go
 * `extraLongThrottleLatency`).
 */
export const EXTRA_LONG_THROTTLE_LATENCY_MS = 1_000;

/** The reason of a first try's wait (client-go's default `retryInfo`). */
export const CLIENT_SIDE_THROTTLING = "client-side throttling, not priority and fairness";

/** The message client-go logs. */
export const WAITED_MESSAGE = "Waited before sending request";

/** client-go's `globalThrottledLogger` settings: the first level enabled decides. */
const SETTINGS: readonly { level: number; minIntervalMs: number }[] = [
  { level: 2, minIntervalMs: 1_000 },
  { level: 0, minIntervalMs: 10_000 },
];

/**
 * client-go's `throttledLogger`: a line goes out at the first of its levels the logger has
 * enabled (2, else 0), and only when that level logged nothing for its interval (1 s, 10 s).
 * One instance is meant to be shared by every client of a process, as client-go's is global.
 */
export class ThrottledLogger {
  readonly #clock: Pick<Clock, "now">;
  readonly #last = SETTINGS.map(() => -Infinity);

  /** A throttled logger timing its intervals on `clock`. */
  constructor(clock: Pick<Clock, "now">) {
    this.#clock = clock;
  }

  /** Logs `msg` with `fields` on `log` when a level is enabled and its interval has passed. */
  info(log: Logger, msg: string, fields: Record<string, unknown>): void {
    for (const [i, setting] of SETTINGS.entries()) {
      if (!log.enabled(setting.level)) continue;
      const now = this.#clock.now();
      if (now - this.#last[i]! < setting.minIntervalMs) return;
      this.#last[i] = now;
      log.v(setting.level).info(msg, fields);
      return;
    }
  }
}

/** What {@link logThrottleWait} says about one wait. */
export interface ThrottleWait {
  /** How long the request waited for the rate limiter, in milliseconds. */
  waitedMs: number;
  /** {@link CLIENT_SIDE_THROTTLING}, or the retry reason of a retry. */
  reason: string;
  /** HTTP method. */
  verb: string;
  /** The request URL. */
  url: string;
}

/** Logs one wait for the rate limiter as client-go's `tryThrottleWithInfo` does. */
export function logThrottleWait(log: Logger, throttled: ThrottledLogger, wait: ThrottleWait): void {
  if (!(wait.waitedMs > LONG_THROTTLE_LATENCY_MS)) return;
  const fields = {
    delay: formatGoDuration(wait.waitedMs),
    reason: wait.reason,
    verb: wait.verb,
    URL: wait.url,
  };
  log.v(3).info(WAITED_MESSAGE, fields);
  if (wait.waitedMs > EXTRA_LONG_THROTTLE_LATENCY_MS) throttled.info(log, WAITED_MESSAGE, fields);
}

/**
 * The reason client-go gives a retry's wait (`rest/with_retry.go` `getRetryReason`):
 * `retries: <n>, retry-after: <s>s - retry-reason: …` naming server-side throttling (429, with
 * the FlowSchema UID), the retryable error, or the status code.
 */
export function retryReason(
  retries: number,
  seconds: number,
  last: { status?: number; flowSchemaUid?: string; error?: string },
): string {
  const message = `retries: ${retries}, retry-after: ${seconds}s`;
  if (last.status === 429) {
    return `${message} - retry-reason: due to server-side throttling, FlowSchema UID: ${
      JSON.stringify(last.flowSchemaUid ?? "")
    }`;
  }
  if (last.error !== undefined) {
    return `${message} - retry-reason: due to retryable error, error: ${last.error}`;
  }
  return `${message} - retry-reason: ${last.status}`;
}
