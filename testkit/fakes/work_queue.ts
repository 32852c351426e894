/**
 * The controller's work queues as tests build them: client-go's default per-item backoff (1 s
 * doubling up to 300 s) on a given clock.
 *
 * @module
 */

import type { Clock } from "../../lib/clock.ts";
import { ItemExponentialFailureRateLimiter } from "../../lib/workqueue/rate_limiters.ts";
import { LanedWorkQueue } from "../../lib/workqueue/lanes.ts";

/** A rate-limiting queue named `name` on `clock`, with the default backoff. */
export function testQueue(clock: Clock, name: string): LanedWorkQueue {
  return new LanedWorkQueue({
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 }),
  }, { name });
}
