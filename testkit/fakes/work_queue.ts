/**
 * The controller's work queues as its unit tests build them (`workQueue`, lib/controller/build.ts):
 * client-go's default per-item backoff (1 s doubling up to 300 s) on a given clock.
 *
 * @module
 */

import type { Clock } from "../../lib/clock.ts";
import { workQueue } from "../../lib/controller/build.ts";
import type { LanedWorkQueue } from "../../lib/workqueue/lanes.ts";

/** A rate-limiting queue named `name` on `clock`, with the default backoff. */
export function testQueue(clock: Clock, name: string): LanedWorkQueue {
  return workQueue({ clock }, { name, retry: { baseMs: 1000, maxMs: 300_000 } });
}
