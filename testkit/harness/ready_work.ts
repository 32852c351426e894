/**
 * Taking the work that is ready from the attacher's queues without waiting, for tests that step a
 * queue by hand (a controller steps itself: `AttachController.stepVolumeAttachment`). The shipped
 * queue hands keys out only through `get()`, which waits when no key is ready; these helpers look
 * at `len()` first, so they return at once when nothing is ready (`get()` of a ready key takes it
 * synchronously and resolves at once).
 *
 * @module
 */

import type { LanedQueue, Queue } from "../../lib/workqueue/types.ts";

/**
 * A ready key of `lane` (undefined: the one ready first in any lane), now being processed (the
 * caller MUST call `done` with it), or undefined when none is ready.
 */
export function takeReady(queue: Queue | LanedQueue, lane?: string): Promise<string | undefined> {
  if (lane === undefined) return queue.len() > 0 ? queue.get() : Promise.resolve(undefined);
  const laned = queue as LanedQueue;
  return laned.len(lane) > 0 ? laned.get(lane) : Promise.resolve(undefined);
}

/** Every ready key of `lane` (or of all lanes), in the order they are handed out; see {@link takeReady}. */
export async function takeAllReady(
  queue: Queue | LanedQueue,
  lane?: string,
): Promise<string[]> {
  const keys: string[] = [];
  for (
    let key = await takeReady(queue, lane);
    key !== undefined;
    key = await takeReady(queue, lane)
  ) {
    keys.push(key);
  }
  return keys;
}
