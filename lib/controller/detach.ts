/**
 * The detach of a VolumeAttachment being deleted, call by call as the Go attacher's
 * `syncDetach`, `csiDetach` and `markAsDetached` (external-attacher
 * `pkg/controller/csi_handler.go`): the source checks, the secret and node ID (with the VA's
 * annotation as the fallback), ControllerUnpublishVolume, then the VA finalizer's removal and
 * `attached: false`.
 *
 * The VA finalizer is removed only after a successful ControllerUnpublishVolume.
 *
 * @module
 */

import { errorText } from "../errors.ts";
import { isNotFound, VOLUME_ATTACHMENTS } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { createMergePatch } from "../kube/patches.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import {
  accessOf,
  callOptions,
  DONE,
  type Failed,
  failed,
  failedBeforeDriver,
  failedDriverCall,
  fenceClosed,
  mustStop,
  type Ok,
  ok,
  sourcePersistentVolume,
  type Step,
  STOPPED,
  type SyncContext,
  volumeOf,
} from "./sync_step.ts";
import { withUid, writeStatus } from "./status_write.ts";
import { recordRecovery } from "./va_events.ts";

/**
 * Detaches `va` (being deleted) when it carries our finalizer, or when the reconciler marked it
 * out of sync. When `signal` aborts before the driver is called, the detach stops where it is;
 * once the driver was called, it completes.
 */
export async function syncDetach(
  ctx: SyncContext,
  va: VolumeAttachment,
  log: Logger,
  signal: AbortSignal,
): Promise<Step<void>> {
  const forced = ctx.memory.takeOutOfSync(va.metadata.name);
  ctx.memory.takeUnrecordedPublish(va.metadata.name); // a detach: never recorded as attached
  if (!forced && !(va.metadata.finalizers ?? []).includes(ctx.finalizer)) {
    log.v(4).info("VolumeAttachment is already detached");
    ctx.memory.takeFailure(va.metadata.name); // it is going away: no Event will follow
    return DONE;
  }
  log.v(2).info("Detaching", { node: va.spec.nodeName });
  const detached = await csiDetach(ctx, va, log, signal);
  if (detached.kind !== "ok") return detached;
  recordRecovery(ctx, va, "detach");
  log.v(2).info("Fully detached", { node: va.spec.nodeName });
  return DONE;
}

/**
 * Everything of a detach: the source checks, ControllerUnpublishVolume, then the VA writes. As
 * on attach, `signal` ends the steps before the driver call, and only those.
 */
async function csiDetach(
  ctx: SyncContext,
  va: VolumeAttachment,
  log: Logger,
  signal: AbortSignal,
): Promise<Step<void>> {
  const source = sourcePersistentVolume(ctx.stores, va);
  if (source.kind !== "ok") return failedBeforeDriver("detach", va, source, signal);
  const volume = volumeOf(va, source.value);
  if (volume.kind !== "ok") return failedBeforeDriver("detach", va, volume, signal);
  const { source: { csi, migrated }, volumeHandle } = volume.value;
  const access = await accessOf(ctx, "detach", csi, va, signal);
  if (access.kind !== "ok") return failedBeforeDriver("detach", va, access, signal);
  const { secrets, nodeId } = access.value;
  if (mustStop(ctx, signal, log)) return STOPPED;
  log.v(4).info("Calling ControllerUnpublishVolume", { volumeHandle, nodeID: nodeId });
  try {
    await ctx.csi.controllerUnpublishVolume(
      { volumeId: volumeHandle, nodeId, secrets: secrets ?? {} },
      callOptions(ctx, migrated),
    );
  } catch (error) {
    return failedDriverCall("detach", va, error, log);
  }
  const marked = await markAsDetached(ctx, va, log);
  if (marked.kind !== "failed") return marked;
  const error = new Error(`could not mark as detached: ${errorText(marked.error)}`, {
    cause: marked.error,
  });
  return failed(error, marked.record);
}

/**
 * Removes our finalizer first, then marks the status detached, so a failure between the two
 * cannot lead to a second ControllerUnpublishVolume for a VA that is already gone
 * (https://github.com/kubernetes-csi/external-attacher/issues/587). A failure names the newest
 * VA seen, whose status the error is written to.
 */
async function markAsDetached(
  ctx: SyncContext,
  va: VolumeAttachment,
  log: Logger,
): Promise<Step<void>> {
  const finalizers = va.metadata.finalizers ?? [];
  const found = finalizers.includes(ctx.finalizer);
  let current = va;
  if (found) {
    if (fenceClosed(ctx, log)) return STOPPED;
    const removed = await removeFinalizer(ctx, va);
    if (removed.kind !== "ok") return failed(removed.error, { op: "detach", va });
    current = removed.value;
  }
  if (!found && !current.status?.attached) return DONE;
  // The answer of the removal shows the VA being deleted with no finalizer left: the API server
  // deleted it in the same write (k8s.io/apiserver `registry/generic/registry/store.go`,
  // `Update` and `shouldDeleteDuringUpdate`). The Go attacher patches the status anyway and
  // counts the 404 as success; ours spares the request.
  if (found && goneWithFinalizer(current)) return DONE;
  if (fenceClosed(ctx, log)) return STOPPED;
  try {
    const written = await writeStatus(ctx.kube, current, {
      set: { attached: false, detachError: undefined, attachmentMetadata: undefined },
    }, va.metadata.uid);
    ctx.memory.recordOwnWrite(va.metadata.name, written);
  } catch (error) {
    // The VA is gone: nothing left to mark.
    if (isNotFound(error)) return DONE;
    return failed(error, { op: "detach", va: current });
  }
  return DONE;
}

/**
 * Whether `va`, as an answer gave it, is gone: being deleted, no finalizer left and no grace
 * period (`store.go` `shouldDeleteDuringUpdate` deletes exactly those).
 */
function goneWithFinalizer(va: VolumeAttachment): boolean {
  const { deletionTimestamp, deletionGracePeriodSeconds, finalizers } = va.metadata;
  return deletionTimestamp !== undefined && (finalizers ?? []).length === 0 &&
    (deletionGracePeriodSeconds ?? 0) === 0;
}

/** Removes our finalizer from the VA (carrying its uid); the VA as the API server stored it. */
async function removeFinalizer(
  ctx: SyncContext,
  va: VolumeAttachment,
): Promise<Ok<VolumeAttachment> | Failed> {
  const remaining = (va.metadata.finalizers ?? []).filter((f) => f !== ctx.finalizer);
  const newMeta = { ...va.metadata, finalizers: remaining.length > 0 ? remaining : undefined };
  // The uid makes the API server refuse the patch if it arrives late, after the VA was
  // deleted and created again under the same name: stripping the new VA's finalizer would
  // let it go without a detach. (The Go attacher patches by name only.)
  const body = withUid(
    createMergePatch({ metadata: va.metadata }, { metadata: newMeta }),
    va.metadata.uid,
  );
  let current: VolumeAttachment;
  try {
    current = await ctx.kube.patch<VolumeAttachment>(
      VOLUME_ATTACHMENTS,
      va.metadata.name,
      { type: "merge", body },
    );
  } catch (error) {
    return failed(error);
  }
  ctx.memory.recordOwnWrite(va.metadata.name, current);
  ctx.memory.detached(va);
  return ok(current);
}
