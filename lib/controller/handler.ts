/**
 * The seam between the controller loop and the volume logic (external-attacher
 * `pkg/controller/controller.go`, `Handler`).
 *
 * Unlike the Go attacher's handlers, which call the queue themselves (`AddRateLimited`,
 * `Forget`), a handler here returns a {@link SyncOutcome} and the controller applies it to the
 * key: the retry policy stays visible in the handler, the queue stays the controller's.
 *
 * @module
 */

import type { ObjectStore } from "../kube/store.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";

/**
 * How a sync ended, as the controller applies it to the key:
 * - `done`: finished, or nothing to do: the key's backoff is reset (client-go `Forget`);
 * - `retry`: failed: the key is added again after its backoff (`AddRateLimited`);
 * - `stopped`: the attacher is stopping and the sync ended before it called the driver, or the
 *   lease fence closed and the sync ended at its next write or driver call (asked before it, or
 *   refusing it at the connection), possibly after a driver call whose result it then did not
 *   write; it recorded nothing more: the key is left as it is, for the next leader.
 */
export type SyncOutcome = "done" | "retry" | "stopped";

/** The informer caches a handler reads. */
export interface HandlerStores {
  volumeAttachments: ObjectStore<VolumeAttachment>;
  persistentVolumes: ObjectStore<PersistentVolume>;
  csiNodes: ObjectStore<CsiNode>;
}

/**
 * Handles the VolumeAttachments and PersistentVolumes of this attacher, one sync at a time per
 * object (the queue never hands a key to two workers). A sync reports its failures itself (log,
 * `attachError`, Events) and tells the controller what to do with the key.
 */
export interface Handler {
  /**
   * Syncs a VolumeAttachment whose `spec.attacher` is this driver. `signal` aborts when the
   * attacher stops: work that has not reached the driver (an API request, a wait for the client's
   * rate limiter) may then end with `stopped`; work past the driver call completes.
   */
  syncVolumeAttachment(va: VolumeAttachment, signal: AbortSignal): Promise<SyncOutcome>;
  /** Syncs a PersistentVolume that may carry this attacher's finalizer. */
  syncPersistentVolume(pv: PersistentVolume): Promise<SyncOutcome>;
}
