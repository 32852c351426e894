/**
 * The attach of a VolumeAttachment, call by call as the Go attacher's `syncAttach`, `csiAttach`
 * and `markAsAttached` (external-attacher `pkg/controller/csi_handler.go`): the source checks,
 * the PV finalizer, the volume capability, the secret and node ID, the VA finalizer and node-ID
 * annotation, ControllerPublishVolume, then `status.attached`.
 *
 * ControllerPublishVolume is sent only after the VA finalizer is stored, so a published volume
 * always has a VA that cannot disappear before its detach.
 *
 * @module
 */

import { errorText } from "../errors.ts";
import type { VolumeCapability } from "../csi/api.ts";
import type { UnrecordedPublish } from "./attachment_memory.ts";
import { PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { createMergePatch } from "../kube/patches.ts";
import { NODE_ID_ANNOTATION } from "./names.ts";
import { addFinalizerPatch } from "../kube/finalizer_patch.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { getVolumeCapability } from "./volume_capability.ts";
import {
  accessOf,
  attempt,
  callOptions,
  DONE,
  failed,
  failedBeforeDriver,
  failedDriverCall,
  fenceClosed,
  mustStop,
  ok,
  sourcePersistentVolume,
  type Step,
  STOPPED,
  type SyncContext,
  volumeOf,
} from "./sync_step.ts";
import { withUid, writeStatus } from "./status_write.ts";
import { recordRecovery } from "./va_events.ts";

/** What a successful publish gave: the driver's publish context, and the request it answered. */
type Published = Omit<UnrecordedPublish, "uid">;

/** A publish that succeeded (or had succeeded before), and the newest VA the attach saw. */
interface Attached {
  readonly va: VolumeAttachment;
  readonly published: Published;
}

/**
 * Attaches `va` (not being deleted). When `signal` aborts before the driver is called, the
 * attach stops where it is; once the driver was called, it completes.
 */
export async function syncAttach(
  ctx: SyncContext,
  va: VolumeAttachment,
  log: Logger,
  signal: AbortSignal,
): Promise<Step<void>> {
  const forced = ctx.memory.takeOutOfSync(va.metadata.name);
  if (!forced && va.status?.attached) {
    log.v(4).info("VolumeAttachment is already attached");
    return DONE;
  }
  log.v(2).info("Attaching", { node: va.spec.nodeName });
  const attached = await csiAttach(ctx, va, log, signal);
  if (attached.kind !== "ok") return attached;
  log.v(2).info("Attached", { node: va.spec.nodeName });
  if (fenceClosed(ctx, log)) return STOPPED; // the next leader publishes again and records it
  const { va: current, published } = attached.value;
  const marked = await markAsAttached(ctx, current, published, va.metadata.uid);
  if (marked.kind === "failed") {
    if (va.metadata.uid) {
      ctx.memory.rememberUnrecordedPublish(va.metadata.name, {
        uid: va.metadata.uid,
        ...published,
      });
    }
    // Not recorded on the VA: the retry records the driver's answer.
    return failed(
      new Error(`failed to mark as attached: ${errorText(marked.error)}`, { cause: marked.error }),
    );
  }
  recordRecovery(ctx, va, "attach");
  log.v(4).info("Fully attached");
  return DONE;
}

/** What ControllerPublishVolume is called with, and whether the source was migrated. */
interface PublishRequest {
  volumeId: string;
  nodeId: string;
  volumeCapability: VolumeCapability;
  readonly: boolean;
  secrets: Record<string, string> | undefined;
  volumeContext: Record<string, string>;
  migrated: boolean;
}

/**
 * Everything of an attach up to and including ControllerPublishVolume: the source checks, the PV
 * finalizer, the VA finalizer and node ID annotation, then the driver call. The API requests
 * before the call end when `signal` aborts, and the call is not made once it has.
 */
async function csiAttach(
  ctx: SyncContext,
  va: VolumeAttachment,
  log: Logger,
  signal: AbortSignal,
): Promise<Step<Attached>> {
  const prepared = await publishRequest(ctx, va, log, signal);
  if (prepared.kind !== "ok") return failedBeforeDriver("attach", va, prepared, signal);
  const { migrated, secrets, ...call } = prepared.value;
  const saved = await saveAttachMetadata(ctx, va, call.nodeId, log, signal);
  if (saved.kind !== "ok") return failedBeforeDriver("attach", va, saved, signal);
  const current = saved.value;

  const { volumeId, nodeId, volumeCapability, readonly, volumeContext } = call;
  const request = JSON.stringify([volumeId, nodeId, volumeCapability, readonly, volumeContext]);
  const earlier = ctx.memory.takeUnrecordedPublish(va.metadata.name);
  if (
    earlier !== undefined && earlier.uid === va.metadata.uid && earlier.request === request &&
    !va.status?.attached
  ) {
    log.v(4).info("ControllerPublishVolume already succeeded with this request, recording it", {
      volumeHandle: volumeId,
      nodeID: nodeId,
    });
    return ok({ va: current, published: earlier });
  }
  if (mustStop(ctx, signal, log)) return STOPPED;
  log.v(4).info("Calling ControllerPublishVolume", { volumeHandle: volumeId, nodeID: nodeId });
  try {
    const res = await ctx.csi.controllerPublishVolume(
      { volumeId, nodeId, volumeCapability, readonly, secrets: secrets ?? {}, volumeContext },
      callOptions(ctx, migrated),
    );
    return ok({ va: current, published: { publishContext: res.publishContext, request } });
  } catch (error) {
    return failedDriverCall("attach", current, error, log);
  }
}

/**
 * The checks and lookups before the VA's metadata is saved, in the Go attacher's order: the
 * source, the PV (refused when it is being deleted) and its finalizer, the volume, read-only
 * flag and capability, the secret, the node ID.
 */
async function publishRequest(
  ctx: SyncContext,
  va: VolumeAttachment,
  log: Logger,
  signal: AbortSignal,
): Promise<Step<PublishRequest>> {
  const source = sourcePersistentVolume(ctx.stores, va);
  if (source.kind !== "ok") return source;
  let pv = source.value;
  if (pv !== undefined) {
    // Refuse to attach volumes that are marked for deletion.
    if (pv.metadata.deletionTimestamp) {
      return failed(new Error(`PersistentVolume "${pv.metadata.name}" is marked for deletion`));
    }
    if (mustStop(ctx, signal, log)) return STOPPED;
    const finalized = await addPersistentVolumeFinalizer(ctx, pv, log, signal);
    if (finalized.kind !== "ok") return finalized;
    pv = finalized.value;
  }
  const volume = volumeOf(va, pv);
  if (volume.kind !== "ok") return volume;
  const { source: { csi, spec, migrated }, volumeHandle, readOnly } = volume.value;
  const volumeContext = { ...(csi.volumeAttributes ?? {}) };
  const capability = attempt(() =>
    getVolumeCapability(spec, {
      supportsSingleNodeMultiWriter: ctx.opts.supportsSingleNodeMultiWriter,
      defaultFsType: ctx.opts.defaultFsType,
    })
  );
  if (capability.kind !== "ok") return capability;
  const access = await accessOf(ctx, "attach", csi, va, signal);
  if (access.kind !== "ok") return access;
  return ok({
    volumeId: volumeHandle,
    nodeId: access.value.nodeId,
    volumeCapability: capability.value,
    readonly: ctx.opts.supportsPublishReadOnly ? readOnly : false,
    secrets: access.value.secrets,
    volumeContext,
    migrated,
  });
}

/** Adds our finalizer to the PV with a guarded JSON patch; the PV to use from then on. */
async function addPersistentVolumeFinalizer(
  ctx: SyncContext,
  pv: PersistentVolume,
  log: Logger,
  signal: AbortSignal,
): Promise<Step<PersistentVolume>> {
  if ((pv.metadata.finalizers ?? []).includes(ctx.finalizer)) return ok(pv);
  let updated: PersistentVolume;
  try {
    updated = await ctx.kube.patch<PersistentVolume>(PERSISTENT_VOLUMES, pv.metadata.name, {
      type: "json",
      body: addFinalizerPatch(pv.metadata.finalizers, ctx.finalizer),
    }, { signal });
  } catch (err) {
    return failed(
      new Error(`could not add PersistentVolume finalizer: ${errorText(err)}`, { cause: err }),
    );
  }
  log.v(4).info("PersistentVolume finalizer added", { persistentVolume: pv.metadata.name });
  return ok(updated);
}

/**
 * Stores the finalizer (and the node ID for detach) on the VA before the driver publishes
 * anything. Its value is the VA as the API server stored it, `va` itself when both are already
 * there.
 */
async function saveAttachMetadata(
  ctx: SyncContext,
  va: VolumeAttachment,
  nodeId: string,
  log: Logger,
  signal: AbortSignal,
): Promise<Step<VolumeAttachment>> {
  // A shallow copy: the two fields that change get new values, nothing of `va` (the cached
  // object) is written to.
  const metadata = { ...va.metadata };
  const finalizers = metadata.finalizers ?? [];
  if (!finalizers.includes(ctx.finalizer)) {
    metadata.finalizers = [...finalizers, ctx.finalizer];
  }
  if (metadata.annotations?.[NODE_ID_ANNOTATION] !== nodeId) {
    metadata.annotations = { ...(metadata.annotations ?? {}), [NODE_ID_ANNOTATION]: nodeId };
  }
  const metadataPatch = createMergePatch({ metadata: va.metadata }, { metadata });
  if (Object.keys(metadataPatch).length === 0) return ok(va);
  // The uid makes the API server refuse the patch when the VA was deleted and created again
  // under the same name after the sync began: the driver must not publish for an object this
  // attacher has not seen, whose deletion the cache may already have passed on to the PV's
  // finalizer check. (The Go attacher patches by name only.)
  if (mustStop(ctx, signal, log)) return STOPPED;
  let saved: VolumeAttachment;
  try {
    saved = await ctx.kube.patch<VolumeAttachment>(
      VOLUME_ATTACHMENTS,
      va.metadata.name,
      { type: "merge", body: withUid(metadataPatch, va.metadata.uid) },
      { signal },
    );
  } catch (err) {
    return failed(new Error(`could not save VolumeAttachment: ${errorText(err)}`, { cause: err }));
  }
  log.v(4).info("VolumeAttachment finalizer added");
  return ok(saved);
}

/**
 * Writes `attached: true` and the publish context on the status subresource, with the error
 * cleared whatever the cached copy says: an error written by an earlier sync that the cache has
 * not shown yet would otherwise stay on the attached VA (the Go attacher computes the patch from
 * the cache alone). `uid`: of the VA the sync started from (see {@link withUid}).
 */
async function markAsAttached(
  ctx: SyncContext,
  va: VolumeAttachment,
  published: Published,
  uid: string | undefined,
): Promise<Step<void>> {
  const { publishContext } = published;
  let written: VolumeAttachment;
  try {
    written = await writeStatus(ctx.kube, va, {
      set: {
        attached: true,
        attachmentMetadata: Object.keys(publishContext).length > 0 ? publishContext : undefined,
      },
      clear: ["attachError"],
    }, uid);
  } catch (error) {
    return failed(error);
  }
  ctx.memory.attached(va);
  ctx.memory.recordOwnWrite(va.metadata.name, written);
  return DONE;
}
