/**
 * The handler for drivers with ControllerPublishVolume: attach, detach and PV finalizers, call by
 * call as the Go attacher's `csi_handler.go` (external-attacher `pkg/controller/csi_handler.go`:
 * `syncAttach`, `csiAttach`, `syncDetach`, `csiDetach`, `markAsDetached`,
 * `SyncNewOrUpdatedPersistentVolume`). The attach is `attach.ts`, the detach `detach.ts`, what
 * they share `sync_step.ts`; this module dispatches a sync to them and is the one place where how
 * a sync ended (its `Step<void>`) becomes what happens to the key ({@link SyncOutcome}), for
 * PersistentVolumes too. The ListVolumes reconciliation
 * (`ReconcileVA`) is `reconciler.ts`; what is kept per VolumeAttachment between syncs is
 * `attachment_memory.ts`.
 *
 * Safety invariants, in the order the calls are made:
 * - ControllerPublishVolume is sent only after the VA finalizer is stored, so a published volume
 *   always has a VA that cannot disappear before its detach.
 * - The VA finalizer is removed only after a successful ControllerUnpublishVolume.
 * - The PV finalizer is removed only when no VolumeAttachment names the PV.
 * - The lease fence of the term ({@link CsiHandlerDeps.fence}) is asked synchronously before
 *   every write and driver call, and again at the last synchronous moment before the request's
 *   bytes are written to the connection (for a driver call by the HTTP/2 frame writer, for an API
 *   write by the Kubernetes client after its rate limiter and by the HTTP/1.1 transport, before
 *   every retry too). When it says no, the sync stops
 *   there as on SIGTERM (`stopped`: nothing more is written, the key is left for the next leader),
 *   also after a driver call: the next leader repeats the call (publish and unpublish are
 *   idempotent) and records it.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { errorText } from "../errors.ts";
import { realClock } from "../clock.ts";
import type { CsiClient } from "../csi/api.ts";
import { CsiError } from "../csi/api.ts";
import { FENCE_REFUSED_MESSAGE, type LeaseFence } from "../lease_fence.ts";
import { fencedIn, FencedWrites } from "./fenced_writes.ts";
import type { EventSink } from "../events/recorder.ts";
import type { Handler, HandlerStores, SyncOutcome } from "./handler.ts";
import type { AttachmentMemory } from "./attachment_memory.ts";
import type { KubeApi } from "../kube/api.ts";
import { PERSISTENT_VOLUMES } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { isMigratablePersistentVolume } from "./migration.ts";
import { finalizerName, MIGRATED_TO_ANNOTATION } from "./names.ts";
import { removeFinalizerPatch } from "../kube/finalizer_patch.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { syncAttach } from "./attach.ts";
import { syncDetach } from "./detach.ts";
import {
  type CsiHandlerOptions,
  DONE,
  failed,
  type FailureRecord,
  fenceClosed,
  type Step,
  STOPPED,
  type SyncContext,
} from "./sync_step.ts";
import { writeStatus } from "./status_write.ts";
import { recordFailure } from "./va_events.ts";

export type { CsiHandlerOptions } from "./sync_step.ts";

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
  /**
   * The lease fence of the term this handler works in (`LeaderElector`'s `onStartedLeading`), or
   * `SOLE_REPLICA` without leader election; required, so that no handler acts unfenced by
   * omission.
   */
  fence: LeaseFence;
}

/** The line logged when a sync failed and its key is retried with backoff. */
const RETRY_MESSAGE = "Error processing VolumeAttachment, will retry";

/** The line logged when removing the PV finalizer failed and the PV is retried with backoff. */
const PV_RETRY_MESSAGE = "Failed to remove PersistentVolume finalizer, will retry";

/**
 * What a sync's conclusion needs of the object it synced: its kind, and for a VolumeAttachment
 * the uid of the one the sync started from (see `withUid` in `status_write.ts`).
 */
type Synced =
  | { readonly kind: "VolumeAttachment"; readonly uid: string | undefined }
  | { readonly kind: "PersistentVolume" };

/** The gRPC code of `err` if it is a gRPC status error, as Go's `status.FromError` tells. */
function grpcCode(err: unknown): number | undefined {
  return err instanceof CsiError ? err.code : undefined;
}

/**
 * Attaches and detaches volumes through a CSI driver. Built with its stores and the shared
 * per-VolumeAttachment memory; it is ready to sync once constructed.
 */
export class CsiHandler implements Handler {
  #ctx: SyncContext;
  #log: Logger;

  constructor(deps: CsiHandlerDeps, opts: CsiHandlerOptions) {
    this.#ctx = Object.freeze({
      // Every write of this handler carries the term's fence, down to the transport.
      kube: new FencedWrites(deps.kube, deps.fence),
      csi: deps.csi,
      clock: deps.clock ?? realClock,
      stores: deps.stores,
      memory: deps.memory,
      events: deps.events,
      fence: deps.fence,
      opts,
      finalizer: finalizerName(opts.driverName),
    });
    this.#log = deps.log;
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
    if (this.#ctx.memory.isOlderThanOwnWrite(va)) {
      log.v(4).info(
        "Cached VolumeAttachment is older than the attach or detach just recorded, skipping",
      );
      return "done";
    }
    const result = va.metadata.deletionTimestamp
      ? await syncDetach(this.#ctx, va, log, signal)
      : await syncAttach(this.#ctx, va, log, signal);
    return await this.#conclude(result, { kind: "VolumeAttachment", uid: va.metadata.uid }, log, {
      signal,
    });
  }

  /**
   * The one place where how a sync ended becomes what happens to the key: `ok` is `done` (its
   * backoff is reset), `failed` is `retry` (re-queued with exponential backoff), `stopped` leaves
   * it as it is. A failure with a record is first recorded on its VA (see
   * {@link #recordFailure}), one without is logged. A write the fence refused after the rate
   * limiter or at the connection stops the sync instead. `signal`: the stop signal of a
   * VolumeAttachment's sync, which tells a stop for shutdown from one for the fence.
   */
  async #conclude(
    result: Step<void>,
    synced: Synced,
    log: Logger,
    opts: { signal?: AbortSignal } = {},
  ): Promise<SyncOutcome> {
    if (result.kind === "failed" && fencedIn(result.error)) {
      log.info(FENCE_REFUSED_MESSAGE);
      return stopped(log, "fence", synced.kind);
    }
    switch (result.kind) {
      case "ok":
        return "done";
      case "stopped":
        return stopped(log, opts.signal?.aborted ? "shutdown" : "fence", synced.kind);
      case "failed":
        if (result.record !== undefined && synced.kind === "VolumeAttachment") {
          return await this.#recordFailure(result.error, result.record, synced.uid, log);
        }
        log.error(
          result.error,
          synced.kind === "VolumeAttachment" ? RETRY_MESSAGE : PV_RETRY_MESSAGE,
        );
        return "retry";
    }
  }

  /**
   * Records a failed attach or detach, as the Go attacher's `saveAttachError`/`saveDetachError`:
   * its text in `attachError`/`detachError`, then a Warning Event, then the retry.
   *
   * A failed error write is not lost, nor does it change the outcome: the attach or detach failed
   * whatever the write did, so the key is retried with backoff (the retry writes the error again,
   * as the Go attacher's requeue does); the Event still carries the error; and the one retry line
   * logs both, the sync's error as `err` and the write's as `saveError`. Only a closed lease
   * fence at the write stops the sync instead (nothing more is written, no Event).
   *
   * `uid`: of the VA the sync started from (see `withUid` in `status_write.ts`).
   */
  async #recordFailure(
    cause: unknown,
    record: FailureRecord,
    uid: string | undefined,
    log: Logger,
  ): Promise<SyncOutcome> {
    const saved = await this.#saveError(cause, record, uid, log);
    if (saved.kind === "stopped") return stopped(log, "fence", "VolumeAttachment");
    recordFailure(this.#ctx, record.va, record.op, cause);
    const error = new Error(`failed to ${record.op}: ${errorText(cause)}`, { cause });
    if (saved.kind === "failed") {
      log.error(error, RETRY_MESSAGE, { saveError: errorText(saved.error) });
    } else {
      log.error(error, RETRY_MESSAGE);
    }
    return "retry";
  }

  /** Writes the failure's text (and gRPC code, on attach) into the status of its VA. */
  async #saveError(
    cause: unknown,
    record: FailureRecord,
    uid: string | undefined,
    log: Logger,
  ): Promise<Step<void>> {
    const field = record.op === "attach" ? "attachError" : "detachError";
    const error: { message: string; time: string; errorCode?: number } = {
      message: errorText(cause),
      time: new Date(this.#ctx.clock.wallNow()).toISOString().replace(/\.\d+Z$/, "Z"),
    };
    const code = grpcCode(cause);
    if (field === "attachError" && this.#ctx.opts.attachErrorCodes && code !== undefined) {
      error.errorCode = code;
    }
    if (fenceClosed(this.#ctx, log)) return STOPPED;
    try {
      await writeStatus(this.#ctx.kube, record.va, { set: { [field]: error } }, uid);
    } catch (saveErr) {
      if (fencedIn(saveErr)) {
        log.info(FENCE_REFUSED_MESSAGE);
        return STOPPED;
      }
      return failed(
        new Error(`failed to save ${field}: ${errorText(saveErr)}`, { cause: saveErr }),
      );
    }
    return DONE;
  }

  async syncPersistentVolume(pv: PersistentVolume): Promise<SyncOutcome> {
    const name = pv.metadata.name;
    const log = this.#log.with({ persistentVolume: name });
    const rollback = isMigratablePersistentVolume(pv) &&
      pv.metadata.annotations?.[MIGRATED_TO_ANNOTATION] !== this.#ctx.opts.driverName;
    if (!pv.metadata.deletionTimestamp && !rollback) {
      log.v(4).info("PersistentVolume is not being deleted, ignoring");
      return "done";
    }
    if (!(pv.metadata.finalizers ?? []).includes(this.#ctx.finalizer)) return "done";
    const user = this.#ctx.stores.volumeAttachments.list().find((va) =>
      va.spec?.source?.persistentVolumeName === name
    );
    if (user) {
      log.v(4).info("PersistentVolume is still used by a VolumeAttachment, keeping its finalizer", {
        volumeAttachment: user.metadata.name,
      });
      return "done";
    }
    const removed = await this.#removePersistentVolumeFinalizer(pv, log);
    return await this.#conclude(removed, { kind: "PersistentVolume" }, log);
  }

  /** Removes our finalizer from `pv` with a guarded JSON patch (asking the fence first). */
  async #removePersistentVolumeFinalizer(pv: PersistentVolume, log: Logger): Promise<Step<void>> {
    if (fenceClosed(this.#ctx, log)) return STOPPED;
    try {
      await this.#ctx.kube.patch(PERSISTENT_VOLUMES, pv.metadata.name, {
        type: "json",
        body: removeFinalizerPatch(pv.metadata.finalizers, this.#ctx.finalizer),
      });
    } catch (err) {
      return failed(err);
    }
    log.v(2).info("PersistentVolume finalizer removed");
    return DONE;
  }
}

/**
 * Logs that the sync stopped; the key is left as it is. `why`: the attacher is stopping (a sync
 * that had not called the driver ends where it waits; one that had completes and is not
 * stopped), or the lease fence closed, which may be after the driver was called: the result is
 * then not written, and the next leader calls again and records it.
 */
function stopped(
  log: Logger,
  why: "shutdown" | "fence",
  kind: "VolumeAttachment" | "PersistentVolume",
): SyncOutcome {
  log.v(2).info(
    `Sync stopped before its next write or driver call; the ${kind} is left for the next leader`,
    { reason: why === "shutdown" ? "attacher stopping" : "lease fence closed" },
  );
  return "stopped";
}
