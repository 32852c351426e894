/**
 * The handler for drivers without ControllerPublishVolume, and for dummy mode: it marks every
 * VolumeAttachment of the driver attached, with no finalizers and no CSI calls (external-attacher
 * `pkg/controller/trivial_handler.go`, which calls `markAsAttached(va, nil)` of `util.go`).
 *
 * @module
 */

import type { Handler, SyncOutcome } from "./handler.ts";
import type { KubeApi } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { FENCE_REFUSED_MESSAGE, type LeaseFence } from "../lease_fence.ts";
import { fencedIn, FencedWrites } from "./fenced_writes.ts";
import { writeStatus } from "./status_write.ts";

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

  /**
   * Marks `va` attached; the write completes even when the attacher is stopping. It carries the
   * uid of `va` (see `withUid` in `status_write.ts`), so it cannot mark a VA created again under
   * the same name since.
   */
  async syncVolumeAttachment(va: VolumeAttachment, _signal: AbortSignal): Promise<SyncOutcome> {
    const name = va.metadata.name;
    const log = this.#log.with({ volumeAttachment: name });
    if (va.status?.attached) return "done";
    log.v(2).info("Marking as attached");
    if (!this.#fence.valid()) {
      log.info(FENCE_REFUSED_MESSAGE);
      return "stopped";
    }
    try {
      // As Go's markAsAttached(va, nil): attached, and the metadata and error of an earlier
      // attachment removed, each written as null only when the cached VA carries it.
      await writeStatus(this.#kube, va, {
        set: { attached: true, attachmentMetadata: undefined, attachError: undefined },
      }, va.metadata.uid);
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
