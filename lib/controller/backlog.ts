/**
 * The backlog log line (beyond the Go attacher, whose users saw attaches delayed for half an hour
 * with nothing in the logs: https://github.com/kubernetes-csi/external-attacher/issues/706; the
 * flag follows the upstream proposal https://github.com/kubernetes-csi/external-attacher/pull/733).
 * Every interval, each queue lane whose oldest ready key has waited longer than the interval gets
 * one line: the queue, its depth, the oldest key and its age.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import type { Logger } from "../observe/logger.ts";
import type { LanedQueue } from "../workqueue/types.ts";

/** A queue to watch, with the name it is reported under. */
export interface WatchedQueue {
  /** e.g. `csi-attacher-va`; a lane is reported as `<name>-<lane>`. */
  name: string;
  queue: Pick<LanedQueue, "lanes" | "len" | "oldestReady">;
}

/** Dependencies of {@link BacklogReporter}. */
export interface BacklogReporterDeps {
  clock: Clock;
  log: Logger;
}

/** Options of {@link BacklogReporter}. */
export interface BacklogReporterOptions {
  queues: readonly WatchedQueue[];
  /** Period of the check and the least wait that is reported, ms; must be positive. */
  intervalMs: number;
}

/** The message of the backlog line. */
export const BACKLOG_MESSAGE = "Work is waiting in the queue";

/** Logs the queues' backlog every interval; see the module documentation. */
export class BacklogReporter {
  #clock: Clock;
  #log: Logger;
  #opts: BacklogReporterOptions;

  /** @throws {RangeError} when the interval is not positive. */
  constructor(deps: BacklogReporterDeps, opts: BacklogReporterOptions) {
    if (!(opts.intervalMs > 0)) {
      throw new RangeError(`Cannot report the backlog every ${opts.intervalMs} ms`);
    }
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#opts = opts;
  }

  /** Logs one line per lane whose oldest ready key has waited longer than the interval. */
  report(): void {
    const now = this.#clock.now();
    for (const { name, queue } of this.#opts.queues) {
      for (const lane of queue.lanes()) {
        const oldest = queue.oldestReady(lane);
        if (oldest === undefined) continue;
        const waitedMs = now - oldest.addedAt;
        if (waitedMs <= this.#opts.intervalMs) continue;
        this.#log.info(BACKLOG_MESSAGE, {
          queue: lane === "" ? name : `${name}-${lane}`,
          depth: queue.len(lane),
          oldest: oldest.key,
          oldestWaitSeconds: Math.round(waitedMs / 100) / 10,
        });
      }
    }
  }

  /** Reports every interval until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.#clock.sleep(this.#opts.intervalMs, signal);
      } catch {
        return; // aborted
      }
      this.report();
    }
  }
}
