/**
 * The seam between the controller loop and the volume logic.
 *
 * @module
 */

import type { ObjectStore } from "../kube/store.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import type { RateLimitingQueue } from "../workqueue/types.ts";

/** What the controller hands its handler before the first sync. */
export interface HandlerContext {
  vaQueue: RateLimitingQueue;
  pvQueue: RateLimitingQueue;
  vaStore: ObjectStore<VolumeAttachment>;
  pvStore: ObjectStore<PersistentVolume>;
  csiNodeStore: ObjectStore<CsiNode>;
  /**
   * True while the VolumeAttachment `name` waits in a queue or is being synced. Its sync is then
   * about to act on the newest state, so the ListVolumes reconciler leaves it alone.
   */
  isVolumeAttachmentBusy(name: string): boolean;
}

/**
 * Handles the VolumeAttachments and PersistentVolumes of this attacher. The handler owns the retry
 * policy: after a sync it either forgets the key (success) or re-adds it rate-limited (failure).
 */
export interface Handler {
  /** Called once before any sync. */
  init(ctx: HandlerContext): void;
  /** Syncs a VolumeAttachment whose `spec.attacher` is this driver. */
  syncVolumeAttachment(va: VolumeAttachment): Promise<void>;
  /** Syncs a PersistentVolume that may carry this attacher's finalizer. */
  syncPersistentVolume(pv: PersistentVolume): Promise<void>;
  /** Compares the driver's published volumes with the VolumeAttachments (ListVolumes). */
  reconcile(signal: AbortSignal): Promise<void>;
  /**
   * Drops everything kept for the VolumeAttachment `name`: it was deleted, or a sync found it
   * gone. Later syncs of a VolumeAttachment with that name start afresh.
   */
  forgetVolumeAttachment(name: string): void;
}
