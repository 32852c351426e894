/**
 * What the attach (`attach.ts`) and the detach (`detach.ts`) of the CSI handler share: the
 * context they run in, the values their steps return, and the lookups and guards both make
 * (external-attacher `pkg/controller/csi_handler.go`: `getCredentials`, `getNodeID`, the source
 * checks of `csiAttach`/`csiDetach`); the ListVolumes reconciler (`reconciler.ts`) makes the
 * same source lookups.
 *
 * Every step returns what happened as a value ({@link Step}); nothing is thrown to jump out of
 * a sync. Attach and detach end in a `Step<void>` too, which the handler (`csi_handler.ts`)
 * alone turns into what happens to the key: done, retry or stopped.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { errorText } from "../errors.ts";
import type { CallOptions, CsiClient } from "../csi/api.ts";
import { FENCE_REFUSED_MESSAGE, FencedError, type LeaseFence } from "../lease_fence.ts";
import type { EventSink } from "../events/recorder.ts";
import type { HandlerStores } from "./handler.ts";
import type { AttachmentMemory, Operation } from "./attachment_memory.ts";
import type { KubeApi } from "../kube/api.ts";
import { notFoundError, PERSISTENT_VOLUMES, SECRETS } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { MIGRATION_DRIVER_NAMES } from "./migration.ts";
import type {
  CsiPersistentVolumeSource,
  PersistentVolume,
  Secret,
  VolumeAttachment,
} from "../kube/types.ts";
import { getVolumeHandle } from "./volume_capability.ts";
import {
  nodeIdOf,
  persistentVolumeNameOf,
  type VolumeSource,
  volumeSourceOf,
} from "./volume_source.ts";

/** Options of the CSI handler; the capabilities come from ControllerGetCapabilities. */
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

/** What an attach or detach runs with: the handler's collaborators and options. */
export interface SyncContext {
  readonly kube: KubeApi;
  readonly csi: CsiClient;
  readonly clock: Clock;
  readonly stores: HandlerStores;
  readonly memory: AttachmentMemory;
  readonly events: EventSink | undefined;
  /**
   * The lease fence of the term this handler works in, asked before every write and driver call,
   * and handed down with each of them to be asked again right before its bytes are written.
   */
  readonly fence: LeaseFence;
  readonly opts: CsiHandlerOptions;
  /** This driver's finalizer, on VolumeAttachments and PersistentVolumes alike. */
  readonly finalizer: string;
}

/** The sync stopped before its next write or driver call: the stop signal, or the fence. */
export interface Stopped {
  readonly kind: "stopped";
}

/** The one {@link Stopped} value. */
export const STOPPED: Stopped = Object.freeze({ kind: "stopped" });

/** A step ended with `value`. */
export interface Ok<T> {
  readonly kind: "ok";
  readonly value: T;
}

/**
 * What a failed attach or detach writes: `error`'s text goes to the `attachError` (`op`
 * "attach") or `detachError` status of `va`, the newest VolumeAttachment the sync saw (after its
 * own metadata patch, if any), and into a Warning Event.
 */
export interface FailureRecord {
  readonly op: Operation;
  readonly va: VolumeAttachment;
}

/**
 * A step failed with `error` (the text the Go attacher gives, with its cause). With `record`, the
 * sync failed on a VolumeAttachment and the handler writes the error to it (see
 * {@link FailureRecord}); without, the error is only logged: a lookup inside a step not yet
 * placed in its sync, or a write that failed after the driver acted (the retry records the
 * driver's answer), or a PersistentVolume's sync.
 */
export interface Failed {
  readonly kind: "failed";
  readonly error: unknown;
  readonly record?: FailureRecord;
}

/**
 * How one step of a sync ended: with its value, failed, or stopped. A whole attach, detach or
 * PV sync is a `Step<void>` too, which the handler (`csi_handler.ts`) alone turns into the
 * sync's outcome for the key (`SyncOutcome` of `handler.ts`): `ok` is done, `failed` a retry
 * (after recording it), `stopped` leaves the key as it is.
 */
export type Step<T> = Ok<T> | Failed | Stopped;

/** A step's value. */
export function ok<T>(value: T): Ok<T> {
  return { kind: "ok", value };
}

/** The value of a step, or a whole sync, that has nothing to give but its success. */
export const DONE: Ok<void> = Object.freeze({ kind: "ok", value: undefined });

/** A step's failure; with `record`, the one written to a VolumeAttachment. */
export function failed(error: unknown, record?: FailureRecord): Failed {
  return record === undefined ? { kind: "failed", error } : { kind: "failed", error, record };
}

/** `step`'s failure as the failure of `op` recorded on `va`; a stop stays a stop. */
export function failure(
  op: Operation,
  va: VolumeAttachment,
  step: Failed | Stopped,
): Failed | Stopped {
  return step.kind === "stopped" ? step : failed(step.error, { op, va });
}

/**
 * A failure of a step before the driver call: a stop when the stop signal has aborted (the API
 * request or rate-limiter wait ended with it: nothing is recorded), else recorded as
 * {@link failure}.
 */
export function failedBeforeDriver(
  op: Operation,
  va: VolumeAttachment,
  step: Failed | Stopped,
  signal: AbortSignal,
): Failed | Stopped {
  return signal.aborted ? STOPPED : failure(op, va, step);
}

/**
 * A rejected ControllerPublishVolume or ControllerUnpublishVolume: a stop when the CSI client
 * refused to send it because the fence closed (logged), else recorded on `va`. The stop signal
 * does not matter once the driver was called.
 */
export function failedDriverCall(
  op: Operation,
  va: VolumeAttachment,
  error: unknown,
  log: Logger,
): Failed | Stopped {
  if (error instanceof FencedError) {
    const call = op === "attach" ? "ControllerPublishVolume" : "ControllerUnpublishVolume";
    log.info(FENCE_REFUSED_MESSAGE, { call });
    return STOPPED;
  }
  return failed(error, { op, va });
}

/** What `fn` returns, or what it throws as a failed step (the lookups that throw on bad input). */
export function attempt<T>(fn: () => T): Ok<T> | Failed {
  try {
    return ok(fn());
  } catch (error) {
    return failed(error);
  }
}

/** True (and logged) when the lease fence is closed. */
export function fenceClosed(ctx: SyncContext, log: Logger): boolean {
  if (ctx.fence.valid()) return false;
  log.info(FENCE_REFUSED_MESSAGE);
  return true;
}

/**
 * True when the sync must stop before its next write or driver call: the attacher stops
 * (`signal`), or the lease fence is closed (logged).
 */
export function mustStop(ctx: SyncContext, signal: AbortSignal, log: Logger): boolean {
  if (signal.aborted) return true;
  return fenceClosed(ctx, log);
}

/**
 * The PersistentVolume the VA names, from the cache; undefined for an inline volume. Fails with
 * the Go attacher's texts when the VA names both sources or neither, or the PV is not cached.
 */
export function sourcePersistentVolume(
  stores: Pick<HandlerStores, "persistentVolumes">,
  va: VolumeAttachment,
): Ok<PersistentVolume | undefined> | Failed {
  const name = attempt(() => persistentVolumeNameOf(va));
  if (name.kind !== "ok") return name;
  if (name.value === undefined) return ok(undefined);
  const pv = stores.persistentVolumes.get(name.value);
  return pv ? ok(pv) : failed(notFoundError(PERSISTENT_VOLUMES, name.value));
}

/** The CSI source of the VA (see {@link volumeSourceOf}) and its volume handle. */
export interface Volume {
  source: VolumeSource;
  volumeHandle: string;
  readOnly: boolean;
}

/** The VA's {@link Volume}, from `pv` or its inline spec. */
export function volumeOf(
  va: VolumeAttachment,
  pv: PersistentVolume | undefined,
): Ok<Volume> | Failed {
  return attempt(() => {
    const source = volumeSourceOf(va, pv);
    return { source, ...getVolumeHandle(source.csi) };
  });
}

/** What a driver call carries beside the volume: the secrets and the driver's node ID. */
export interface Access {
  /** The controller-publish secrets; undefined when the volume names none. */
  secrets: Record<string, string> | undefined;
  nodeId: string;
}

/**
 * Reads the volume's controller-publish secret (an API GET that ends when `signal` aborts), then
 * the driver's node ID for the VA's node (see {@link nodeIdOf}): on detach, the VA's node-ID
 * annotation stands in for a missing CSINode or driver entry; on attach, nothing does.
 */
export async function accessOf(
  ctx: SyncContext,
  op: Operation,
  csi: CsiPersistentVolumeSource,
  va: VolumeAttachment,
  signal: AbortSignal,
): Promise<Step<Access>> {
  const secrets = await credentials(ctx, csi, signal);
  if (secrets.kind !== "ok") return secrets;
  const fallback = op === "detach" ? va : undefined;
  const nodeId = attempt(() =>
    nodeIdOf(ctx.stores.csiNodes, ctx.opts.driverName, va.spec.nodeName, fallback)
  );
  if (nodeId.kind !== "ok") return nodeId;
  return ok({ secrets: secrets.value, nodeId: nodeId.value });
}

/** The controller-publish secrets of the volume, or undefined when it names none. */
async function credentials(
  ctx: SyncContext,
  csi: CsiPersistentVolumeSource,
  signal: AbortSignal,
): Promise<Step<Record<string, string> | undefined>> {
  const ref = csi.controllerPublishSecretRef;
  if (!ref) return ok(undefined);
  const namespace = ref.namespace ?? "";
  const name = ref.name ?? "";
  let secret: Secret;
  try {
    secret = await ctx.kube.get<Secret>(SECRETS, name, { namespace, signal });
  } catch (err) {
    return failed(
      new Error(`failed to load secret "${namespace}/${name}": ${errorText(err)}`, { cause: err }),
    );
  }
  return attempt(() => secretValues(secret));
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

/** The options of a ControllerPublish/Unpublish call: timeout, fence, `migrated` label. */
export function callOptions(ctx: SyncContext, migrated: boolean): CallOptions {
  const fence = ctx.fence;
  return MIGRATION_DRIVER_NAMES.has(ctx.opts.driverName)
    ? { timeoutMs: ctx.opts.timeoutMs, migrated, fence }
    : { timeoutMs: ctx.opts.timeoutMs, fence };
}
