/**
 * The handler for drivers with ControllerPublishVolume: attach, detach and PV finalizers, call by
 * call as the Go attacher's `csi_handler.go` (external-attacher `pkg/controller/csi_handler.go`:
 * `syncAttach`, `csiAttach`, `syncDetach`, `csiDetach`, `markAsDetached`,
 * `SyncNewOrUpdatedPersistentVolume`). The ListVolumes reconciliation (`ReconcileVA`) is
 * `reconciler.ts`; what is kept per VolumeAttachment between syncs is `attachment_memory.ts`.
 *
 * Safety invariants, in the order the calls are made:
 * - ControllerPublishVolume is sent only after the VA finalizer is stored, so a published volume
 *   always has a VA that cannot disappear before its detach.
 * - The VA finalizer is removed only after a successful ControllerUnpublishVolume.
 * - The PV finalizer is removed only when no VolumeAttachment names the PV.
 * - With leader election, the lease fence ({@link CsiHandlerDeps.fence}) is asked synchronously
 *   right before every write and driver call (for a driver call, inside the CSI client, right
 *   before the request's bytes are written to the connection). When it says no, the sync stops
 *   there as on SIGTERM (`stopped`: nothing more is written, the key is left for the next leader),
 *   also after a driver call: the next leader repeats the call (publish and unpublish are
 *   idempotent) and records it.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { errorText } from "../errors.ts";
import { realClock } from "../clock.ts";
import type { CsiClient, VolumeCapability } from "../csi/api.ts";
import { CsiError, FencedCsiCallError } from "../csi/api.ts";
import { FENCE_REFUSED_MESSAGE, type LeaseFence, UNFENCED } from "../lease_fence.ts";
import type { EventSink } from "../events/recorder.ts";
import type { Handler, HandlerStores, SyncOutcome } from "./handler.ts";
import type { AttachmentMemory, UnrecordedPublish } from "./attachment_memory.ts";
import type { KubeApi } from "../kube/api.ts";
import {
  isNotFound,
  notFoundError,
  PERSISTENT_VOLUMES,
  SECRETS,
  VOLUME_ATTACHMENTS,
} from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { createMergePatch } from "../kube/patches.ts";
import { isMigratablePersistentVolume, MIGRATION_DRIVER_NAMES } from "./migration.ts";
import { finalizerName, MIGRATED_TO_ANNOTATION, NODE_ID_ANNOTATION } from "./names.ts";
import { addFinalizerPatch, removeFinalizerPatch } from "../kube/finalizer_patch.ts";
import type {
  CsiPersistentVolumeSource,
  ObjectReference,
  PersistentVolume,
  Secret,
  VolumeAttachment,
} from "../kube/types.ts";
import { getVolumeCapability, getVolumeHandle } from "./volume_capability.ts";
import { nodeIdOf, persistentVolumeNameOf, volumeSourceOf } from "./volume_source.ts";

/** Reasons of the Events on VolumeAttachments. */
export const EVENT_REASONS = {
  attachFailed: "AttachFailed",
  detachFailed: "DetachFailed",
  attached: "Attached",
  detached: "Detached",
} as const;

/** Collaborators of {@link CsiHandler}. */
export interface CsiHandlerDeps {
  kube: KubeApi;
  csi: CsiClient;
  log: Logger;
  clock?: Clock;
  /** The informer caches of VolumeAttachments, PersistentVolumes and CSINodes. */
  stores: HandlerStores;
  /** What is kept per VolumeAttachment between syncs; shared with the controller. */
  memory: AttachmentMemory;
  /** Events on VolumeAttachments (beyond the Go attacher, which records none); none if unset. */
  events?: EventSink;
  /** The leader's lease fence; {@link UNFENCED} (always open) without leader election. */
  fence?: LeaseFence;
}

/** Options of {@link CsiHandler}; the capabilities come from ControllerGetCapabilities. */
export interface CsiHandlerOptions {
  driverName: string;
  /** Timeout of each ControllerPublish/Unpublish call (`--timeout`). */
  timeoutMs: number;
  supportsPublishReadOnly: boolean;
  supportsSingleNodeMultiWriter: boolean;
  /** fsType for mount capabilities when the PV has none (`--default-fstype`). */
  defaultFsType: string;
  /** Whether `attachError.errorCode` carries gRPC codes (gate MutableCSINodeAllocatableCount). */
  attachErrorCodes: boolean;
}

/** What a successful publish gave: the driver's publish context, and the request it answered. */
type Published = Omit<UnrecordedPublish, "uid">;

/**
 * How the driver step of an attach or detach ended: done, failed, or stopped by the stop signal
 * before the driver was called (nothing to record: the next leader takes the VA over). `va` is
 * the newest VolumeAttachment the step saw (after its own metadata patch, if any): the one whose
 * status a failure is written to.
 */
type StepResult<T> =
  | { ok: true; va: VolumeAttachment; value: T }
  | { ok: false; va: VolumeAttachment; error: unknown }
  | { ok: false; va: VolumeAttachment; stopped: true };

/** The gRPC code of `err` if it is a gRPC status error, as Go's `status.FromError` tells. */
function grpcCode(err: unknown): number | undefined {
  return err instanceof CsiError ? err.code : undefined;
}

/** Decodes a Secret's base64 `data` into strings. */
function secretValues(secret: Secret): Record<string, string> {
  const out: Record<string, string> = {};
  const decoder = new TextDecoder();
  for (const [key, value] of Object.entries(secret.data ?? {})) {
    const bytes = Uint8Array.from(atob(value), (c) => c.charCodeAt(0));
    out[key] = decoder.decode(bytes);
  }
  return out;
}

/**
 * `patch` of a status with `metadata.uid` (of the VA the sync started from, as the metadata
 * patches carry it): the API server refuses it (the uid is immutable) when the VA was deleted
 * and created again under its name since, so a status write it handles late cannot land on the
 * new VA. The Go attacher patches by name only.
 */
function withUid(patch: Record<string, unknown>, uid: string | undefined): Record<string, unknown> {
  if (!uid) return patch;
  const metadata = (patch.metadata ?? {}) as Record<string, unknown>;
  return { ...patch, metadata: { ...metadata, uid } };
}

/** The reference an Event on `va` carries. */
function involvedObject(va: VolumeAttachment): ObjectReference {
  const ref: ObjectReference = {
    kind: "VolumeAttachment",
    apiVersion: "storage.k8s.io/v1",
    name: va.metadata.name,
  };
  if (va.metadata.uid) ref.uid = va.metadata.uid;
  if (va.metadata.resourceVersion) ref.resourceVersion = va.metadata.resourceVersion;
  return ref;
}

/**
 * Attaches and detaches volumes through a CSI driver. Built with its stores and the shared
 * per-VolumeAttachment memory; it is ready to sync once constructed.
 */
export class CsiHandler implements Handler {
  #kube: KubeApi;
  #csi: CsiClient;
  #log: Logger;
  #clock: Clock;
  #stores: HandlerStores;
  #memory: AttachmentMemory;
  #events: EventSink | undefined;
  #fence: LeaseFence;
  #opts: CsiHandlerOptions;
  #finalizer: string;
  /** The driver calls' fence, asked by the CSI client right before the request is written. */
  #callFence: () => boolean;

  constructor(deps: CsiHandlerDeps, opts: CsiHandlerOptions) {
    this.#kube = deps.kube;
    this.#csi = deps.csi;
    this.#log = deps.log;
    this.#clock = deps.clock ?? realClock;
    this.#stores = deps.stores;
    this.#memory = deps.memory;
    this.#events = deps.events;
    this.#fence = deps.fence ?? UNFENCED;
    this.#callFence = () => this.#fence.valid();
    this.#opts = opts;
    this.#finalizer = finalizerName(opts.driverName);
  }

  /**
   * Attaches or detaches `va`. When `signal` aborts (the attacher stops) before the driver is
   * called, the sync stops there: the API request or rate-limiter wait it is in ends, nothing is
   * recorded (no `attachError`, no Event) and the outcome is `stopped`. Once the driver was
   * called, the sync completes whatever `signal` does: the status write after a successful
   * publish or unpublish is made, so the next leader does not redo it.
   */
  async syncVolumeAttachment(va: VolumeAttachment, signal: AbortSignal): Promise<SyncOutcome> {
    const log = this.#log.with({ volumeAttachment: va.metadata.name });
    if (this.#memory.isOlderThanOwnWrite(va)) {
      log.v(4).info(
        "Cached VolumeAttachment is older than the attach or detach just recorded, skipping",
      );
      return "done";
    }
    let outcome: "done" | "stopped";
    try {
      outcome = va.metadata.deletionTimestamp
        ? await this.#syncDetach(va, log, signal)
        : await this.#syncAttach(va, log, signal);
    } catch (err) {
      log.error(err, "Error processing VolumeAttachment, will retry");
      return "retry"; // re-queue with exponential backoff
    }
    if (outcome === "stopped") {
      log.v(2).info("Stopping before the driver was called; the VolumeAttachment is left as is");
    }
    return outcome; // done: finished successfully, reset the backoff
  }

  /**
   * True when the sync must stop before its next write or driver call: the attacher stops
   * (`signal`), or the lease fence is closed (logged).
   */
  #mustStop(signal: AbortSignal | undefined, log: Logger): boolean {
    if (signal?.aborted) return true;
    return this.#fenceClosed(log);
  }

  /** True (and logged) when the lease fence is closed. */
  #fenceClosed(log: Logger): boolean {
    if (this.#fence.valid()) return false;
    log.info(FENCE_REFUSED_MESSAGE);
    return true;
  }

  async #syncAttach(
    va: VolumeAttachment,
    log: Logger,
    signal: AbortSignal,
  ): Promise<"done" | "stopped"> {
    const forced = this.#memory.takeOutOfSync(va.metadata.name);
    if (!forced && va.status?.attached) {
      log.v(4).info("VolumeAttachment is already attached");
      return "done";
    }
    log.v(2).info("Attaching", { node: va.spec.nodeName });
    const attached = await this.#csiAttach(va, log, signal);
    if (!attached.ok) {
      if ("stopped" in attached || this.#fenceClosed(log)) return "stopped";
      await this.#saveError(attached.va, "attachError", attached.error, log, va.metadata.uid);
      this.#recordFailure(attached.va, "attach", attached.error);
      throw new Error(`failed to attach: ${errorText(attached.error)}`, { cause: attached.error });
    }
    log.v(2).info("Attached", { node: va.spec.nodeName });
    if (this.#fenceClosed(log)) return "stopped"; // the next leader publishes again and records it
    try {
      await this.#markAsAttached(attached.va, attached.value.publishContext, va.metadata.uid);
    } catch (err) {
      if (va.metadata.uid) {
        this.#memory.rememberUnrecordedPublish(va.metadata.name, {
          uid: va.metadata.uid,
          ...attached.value,
        });
      }
      throw new Error(`failed to mark as attached: ${errorText(err)}`, { cause: err });
    }
    this.#recordRecovery(va, "attach");
    log.v(4).info("Fully attached");
    return "done";
  }

  async #syncDetach(
    va: VolumeAttachment,
    log: Logger,
    signal: AbortSignal,
  ): Promise<"done" | "stopped"> {
    const forced = this.#memory.takeOutOfSync(va.metadata.name);
    this.#memory.takeUnrecordedPublish(va.metadata.name); // a detach: never recorded as attached
    if (!forced && !(va.metadata.finalizers ?? []).includes(this.#finalizer)) {
      log.v(4).info("VolumeAttachment is already detached");
      this.#memory.takeFailure(va.metadata.name); // it is going away: no Event will follow
      return "done";
    }
    log.v(2).info("Detaching", { node: va.spec.nodeName });
    const detached = await this.#csiDetach(va, log, signal);
    if (!detached.ok) {
      if ("stopped" in detached || this.#fenceClosed(log)) return "stopped";
      await this.#saveError(detached.va, "detachError", detached.error, log, va.metadata.uid);
      this.#recordFailure(detached.va, "detach", detached.error);
      throw new Error(`failed to detach: ${errorText(detached.error)}`, { cause: detached.error });
    }
    this.#recordRecovery(va, "detach");
    log.v(2).info("Fully detached", { node: va.spec.nodeName });
    return "done";
  }

  /**
   * A Warning Event with the text just saved as `attachError`/`detachError` (errors never carry
   * secret values: secrets are only read into the CSI request).
   */
  #recordFailure(va: VolumeAttachment, op: "attach" | "detach", err: unknown): void {
    this.#memory.recordFailure(va.metadata.name, op);
    const reason = op === "attach" ? EVENT_REASONS.attachFailed : EVENT_REASONS.detachFailed;
    this.#events?.record(involvedObject(va), "Warning", reason, errorText(err));
  }

  /** A Normal Event when the attach or detach that just succeeded had failed before. */
  #recordRecovery(va: VolumeAttachment, op: "attach" | "detach"): void {
    const failedHere = this.#memory.takeFailure(va.metadata.name) === op;
    const hadError = op === "attach"
      ? va.status?.attachError != null
      : va.status?.detachError != null;
    if (!hadError && !failedHere) return;
    const message = op === "attach"
      ? `Volume attached to node ${va.spec.nodeName}`
      : `Volume detached from node ${va.spec.nodeName}`;
    const reason = op === "attach" ? EVENT_REASONS.attached : EVENT_REASONS.detached;
    this.#events?.record(involvedObject(va), "Normal", reason, message);
  }

  #getPersistentVolume(name: string): PersistentVolume {
    const pv = this.#stores.persistentVolumes.get(name);
    if (!pv) throw notFoundError(PERSISTENT_VOLUMES, name);
    return pv;
  }

  /**
   * Everything of an attach up to and including ControllerPublishVolume: the source checks, the PV
   * finalizer, the VA finalizer and node ID annotation, then the driver call. The API requests
   * before the call end when `signal` aborts, and the call is not made once it has.
   */
  async #csiAttach(
    va: VolumeAttachment,
    log: Logger,
    signal: AbortSignal,
  ): Promise<StepResult<Published>> {
    let current = va;
    let calledDriver = false;
    try {
      const pvName = persistentVolumeNameOf(va);
      let pv: PersistentVolume | undefined;
      if (pvName !== undefined) {
        pv = this.#getPersistentVolume(pvName);
        // Refuse to attach volumes that are marked for deletion.
        if (pv.metadata.deletionTimestamp) {
          throw new Error(`PersistentVolume "${pv.metadata.name}" is marked for deletion`);
        }
        if (this.#mustStop(signal, log)) return { ok: false, va: current, stopped: true };
        try {
          pv = await this.#addPersistentVolumeFinalizer(pv, log, signal);
        } catch (err) {
          throw new Error(`could not add PersistentVolume finalizer: ${errorText(err)}`, {
            cause: err,
          });
        }
      }
      const source = volumeSourceOf(va, pv);
      const volumeContext = { ...(source.csi.volumeAttributes ?? {}) };
      const handle = getVolumeHandle(source.csi);
      const readonly = this.#opts.supportsPublishReadOnly ? handle.readOnly : false;
      const capability: VolumeCapability = getVolumeCapability(source.spec, {
        supportsSingleNodeMultiWriter: this.#opts.supportsSingleNodeMultiWriter,
        defaultFsType: this.#opts.defaultFsType,
      });
      const secrets = await this.#getCredentials(source.csi, signal);
      const nodeId = this.#getNodeId(va.spec.nodeName, undefined);

      const saved = await this.#saveAttachMetadata(va, nodeId, log, signal);
      if (saved === undefined) return { ok: false, va: current, stopped: true };
      current = saved;

      const volumeId = handle.volumeHandle;
      const request = JSON.stringify([volumeId, nodeId, capability, readonly, volumeContext]);
      const earlier = this.#memory.takeUnrecordedPublish(va.metadata.name);
      if (
        earlier !== undefined && earlier.uid === va.metadata.uid && earlier.request === request &&
        !va.status?.attached
      ) {
        log.v(4).info("ControllerPublishVolume already succeeded with this request, recording it", {
          volumeHandle: volumeId,
          nodeID: nodeId,
        });
        return { ok: true, va: current, value: earlier };
      }
      if (this.#mustStop(signal, log)) return { ok: false, va: current, stopped: true };
      log.v(4).info("Calling ControllerPublishVolume", { volumeHandle: volumeId, nodeID: nodeId });
      calledDriver = true;
      const res = await this.#csi.controllerPublishVolume(
        {
          volumeId,
          nodeId,
          volumeCapability: capability,
          readonly,
          secrets: secrets ?? {},
          volumeContext,
        },
        this.#callOptions(source.migrated),
      );
      return { ok: true, va: current, value: { publishContext: res.publishContext, request } };
    } catch (error) {
      if (!calledDriver && signal.aborted) return { ok: false, va: current, stopped: true };
      if (error instanceof FencedCsiCallError) {
        log.info(FENCE_REFUSED_MESSAGE, { call: "ControllerPublishVolume" });
        return { ok: false, va: current, stopped: true };
      }
      return { ok: false, va: current, error };
    }
  }

  /**
   * Stores the finalizer (and the node ID for detach) on the VA before the driver publishes
   * anything. Returns the VA as the API server stored it, `va` itself when both are already there,
   * or undefined when the sync must stop before the write.
   */
  async #saveAttachMetadata(
    va: VolumeAttachment,
    nodeId: string,
    log: Logger,
    signal: AbortSignal,
  ): Promise<VolumeAttachment | undefined> {
    // A shallow copy: the two fields that change get new values, nothing of `va` (the cached
    // object) is written to.
    const metadata = { ...va.metadata };
    const finalizers = metadata.finalizers ?? [];
    if (!finalizers.includes(this.#finalizer)) {
      metadata.finalizers = [...finalizers, this.#finalizer];
    }
    if (metadata.annotations?.[NODE_ID_ANNOTATION] !== nodeId) {
      metadata.annotations = { ...(metadata.annotations ?? {}), [NODE_ID_ANNOTATION]: nodeId };
    }
    const metadataPatch = createMergePatch({ metadata: va.metadata }, { metadata });
    if (Object.keys(metadataPatch).length === 0) return va;
    // The uid makes the API server refuse the patch when the VA was deleted and created again
    // under the same name after the sync began: the driver must not publish for an object this
    // attacher has not seen, whose deletion the cache may already have passed on to the PV's
    // finalizer check. (The Go attacher patches by name only.)
    if (va.metadata.uid) {
      (metadataPatch.metadata as Record<string, unknown>).uid = va.metadata.uid;
    }
    if (this.#mustStop(signal, log)) return undefined;
    let saved: VolumeAttachment;
    try {
      saved = await this.#kube.patch<VolumeAttachment>(
        VOLUME_ATTACHMENTS,
        va.metadata.name,
        { type: "merge", body: metadataPatch },
        { signal },
      );
    } catch (err) {
      throw new Error(`could not save VolumeAttachment: ${errorText(err)}`, { cause: err });
    }
    log.v(4).info("VolumeAttachment finalizer added");
    return saved;
  }

  /**
   * Everything of a detach: the source checks, ControllerUnpublishVolume, then the VA writes. As
   * in {@link #csiAttach}, `signal` ends the steps before the driver call, and only those.
   */
  async #csiDetach(
    va: VolumeAttachment,
    log: Logger,
    signal: AbortSignal,
  ): Promise<StepResult<void>> {
    let calledDriver = false;
    try {
      const pvName = persistentVolumeNameOf(va);
      const pv = pvName === undefined ? undefined : this.#getPersistentVolume(pvName);
      const source = volumeSourceOf(va, pv);
      const { volumeHandle } = getVolumeHandle(source.csi);
      const secrets = await this.#getCredentials(source.csi, signal);
      const nodeId = this.#getNodeId(va.spec.nodeName, va);
      if (this.#mustStop(signal, log)) return { ok: false, va, stopped: true };
      log.v(4).info("Calling ControllerUnpublishVolume", { volumeHandle, nodeID: nodeId });
      calledDriver = true;
      await this.#csi.controllerUnpublishVolume(
        { volumeId: volumeHandle, nodeId, secrets: secrets ?? {} },
        this.#callOptions(source.migrated),
      );
    } catch (error) {
      if (!calledDriver && signal.aborted) return { ok: false, va, stopped: true };
      if (error instanceof FencedCsiCallError) {
        log.info(FENCE_REFUSED_MESSAGE, { call: "ControllerUnpublishVolume" });
        return { ok: false, va, stopped: true };
      }
      return { ok: false, va, error };
    }
    const marked = await this.#markAsDetached(va, log);
    if (!marked.ok) {
      if ("stopped" in marked) return marked;
      const error = new Error(`could not mark as detached: ${errorText(marked.error)}`, {
        cause: marked.error,
      });
      return { ok: false, va: marked.va, error };
    }
    return marked;
  }

  #callOptions(migrated: boolean) {
    const fence = this.#callFence;
    return MIGRATION_DRIVER_NAMES.has(this.#opts.driverName)
      ? { timeoutMs: this.#opts.timeoutMs, migrated, fence }
      : { timeoutMs: this.#opts.timeoutMs, fence };
  }

  /** Adds our finalizer to the PV with a guarded JSON patch; returns the PV to use. */
  async #addPersistentVolumeFinalizer(
    pv: PersistentVolume,
    log: Logger,
    signal: AbortSignal,
  ): Promise<PersistentVolume> {
    if ((pv.metadata.finalizers ?? []).includes(this.#finalizer)) return pv;
    const updated = await this.#kube.patch<PersistentVolume>(PERSISTENT_VOLUMES, pv.metadata.name, {
      type: "json",
      body: addFinalizerPatch(pv.metadata.finalizers, this.#finalizer),
    }, { signal });
    log.v(4).info("PersistentVolume finalizer added", { persistentVolume: pv.metadata.name });
    return updated;
  }

  /** The controller-publish secrets of the volume, or undefined when it names none. */
  async #getCredentials(
    csi: CsiPersistentVolumeSource,
    signal: AbortSignal,
  ): Promise<Record<string, string> | undefined> {
    const ref = csi.controllerPublishSecretRef;
    if (!ref) return undefined;
    const namespace = ref.namespace ?? "";
    const name = ref.name ?? "";
    let secret: Secret;
    try {
      secret = await this.#kube.get<Secret>(SECRETS, name, { namespace, signal });
    } catch (err) {
      throw new Error(`failed to load secret "${namespace}/${name}": ${errorText(err)}`, {
        cause: err,
      });
    }
    return secretValues(secret);
  }

  /** The driver's node ID for `nodeName`; see {@link nodeIdOf}. */
  #getNodeId(nodeName: string, va: VolumeAttachment | undefined): string {
    return nodeIdOf(this.#stores.csiNodes, this.#opts.driverName, nodeName, va);
  }

  /** `uid`: of the VA the sync started from (see {@link withUid}). */
  async #markAsAttached(
    va: VolumeAttachment,
    publishContext: Record<string, string>,
    uid: string | undefined,
  ): Promise<void> {
    const next = {
      ...(va.status ?? {}),
      attached: true,
      attachmentMetadata: Object.keys(publishContext).length > 0 ? publishContext : undefined,
      attachError: undefined,
    };
    const body = createMergePatch({ status: va.status ?? {} }, { status: next });
    // Cleared whatever the cached copy says: an error written by an earlier sync that the cache
    // has not shown yet would otherwise stay on the attached VA (the Go attacher computes the
    // patch from the cache alone).
    body.status = { ...(body.status as Record<string, unknown> | undefined), attachError: null };
    const written = await this.#kube.patch<VolumeAttachment>(
      VOLUME_ATTACHMENTS,
      va.metadata.name,
      { type: "merge", body: withUid(body, uid) },
      { subresource: "status" },
    );
    this.#memory.attached(va);
    this.#memory.recordOwnWrite(va.metadata.name, written);
  }

  /**
   * Removes our finalizer first, then marks the status detached, so a failure between the two
   * cannot lead to a second ControllerUnpublishVolume for a VA that is already gone
   * (https://github.com/kubernetes-csi/external-attacher/issues/587).
   */
  async #markAsDetached(va: VolumeAttachment, log: Logger): Promise<StepResult<void>> {
    const finalizers = va.metadata.finalizers ?? [];
    const found = finalizers.includes(this.#finalizer);
    let current = va;
    if (found) {
      if (this.#fenceClosed(log)) return { ok: false, va, stopped: true };
      const remaining = finalizers.filter((f) => f !== this.#finalizer);
      const newMeta = { ...va.metadata, finalizers: remaining.length > 0 ? remaining : undefined };
      const body = createMergePatch({ metadata: va.metadata }, { metadata: newMeta });
      // The uid makes the API server refuse the patch if it arrives late, after the VA was
      // deleted and created again under the same name: stripping the new VA's finalizer would
      // let it go without a detach. (The Go attacher patches by name only.)
      if (va.metadata.uid) (body.metadata as Record<string, unknown>).uid = va.metadata.uid;
      try {
        current = await this.#kube.patch<VolumeAttachment>(
          VOLUME_ATTACHMENTS,
          va.metadata.name,
          { type: "merge", body },
        );
      } catch (error) {
        return { ok: false, va, error };
      }
      this.#memory.recordOwnWrite(va.metadata.name, current);
      this.#memory.detached(va);
    }
    if (!found && !current.status?.attached) return { ok: true, va: current, value: undefined };
    const next = {
      ...(current.status ?? {}),
      attached: false,
      detachError: undefined,
      attachmentMetadata: undefined,
    };
    if (this.#fenceClosed(log)) return { ok: false, va: current, stopped: true };
    try {
      const written = await this.#kube.patch<VolumeAttachment>(
        VOLUME_ATTACHMENTS,
        va.metadata.name,
        {
          type: "merge",
          body: withUid(
            createMergePatch({ status: current.status ?? {} }, { status: next }),
            va.metadata.uid,
          ),
        },
        { subresource: "status" },
      );
      this.#memory.recordOwnWrite(va.metadata.name, written);
    } catch (error) {
      // The VA is gone: nothing left to mark.
      if (isNotFound(error)) return { ok: true, va: current, value: undefined };
      return { ok: false, va: current, error };
    }
    return { ok: true, va: current, value: undefined };
  }

  /** Records a failure in the VA's status; a failure to record it is only logged. */
  async #saveError(
    va: VolumeAttachment,
    field: "attachError" | "detachError",
    err: unknown,
    log: Logger,
    uid: string | undefined,
  ): Promise<void> {
    const error: { message: string; time: string; errorCode?: number } = {
      message: errorText(err),
      time: new Date(this.#clock.wallNow()).toISOString().replace(/\.\d+Z$/, "Z"),
    };
    const code = grpcCode(err);
    if (field === "attachError" && this.#opts.attachErrorCodes && code !== undefined) {
      error.errorCode = code;
    }
    const oldStatus = va.status ?? {};
    if (this.#fenceClosed(log)) return;
    const body = withUid(
      createMergePatch({ status: oldStatus }, { status: { ...oldStatus, [field]: error } }),
      uid,
    );
    try {
      await this.#kube.patch(VOLUME_ATTACHMENTS, va.metadata.name, {
        type: "merge",
        body,
      }, { subresource: "status" });
    } catch (saveErr) {
      log.error(saveErr, `Failed to save ${field}`, { error: error.message });
    }
  }

  async syncPersistentVolume(pv: PersistentVolume): Promise<SyncOutcome> {
    const name = pv.metadata.name;
    const log = this.#log.with({ persistentVolume: name });
    const rollback = isMigratablePersistentVolume(pv) &&
      pv.metadata.annotations?.[MIGRATED_TO_ANNOTATION] !== this.#opts.driverName;
    if (!pv.metadata.deletionTimestamp && !rollback) {
      log.v(4).info("PersistentVolume is not being deleted, ignoring");
      return "done";
    }
    if (!(pv.metadata.finalizers ?? []).includes(this.#finalizer)) return "done";
    const user = this.#stores.volumeAttachments.list().find((va) =>
      va.spec?.source?.persistentVolumeName === name
    );
    if (user) {
      log.v(4).info("PersistentVolume is still used by a VolumeAttachment, keeping its finalizer", {
        volumeAttachment: user.metadata.name,
      });
      return "done";
    }
    if (this.#fenceClosed(log)) return "stopped";
    try {
      await this.#kube.patch(PERSISTENT_VOLUMES, name, {
        type: "json",
        body: removeFinalizerPatch(pv.metadata.finalizers, this.#finalizer),
      });
    } catch (err) {
      log.error(err, "Failed to remove PersistentVolume finalizer, will retry");
      return "retry";
    }
    log.v(2).info("PersistentVolume finalizer removed");
    return "done";
  }
}
