/**
 * The handler for drivers with ControllerPublishVolume: attach, detach, PV finalizers and the
 * ListVolumes reconciliation, call by call as the Go attacher's `csi_handler.go`
 * (external-attacher `pkg/controller/csi_handler.go`: `syncAttach`, `csiAttach`, `syncDetach`,
 * `csiDetach`, `markAsDetached`, `SyncNewOrUpdatedPersistentVolume`, `ReconcileVA`).
 *
 * Safety invariants, in the order the calls are made:
 * - ControllerPublishVolume is sent only after the VA finalizer is stored, so a published volume
 *   always has a VA that cannot disappear before its detach.
 * - The VA finalizer is removed only after a successful ControllerUnpublishVolume.
 * - The PV finalizer is removed only when no VolumeAttachment names the PV.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { errorText } from "../errors.ts";
import { realClock } from "../clock.ts";
import type { CsiClient, VolumeCapability } from "../csi/api.ts";
import { CsiError } from "../csi/api.ts";
import type { Handler, HandlerContext } from "./handler.ts";
import type { OperationLatency } from "./operation_latency.ts";
import type { KubeApi } from "../kube/api.ts";
import {
  CSI_NODES,
  isNotFound,
  notFoundError,
  PERSISTENT_VOLUMES,
  SECRETS,
  VOLUME_ATTACHMENTS,
} from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { createMergePatch } from "../kube/patches.ts";
import {
  isMigratablePersistentVolume,
  MIGRATION_DRIVER_NAMES,
  repairVolumeHandle,
  translateInTreePersistentVolume,
} from "./migration.ts";
import { finalizerName, MIGRATED_TO_ANNOTATION, NODE_ID_ANNOTATION } from "./names.ts";
import { addFinalizerPatch, removeFinalizerPatch } from "../kube/finalizer_patch.ts";
import type {
  CsiPersistentVolumeSource,
  PersistentVolume,
  PersistentVolumeSpec,
  Secret,
  VolumeAttachment,
} from "../kube/types.ts";
import { getVolumeCapability, getVolumeHandle } from "./volume_capability.ts";
import type { InvolvedObject } from "../events/correlator.ts";

/** Where the handler reports attach and detach outcomes as Events (`events/recorder.ts`). */
export interface VolumeAttachmentEventSink {
  /** Queues an Event; must return at once (it runs on the attach and detach path). */
  record(object: InvolvedObject, type: "Normal" | "Warning", reason: string, message: string): void;
}

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
  /** Told when an attach or a detach is finished, for the end-to-end latency histograms. */
  latency?: OperationLatency;
  /** Events on VolumeAttachments (beyond the Go attacher, which records none); none if unset. */
  events?: VolumeAttachmentEventSink;
}

/** Options of {@link CsiHandler}; the capabilities come from ControllerGetCapabilities. */
export interface CsiHandlerOptions {
  driverName: string;
  /** Timeout of each ControllerPublish/Unpublish call and of one reconcile pass. */
  timeoutMs: number;
  supportsPublishReadOnly: boolean;
  supportsSingleNodeMultiWriter: boolean;
  /** fsType for mount capabilities when the PV has none (`--default-fstype`). */
  defaultFsType: string;
  /** Whether `attachError.errorCode` carries gRPC codes (gate MutableCSINodeAllocatableCount). */
  attachErrorCodes: boolean;
  /** `max_entries` of each ListVolumes page; 0 means no limit. */
  maxEntries: number;
}

/** What attach and detach need from the VA's source. */
interface VolumeSource {
  csi: CsiPersistentVolumeSource;
  spec: PersistentVolumeSpec;
  migrated: boolean;
}

/** What a successful publish gave: the driver's publish context, and the request it answered. */
interface Published {
  publishContext: Record<string, string>;
  /** The request without its secrets, as a key ({@link CsiHandler} `#unrecordedPublishes`). */
  request: string;
}

/**
 * How the driver step of an attach or detach ended. `va` is the newest VolumeAttachment the step
 * saw (after its own metadata patch, if any): the one whose status a failure is written to.
 */
type StepResult<T> =
  | { ok: true; va: VolumeAttachment; value: T }
  | { ok: false; va: VolumeAttachment; error: unknown };

/** The gRPC code of `err` if it is a gRPC status error, as Go's `status.FromError` tells. */
function grpcCode(err: unknown): number | undefined {
  return err instanceof CsiError ? err.code : undefined;
}

/**
 * The identity of one state of a VolumeAttachment in the cache: its uid and resourceVersion. Any
 * write (ours or another's) and a delete and re-create under the same name change it.
 */
function cachedVersion(va: VolumeAttachment): string {
  return `${va.metadata.uid ?? ""}/${va.metadata.resourceVersion ?? ""}`;
}

/** A resourceVersion as an integer, or undefined when it is not one. */
function parseResourceVersion(rv: string | undefined): bigint | undefined {
  return rv !== undefined && /^[0-9]+$/.test(rv) ? BigInt(rv) : undefined;
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

/** The reference an Event on `va` carries. */
function involvedObject(va: VolumeAttachment): InvolvedObject {
  const ref: InvolvedObject = {
    kind: "VolumeAttachment",
    apiVersion: "storage.k8s.io/v1",
    name: va.metadata.name,
  };
  if (va.metadata.uid) ref.uid = va.metadata.uid;
  if (va.metadata.resourceVersion) ref.resourceVersion = va.metadata.resourceVersion;
  return ref;
}

/** Attaches and detaches volumes through a CSI driver. */
export class CsiHandler implements Handler {
  #kube: KubeApi;
  #csi: CsiClient;
  #log: Logger;
  #clock: Clock;
  #latency: OperationLatency | undefined;
  #opts: CsiHandlerOptions;
  #finalizer: string;
  #ctx: HandlerContext | undefined;
  /** VAs the reconciler found out of sync: their next sync calls the driver regardless. */
  #forceSync = new Set<string>();
  /**
   * This handler's last writes that make a sync of an older cached VA pointless (`attached: true`
   * after a publish; the finalizer removal and `attached: false` after an unpublish), by VA name,
   * until the cache has them.
   */
  #ownWrites = new Map<string, { uid: string; resourceVersion: bigint }>();
  /**
   * Publishes the driver confirmed but whose `attached: true` could not be written, by VA name.
   * The retry sends the same request to an idempotent call, so it records the earlier answer
   * instead of publishing again; any other request, a detach, or a VA the cache shows attached
   * (a forced sync: the driver no longer lists it) calls the driver.
   */
  #unrecordedPublishes = new Map<string, { uid: string } & Published>();
  #events: VolumeAttachmentEventSink | undefined;
  /**
   * The operation that last failed, by VA name, for the Normal Event of the success that follows
   * even when the cache does not show the error yet (or saving it failed). An entry lives until
   * the VA's next successful attach or detach, or until the VA is gone.
   */
  #failed = new Map<string, "attach" | "detach">();

  constructor(deps: CsiHandlerDeps, opts: CsiHandlerOptions) {
    this.#kube = deps.kube;
    this.#csi = deps.csi;
    this.#log = deps.log;
    this.#clock = deps.clock ?? realClock;
    this.#latency = deps.latency;
    this.#events = deps.events;
    this.#opts = opts;
    this.#finalizer = finalizerName(opts.driverName);
  }

  init(ctx: HandlerContext): void {
    this.#ctx = ctx;
  }

  #context(): HandlerContext {
    if (!this.#ctx) throw new Error("CsiHandler used before init()");
    return this.#ctx;
  }

  forgetVolumeAttachment(name: string): void {
    this.#forceSync.delete(name);
    this.#ownWrites.delete(name);
    this.#failed.delete(name);
    this.#unrecordedPublishes.delete(name);
  }

  #consumeForceSync(name: string): boolean {
    return this.#forceSync.delete(name);
  }

  async syncVolumeAttachment(va: VolumeAttachment): Promise<void> {
    const name = va.metadata.name;
    const log = this.#log.with({ volumeAttachment: name });
    const queue = this.#context().vaQueue;
    if (this.#olderThanOwnWrite(va)) {
      log.v(4).info(
        "Cached VolumeAttachment is older than the attach or detach just recorded, skipping",
      );
      queue.forget(name);
      return;
    }
    try {
      if (va.metadata.deletionTimestamp) {
        await this.#syncDetach(va, log);
      } else {
        await this.#syncAttach(va, log);
      }
    } catch (err) {
      log.error(err, "Error processing VolumeAttachment, will retry");
      queue.addRateLimited(name); // re-queue with exponential backoff
      return;
    }
    queue.forget(name); // finished successfully: reset the backoff
  }

  async #syncAttach(va: VolumeAttachment, log: Logger): Promise<void> {
    const forced = this.#consumeForceSync(va.metadata.name);
    if (!forced && va.status?.attached) {
      log.v(4).info("VolumeAttachment is already attached");
      return;
    }
    log.v(2).info("Attaching", { node: va.spec.nodeName });
    const attached = await this.#csiAttach(va, log);
    if (!attached.ok) {
      await this.#saveError(attached.va, "attachError", attached.error, log);
      this.#recordFailure(attached.va, "attach", attached.error);
      throw new Error(`failed to attach: ${errorText(attached.error)}`, { cause: attached.error });
    }
    log.v(2).info("Attached", { node: va.spec.nodeName });
    try {
      await this.#markAsAttached(attached.va, attached.value.publishContext);
    } catch (err) {
      if (va.metadata.uid) {
        this.#unrecordedPublishes.set(va.metadata.name, {
          uid: va.metadata.uid,
          ...attached.value,
        });
      }
      throw new Error(`failed to mark as attached: ${errorText(err)}`, { cause: err });
    }
    this.#unrecordedPublishes.delete(va.metadata.name);
    this.#recordRecovery(va, "attach");
    log.v(4).info("Fully attached");
  }

  async #syncDetach(va: VolumeAttachment, log: Logger): Promise<void> {
    const forced = this.#consumeForceSync(va.metadata.name);
    this.#unrecordedPublishes.delete(va.metadata.name);
    if (!forced && !(va.metadata.finalizers ?? []).includes(this.#finalizer)) {
      log.v(4).info("VolumeAttachment is already detached");
      this.#failed.delete(va.metadata.name); // it is going away: no Event will follow
      return;
    }
    log.v(2).info("Detaching", { node: va.spec.nodeName });
    const detached = await this.#csiDetach(va, log);
    if (!detached.ok) {
      await this.#saveError(detached.va, "detachError", detached.error, log);
      this.#recordFailure(detached.va, "detach", detached.error);
      throw new Error(`failed to detach: ${errorText(detached.error)}`, { cause: detached.error });
    }
    this.#recordRecovery(va, "detach");
    log.v(2).info("Fully detached", { node: va.spec.nodeName });
  }

  /**
   * A Warning Event with the text just saved as `attachError`/`detachError` (errors never carry
   * secret values: secrets are only read into the CSI request).
   */
  #recordFailure(va: VolumeAttachment, op: "attach" | "detach", err: unknown): void {
    this.#failed.set(va.metadata.name, op);
    const reason = op === "attach" ? EVENT_REASONS.attachFailed : EVENT_REASONS.detachFailed;
    this.#events?.record(involvedObject(va), "Warning", reason, errorText(err));
  }

  /** A Normal Event when the attach or detach that just succeeded had failed before. */
  #recordRecovery(va: VolumeAttachment, op: "attach" | "detach"): void {
    const name = va.metadata.name;
    const failedHere = this.#failed.get(name) === op;
    this.#failed.delete(name);
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

  /** The CSI source of the VA, with the source checks and PV lookups both paths share. */
  #volumeSource(va: VolumeAttachment, pv: PersistentVolume | undefined): VolumeSource {
    const source = va.spec.source ?? {};
    if (pv) {
      let migrated = false;
      let spec = pv.spec;
      if (isMigratablePersistentVolume(pv)) {
        try {
          spec = translateInTreePersistentVolume(pv).spec;
        } catch (err) {
          throw new Error(`failed to translate in tree pv to CSI: ${errorText(err)}`, {
            cause: err,
          });
        }
        migrated = true;
      }
      if (!spec.csi) throw new Error("pv spec contained non-csi source that was not migrated");
      return { csi: spec.csi, spec, migrated };
    }
    const inline = source.inlineVolumeSpec;
    if (!inline?.csi) throw new Error("inline volume spec contains nil CSI source");
    return { csi: inline.csi, spec: inline, migrated: false };
  }

  /** Checks that the VA names exactly one source and returns the PV name, if any. */
  #checkSource(va: VolumeAttachment): string | undefined {
    const source = va.spec.source ?? {};
    if (source.persistentVolumeName) {
      if (source.inlineVolumeSpec) {
        throw new Error(
          "both InlineCSIVolumeSource and PersistentVolumeName specified in VA source",
        );
      }
      return source.persistentVolumeName;
    }
    if (!source.inlineVolumeSpec) {
      throw new Error(
        "neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source",
      );
    }
    return undefined;
  }

  #getPersistentVolume(name: string): PersistentVolume {
    const pv = this.#context().pvStore.get(name);
    if (!pv) throw notFoundError(PERSISTENT_VOLUMES, name);
    return pv;
  }

  /**
   * Everything of an attach up to and including ControllerPublishVolume: the source checks, the PV
   * finalizer, the VA finalizer and node ID annotation, then the driver call.
   */
  async #csiAttach(
    va: VolumeAttachment,
    log: Logger,
  ): Promise<StepResult<Published>> {
    let current = va;
    try {
      const pvName = this.#checkSource(va);
      let pv: PersistentVolume | undefined;
      if (pvName !== undefined) {
        pv = this.#getPersistentVolume(pvName);
        // Refuse to attach volumes that are marked for deletion.
        if (pv.metadata.deletionTimestamp) {
          throw new Error(`PersistentVolume "${pv.metadata.name}" is marked for deletion`);
        }
        try {
          pv = await this.#addPersistentVolumeFinalizer(pv, log);
        } catch (err) {
          throw new Error(`could not add PersistentVolume finalizer: ${errorText(err)}`, {
            cause: err,
          });
        }
      }
      const source = this.#volumeSource(va, pv);
      const volumeContext = { ...(source.csi.volumeAttributes ?? {}) };
      const handle = getVolumeHandle(source.csi);
      const readonly = this.#opts.supportsPublishReadOnly ? handle.readOnly : false;
      const capability: VolumeCapability = getVolumeCapability(source.spec, {
        supportsSingleNodeMultiWriter: this.#opts.supportsSingleNodeMultiWriter,
        defaultFsType: this.#opts.defaultFsType,
      });
      const secrets = await this.#getCredentials(source.csi);
      const nodeId = this.#getNodeId(va.spec.nodeName, undefined);

      // Store the finalizer (and the node ID for detach) before the driver publishes anything.
      const updated: VolumeAttachment = structuredClone(va);
      const finalizers = updated.metadata.finalizers ?? [];
      if (!finalizers.includes(this.#finalizer)) {
        updated.metadata.finalizers = [...finalizers, this.#finalizer];
      }
      if (updated.metadata.annotations?.[NODE_ID_ANNOTATION] !== nodeId) {
        updated.metadata.annotations = {
          ...(updated.metadata.annotations ?? {}),
          [NODE_ID_ANNOTATION]: nodeId,
        };
      }
      const metadataPatch = createMergePatch({ metadata: va.metadata }, {
        metadata: updated.metadata,
      });
      if (Object.keys(metadataPatch).length > 0) {
        // The uid makes the API server refuse the patch when the VA was deleted and created
        // again under the same name after the sync began: the driver must not publish for an
        // object this attacher has not seen, whose deletion the cache may already have passed on
        // to the PV's finalizer check. (The Go attacher patches by name only.)
        if (va.metadata.uid) {
          (metadataPatch.metadata as Record<string, unknown>).uid = va.metadata.uid;
        }
        try {
          current = await this.#kube.patch<VolumeAttachment>(
            VOLUME_ATTACHMENTS,
            va.metadata.name,
            { type: "merge", body: metadataPatch },
          );
        } catch (err) {
          throw new Error(`could not save VolumeAttachment: ${errorText(err)}`, { cause: err });
        }
        log.v(4).info("VolumeAttachment finalizer added");
      }

      const volumeId = handle.volumeHandle;
      const request = JSON.stringify([volumeId, nodeId, capability, readonly, volumeContext]);
      const earlier = this.#unrecordedPublishes.get(va.metadata.name);
      this.#unrecordedPublishes.delete(va.metadata.name);
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
      log.v(4).info("Calling ControllerPublishVolume", { volumeHandle: volumeId, nodeID: nodeId });
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
      return { ok: false, va: current, error };
    }
  }

  /** Everything of a detach: the source checks, ControllerUnpublishVolume, then the VA writes. */
  async #csiDetach(va: VolumeAttachment, log: Logger): Promise<StepResult<void>> {
    try {
      const pvName = this.#checkSource(va);
      const pv = pvName === undefined ? undefined : this.#getPersistentVolume(pvName);
      const source = this.#volumeSource(va, pv);
      const { volumeHandle } = getVolumeHandle(source.csi);
      const secrets = await this.#getCredentials(source.csi);
      const nodeId = this.#getNodeId(va.spec.nodeName, va);
      log.v(4).info("Calling ControllerUnpublishVolume", { volumeHandle, nodeID: nodeId });
      await this.#csi.controllerUnpublishVolume(
        { volumeId: volumeHandle, nodeId, secrets: secrets ?? {} },
        this.#callOptions(source.migrated),
      );
    } catch (error) {
      return { ok: false, va, error };
    }
    const marked = await this.#markAsDetached(va);
    if (!marked.ok) {
      const error = new Error(`could not mark as detached: ${errorText(marked.error)}`, {
        cause: marked.error,
      });
      return { ok: false, va: marked.va, error };
    }
    return marked;
  }

  #callOptions(migrated: boolean) {
    return MIGRATION_DRIVER_NAMES.has(this.#opts.driverName)
      ? { timeoutMs: this.#opts.timeoutMs, migrated }
      : { timeoutMs: this.#opts.timeoutMs };
  }

  /** Adds our finalizer to the PV with a guarded JSON patch; returns the PV to use. */
  async #addPersistentVolumeFinalizer(
    pv: PersistentVolume,
    log: Logger,
  ): Promise<PersistentVolume> {
    if ((pv.metadata.finalizers ?? []).includes(this.#finalizer)) return pv;
    const updated = await this.#kube.patch<PersistentVolume>(PERSISTENT_VOLUMES, pv.metadata.name, {
      type: "json",
      body: addFinalizerPatch(pv.metadata.finalizers, this.#finalizer),
    });
    log.v(4).info("PersistentVolume finalizer added", { persistentVolume: pv.metadata.name });
    return updated;
  }

  /** The controller-publish secrets of the volume, or undefined when it names none. */
  async #getCredentials(
    csi: CsiPersistentVolumeSource,
  ): Promise<Record<string, string> | undefined> {
    const ref = csi.controllerPublishSecretRef;
    if (!ref) return undefined;
    const namespace = ref.namespace ?? "";
    const name = ref.name ?? "";
    let secret: Secret;
    try {
      secret = await this.#kube.get<Secret>(SECRETS, name, { namespace });
    } catch (err) {
      throw new Error(`failed to load secret "${namespace}/${name}": ${errorText(err)}`, {
        cause: err,
      });
    }
    return secretValues(secret);
  }

  /**
   * The driver's node ID for `nodeName`, from its CSINode. For detach (`va` given) the VA's
   * annotation is the fallback when the CSINode or its driver entry is gone.
   */
  #getNodeId(nodeName: string, va: VolumeAttachment | undefined): string {
    const csiNode = this.#context().csiNodeStore.get(nodeName);
    let err: Error;
    if (csiNode) {
      const entry = (csiNode.spec?.drivers ?? []).find((d) => d.name === this.#opts.driverName);
      if (entry) return entry.nodeID;
      err = new Error(`CSINode ${nodeName} does not contain driver ${this.#opts.driverName}`);
    } else {
      err = notFoundError(CSI_NODES, nodeName);
    }
    const annotated = va?.metadata.annotations?.[NODE_ID_ANNOTATION];
    if (annotated !== undefined) return annotated;
    throw err;
  }

  async #markAsAttached(
    va: VolumeAttachment,
    publishContext: Record<string, string>,
  ): Promise<void> {
    const next = {
      ...(va.status ?? {}),
      attached: true,
      attachmentMetadata: Object.keys(publishContext).length > 0 ? publishContext : undefined,
      attachError: undefined,
    };
    const written = await this.#kube.patch<VolumeAttachment>(
      VOLUME_ATTACHMENTS,
      va.metadata.name,
      { type: "merge", body: createMergePatch({ status: va.status ?? {} }, { status: next }) },
      { subresource: "status" },
    );
    this.#latency?.attached(va);
    this.#recordOwnWrite(va.metadata.name, written);
  }

  /**
   * Remembers a write of {@link #ownWrites}; `written` is the object the API server returned.
   * Entries are dropped once the cache has the write (see {@link #olderThanOwnWrite}), or when
   * the VA is deleted ({@link forgetVolumeAttachment}).
   */
  #recordOwnWrite(name: string, written: VolumeAttachment | undefined): void {
    const rv = parseResourceVersion(written?.metadata?.resourceVersion);
    if (rv !== undefined && written?.metadata.uid) {
      this.#ownWrites.set(name, { uid: written.metadata.uid, resourceVersion: rv });
    }
  }

  /**
   * True when the cached VA is older than the `attached: true` this handler wrote for it, or
   * than its finalizer removal or `attached: false` after an unpublish. The VA is queued again by
   * its own metadata patch (or by the reconciler), and that sync may start before the watch has
   * delivered the write: without this check it would publish (or unpublish) the volume a second
   * time. The watch event of the write queues the VA again, so nothing is lost by skipping. Like
   * client-go's MutationCache, this compares resourceVersions as integers; a non-numeric one is
   * never treated as stale.
   */
  #olderThanOwnWrite(va: VolumeAttachment): boolean {
    const name = va.metadata.name;
    const own = this.#ownWrites.get(name);
    if (own === undefined) return false;
    const cached = parseResourceVersion(va.metadata.resourceVersion);
    if (own.uid === va.metadata.uid && cached !== undefined && cached < own.resourceVersion) {
      return true;
    }
    this.#ownWrites.delete(name);
    return false;
  }

  /**
   * Removes our finalizer first, then marks the status detached, so a failure between the two
   * cannot lead to a second ControllerUnpublishVolume for a VA that is already gone
   * (https://github.com/kubernetes-csi/external-attacher/issues/587).
   */
  async #markAsDetached(va: VolumeAttachment): Promise<StepResult<void>> {
    const finalizers = va.metadata.finalizers ?? [];
    const found = finalizers.includes(this.#finalizer);
    let current = va;
    if (found) {
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
      this.#recordOwnWrite(va.metadata.name, current);
      this.#latency?.detached(va);
    }
    if (!found && !current.status?.attached) return { ok: true, va: current, value: undefined };
    const next = {
      ...(current.status ?? {}),
      attached: false,
      detachError: undefined,
      attachmentMetadata: undefined,
    };
    try {
      const written = await this.#kube.patch<VolumeAttachment>(
        VOLUME_ATTACHMENTS,
        va.metadata.name,
        {
          type: "merge",
          body: createMergePatch({ status: current.status ?? {} }, { status: next }),
        },
        { subresource: "status" },
      );
      this.#recordOwnWrite(va.metadata.name, written);
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
    try {
      await this.#kube.patch(VOLUME_ATTACHMENTS, va.metadata.name, {
        type: "merge",
        body: createMergePatch({ status: oldStatus }, { status: { ...oldStatus, [field]: error } }),
      }, { subresource: "status" });
    } catch (saveErr) {
      log.error(saveErr, `Failed to save ${field}`, { error: error.message });
    }
  }

  async syncPersistentVolume(pv: PersistentVolume): Promise<void> {
    const name = pv.metadata.name;
    const { vaStore, pvQueue } = this.#context();
    const log = this.#log.with({ persistentVolume: name });
    const rollback = isMigratablePersistentVolume(pv) &&
      pv.metadata.annotations?.[MIGRATED_TO_ANNOTATION] !== this.#opts.driverName;
    if (!pv.metadata.deletionTimestamp && !rollback) {
      log.v(4).info("PersistentVolume is not being deleted, ignoring");
      pvQueue.forget(name);
      return;
    }
    if (!(pv.metadata.finalizers ?? []).includes(this.#finalizer)) {
      pvQueue.forget(name);
      return;
    }
    const user = vaStore.list().find((va) => va.spec?.source?.persistentVolumeName === name);
    if (user) {
      log.v(4).info("PersistentVolume is still used by a VolumeAttachment, keeping its finalizer", {
        volumeAttachment: user.metadata.name,
      });
      pvQueue.forget(name);
      return;
    }
    try {
      await this.#kube.patch(PERSISTENT_VOLUMES, name, {
        type: "json",
        body: removeFinalizerPatch(pv.metadata.finalizers, this.#finalizer),
      });
    } catch (err) {
      log.error(err, "Failed to remove PersistentVolume finalizer, will retry");
      pvQueue.addRateLimited(name);
      return;
    }
    log.v(2).info("PersistentVolume finalizer removed");
    pvQueue.forget(name);
  }

  /**
   * One ListVolumes pass (external-attacher `pkg/controller/csi_handler.go, ReconcileVA`): every
   * VA whose `status.attached` differs from what the driver reports for its volume and node is
   * queued with a forced sync, which calls the driver even if the VA looks done.
   *
   * Unlike the Go attacher, a difference is acted on only when it is real. The driver's answer
   * and the cache are read at different times, so a VA is left to its own sync when it
   * - is queued or being synced (an attach or detach in flight: the driver may already show its
   *   result while the cache does not), or
   * - changed in the cache since the pass started (the answer may predate the change).
   * Such a VA is looked at again in the next pass; a difference that remains is repaired then.
   */
  async reconcile(signal: AbortSignal): Promise<void> {
    const { vaStore, pvStore, vaQueue, isVolumeAttachmentBusy } = this.#context();
    // The state of every VA before the driver is asked: a VA whose cached state differs from
    // this afterwards changed while ListVolumes ran.
    const before = new Map<string, string>();
    for (const va of vaStore.list()) before.set(va.metadata.name, cachedVersion(va));
    const deadline = this.#clock.now() + this.#opts.timeoutMs;
    const published = new Map<string, Set<string>>();
    let token = "";
    do {
      if (signal.aborted) return;
      const timeoutMs = Math.max(1, deadline - this.#clock.now());
      let page;
      try {
        page = await this.#csi.listVolumes({
          maxEntries: this.#opts.maxEntries,
          startingToken: token,
        }, {
          timeoutMs,
        });
      } catch (err) {
        throw new Error(`failed to ListVolumes: failed to list volumes: ${errorText(err)}`, {
          cause: err,
        });
      }
      for (const entry of page.entries) {
        published.set(entry.volumeId, new Set(entry.publishedNodeIds));
      }
      token = page.nextToken;
    } while (token !== "");

    for (const va of vaStore.list()) {
      if (va.spec?.attacher !== this.#opts.driverName) continue;
      const name = va.metadata.name;
      const log = this.#log.with({ volumeAttachment: name });
      let nodeId: string;
      let volumeHandle: string;
      try {
        nodeId = this.#getNodeId(va.spec.nodeName, va);
        const pvName = this.#checkSource(va);
        const pv = pvName === undefined ? undefined : pvStore.get(pvName);
        if (pvName !== undefined && !pv) throw notFoundError(PERSISTENT_VOLUMES, pvName);
        const source = this.#volumeSource(va, pv);
        volumeHandle = getVolumeHandle(source.csi).volumeHandle;
        if (source.migrated) {
          volumeHandle = repairVolumeHandle(source.csi.driver, volumeHandle, nodeId);
        }
      } catch (err) {
        log.error(err, "Skipping VolumeAttachment in reconciliation");
        continue;
      }
      const found = published.get(volumeHandle)?.has(nodeId) ?? false;
      const attached = va.status?.attached ?? false;
      if (found === attached) continue;
      const fields = { volumeHandle, nodeID: nodeId, attached, published: found };
      if (isVolumeAttachmentBusy(name)) {
        log.v(4).info("VolumeAttachment is queued or being synced, not reconciling it", fields);
        continue;
      }
      if (before.get(name) !== cachedVersion(va)) {
        log.v(4).info("VolumeAttachment changed during ListVolumes, not reconciling it", fields);
        continue;
      }
      log.v(2).info("Driver's published state differs from VolumeAttachment, requeueing", fields);
      this.#forceSync.add(name);
      vaQueue.add(name);
    }
  }
}
