/**
 * Taking the work that is ready from the attacher's queues without waiting, for tests that step a
 * queue or a controller by hand. The shipped queue hands keys out only through `get()`, which
 * waits when no key is ready; these helpers look at `len()` first, so they return at once when
 * nothing is ready (`get()` of a ready key takes it synchronously and resolves at once).
 *
 * @module
 */

import type { AttachController } from "../../lib/controller/controller.ts";
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

/** The signal of syncs a test steps by hand, outside `AttachController.run`: never aborted. */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;

/**
 * Syncs one ready VolumeAttachment key as a worker would; false, without waiting, when `vaQueue`
 * (the controller's) has none ready.
 */
export function processReadyVolumeAttachment(
  controller: AttachController,
  vaQueue: LanedQueue,
  lane?: string,
): Promise<boolean> {
  if (vaQueue.len(lane) === 0) return Promise.resolve(false);
  return controller.processNextVolumeAttachment(NEVER_ABORTED, lane);
}

/**
 * Syncs one ready PersistentVolume key as a worker would; false, without waiting, when `pvQueue`
 * (the controller's) has none ready.
 */
export function processReadyPersistentVolume(
  controller: AttachController,
  pvQueue: Queue,
): Promise<boolean> {
  if (pvQueue.len() === 0) return Promise.resolve(false);
  return controller.processNextPersistentVolume();
}
