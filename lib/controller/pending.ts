/**
 * The backlog of VolumeAttachments as the informer cache shows it (beyond the Go attacher, for
 * https://github.com/kubernetes-csi/external-attacher/issues/706 and the "stuck detach" alert of
 * https://github.com/kubernetes-csi/external-attacher/issues/291): how many VAs of this driver
 * wait for an attach or a detach, and how long the oldest has waited.
 *
 * @module
 */

import type { VolumeAttachment } from "../kube/types.ts";
import type { PendingVolumeAttachments } from "../observe/metrics.ts";
import { finalizerName } from "./names.ts";

/**
 * Counts the VAs of `driverName` in `vas` that are not yet attached (attach; age since their
 * `creationTimestamp`) and that are being deleted and still carry our finalizer (detach; age since
 * their `deletionTimestamp`). Ages are seconds at wall-clock time `nowMs`, never negative.
 */
export function pendingVolumeAttachments(
  vas: Iterable<VolumeAttachment>,
  opts: { driverName: string; nowMs: number },
): PendingVolumeAttachments {
  const finalizer = finalizerName(opts.driverName);
  const out: PendingVolumeAttachments = {
    attach: { count: 0, oldestSeconds: 0 },
    detach: { count: 0, oldestSeconds: 0 },
  };
  const note = (figures: { count: number; oldestSeconds: number }, since: string | undefined) => {
    figures.count++;
    const at = since === undefined ? NaN : Date.parse(since);
    if (Number.isFinite(at)) {
      figures.oldestSeconds = Math.max(figures.oldestSeconds, (opts.nowMs - at) / 1000);
    }
  };
  for (const va of vas) {
    if (va.spec?.attacher !== opts.driverName) continue;
    if (va.metadata.deletionTimestamp) {
      if ((va.metadata.finalizers ?? []).includes(finalizer)) {
        note(out.detach, va.metadata.deletionTimestamp);
      }
    } else if (!va.status?.attached) {
      note(out.attach, va.metadata.creationTimestamp);
    }
  }
  return out;
}
