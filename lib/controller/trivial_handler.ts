/**
 * The handler for drivers without ControllerPublishVolume, and for dummy mode: it marks every
 * VolumeAttachment of the driver attached, with no finalizers and no CSI calls (external-attacher `pkg/controller/trivial_handler.go`).
 *
 * @module
 */

import type { Handler, SyncOutcome } from "./handler.ts";
import { VOLUME_ATTACHMENTS } from "../kube/api.ts";
import type { KubeApi } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { createMergePatch } from "../kube/patches.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { FENCE_REFUSED_MESSAGE, type LeaseFence } from "../lease_fence.ts";
import { fencedIn, FencedWrites } from "./fenced_writes.ts";

/** Marks VolumeAttachments attached without talking to a driver. */
export class TrivialHandler implements Handler {
  #kube: KubeApi;
  #log: Logger;
  #fence: LeaseFence;

  /**
   * `fence`: the lease fence of the term (`SOLE_REPLICA` without leader election), asked before
   * the status write; required, so that the handler never acts unfenced by omission.
   */
  constructor(deps: { kube: KubeApi; log: Logger; fence: LeaseFence }) {
    this.#kube = new FencedWrites(deps.kube, deps.fence);
    this.#log = deps.log;
    this.#fence = deps.fence;
  }

  /** Marks `va` attached; the write completes even when the attacher is stopping. */
  async syncVolumeAttachment(va: VolumeAttachment, _signal: AbortSignal): Promise<SyncOutcome> {
    const name = va.metadata.name;
    const log = this.#log.with({ volumeAttachment: name });
    if (va.status?.attached) return "done";
    log.v(2).info("Marking as attached");
    // As the CSI handler's markAsAttached with no publish context: attached, and no metadata or
    // error left over from an earlier attachment.
    const oldStatus = va.status ?? { attached: false };
    const newStatus = {
      ...oldStatus,
      attached: true,
      attachmentMetadata: undefined,
      attachError: undefined,
    };
    if (!this.#fence.valid()) {
      log.info(FENCE_REFUSED_MESSAGE);
      return "stopped";
    }
    try {
      await this.#kube.patch(VOLUME_ATTACHMENTS, name, {
        type: "merge",
        body: createMergePatch({ status: oldStatus }, { status: newStatus }),
      }, { subresource: "status" });
    } catch (err) {
      if (fencedIn(err)) {
        log.info(FENCE_REFUSED_MESSAGE);
        return "stopped";
      }
      log.error(err, "Failed to mark as attached");
      return "retry";
    }
    log.v(2).info("Marked as attached");
    return "done";
  }

  /** PersistentVolumes carry no finalizer of this handler: nothing to do. */
  syncPersistentVolume(_pv: PersistentVolume): Promise<SyncOutcome> {
    return Promise.resolve("done");
  }
}
