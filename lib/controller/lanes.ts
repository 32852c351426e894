/**
 * The attach and detach lanes of the VolumeAttachment queue (beyond the Go attacher, which has one
 * queue and one worker pool): a burst of detaches cannot delay attaches
 * (https://github.com/kubernetes-csi/external-attacher/issues/761).
 *
 * @module
 */

import type { ObjectStore } from "../kube/store.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import type { QueueLanes } from "../workqueue/lanes.ts";

/** The lane of the VolumeAttachment queue whose keys are attaches (and other non-deleted VAs). */
export const ATTACH_LANE = "attach";
/** The lane of the VolumeAttachment queue whose keys are VAs being deleted. */
export const DETACH_LANE = "detach";

/**
 * The lane a VolumeAttachment's key belongs in: detach once it is being deleted (or already gone
 * from the cache, when its sync only notices that), attach otherwise.
 */
export function volumeAttachmentLane(va: VolumeAttachment | undefined): string {
  return va === undefined || va.metadata.deletionTimestamp ? DETACH_LANE : ATTACH_LANE;
}

/**
 * The lanes of the VolumeAttachment queue: attach and detach, decided from `store` each time a
 * key becomes ready or is added again. Beyond the Go attacher, which has one queue and one
 * worker pool, so that a burst of detaches cannot delay attaches
 * (https://github.com/kubernetes-csi/external-attacher/issues/761).
 */
export function volumeAttachmentLanes(store: ObjectStore<VolumeAttachment>): QueueLanes {
  return {
    names: [ATTACH_LANE, DETACH_LANE],
    laneOf: (key) => volumeAttachmentLane(store.get(key)),
  };
}
