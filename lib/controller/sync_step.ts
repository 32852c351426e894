/**
 * What the attach (`attach.ts`) and the detach (`detach.ts`) of the CSI handler share: the
 * context they run in, the values their steps return, and the lookups and guards both make
 * (external-attacher `pkg/controller/csi_handler.go`: `getCredentials`, `getNodeID`, the source
 * checks of `csiAttach`/`csiDetach`); the ListVolumes reconciler (`reconciler.ts`) makes the
 * same source lookups.
 *
 * Every step returns what happened as a value ({@link Step}); nothing is thrown to jump out of
 * a sync. Attach and detach end in a {@link SyncResult}, which the handler
 * (`csi_handler.ts`) alone turns into what happens to the key: done, retry or stopped.
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

/** A step failed with `error` (the text the Go attacher gives, with its cause). */
export interface Failed {
  readonly kind: "failed";
  readonly error: unknown;
}

/** A step ended with `value`. */
export interface Ok<T> {
  readonly kind: "ok";
  readonly value: T;
}

/** How a lookup ended, a step that cannot stop: with its value, or failed. */
export type Lookup<T> = Ok<T> | Failed;

/** How one step of a sync ended: with its value, failed, or stopped. */
export type Step<T> = Lookup<T> | Stopped;

/** A step's value. */
export function ok<T>(value: T): Ok<T> {
  return { kind: "ok", value };
}

/** A step's failure. */
export function failed(error: unknown): Failed {
  return { kind: "failed", error };
}

/**
 * The attach or detach failed: `error` is written to `va`'s status (`attachError` or
 * `detachError`: `va` is the newest VolumeAttachment the sync saw, after its own metadata patch
 * if any) and told in a Warning Event, and the key is retried.
 */
export interface Failure {
  readonly kind: "failed";
  readonly op: Operation;
  readonly va: VolumeAttachment;
  readonly error: unknown;
}

/**
 * How an attach or detach ended, for the handler to decide what happens to the key:
 * - `done`: finished, or nothing to do;
 * - `stopped`: see {@link Stopped}; nothing more was written;
 * - `failed`: see {@link Failure};
 * - `unrecorded`: the driver call succeeded but writing its result failed (`error`): retried,
 *   nothing is written to the status (the retry records the driver's answer).
 */
export type SyncResult =
  | { readonly kind: "done" }
  | Stopped
  | Failure
  | { readonly kind: "unrecorded"; readonly error: Error };

/** The one `done` {@link SyncResult}. */
export const DONE: SyncResult = Object.freeze({ kind: "done" });

/** `step`'s failure as the {@link Failure} of `op` on `va`; a stop stays a stop. */
export function failure(
  op: Operation,
  va: VolumeAttachment,
  step: Failed | Stopped,
): Failure | Stopped {
  return step.kind === "stopped" ? step : { kind: "failed", op, va, error: step.error };
}

/**
 * A failure of a step before the driver call: a stop when the stop signal has aborted (the API
 * request or rate-limiter wait ended with it: nothing is recorded), else the {@link Failure}.
 */
export function failedBeforeDriver(
  op: Operation,
  va: VolumeAttachment,
  step: Failed | Stopped,
  signal: AbortSignal,
): Failure | Stopped {
  return signal.aborted ? STOPPED : failure(op, va, step);
}

/**
 * A rejected ControllerPublishVolume or ControllerUnpublishVolume: a stop when the CSI client
 * refused to send it because the fence closed (logged), else the {@link Failure}. The stop
 * signal does not matter once the driver was called.
 */
export function failedDriverCall(
  op: Operation,
  va: VolumeAttachment,
  error: unknown,
  log: Logger,
): Failure | Stopped {
  if (error instanceof FencedError) {
    const call = op === "attach" ? "ControllerPublishVolume" : "ControllerUnpublishVolume";
    log.info(FENCE_REFUSED_MESSAGE, { call });
    return STOPPED;
  }
  return { kind: "failed", op, va, error };
}

/** What `fn` returns, or what it throws as a failed step (the lookups that throw on bad input). */
export function attempt<T>(fn: () => T): Lookup<T> {
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
): Lookup<PersistentVolume | undefined> {
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
export function volumeOf(va: VolumeAttachment, pv: PersistentVolume | undefined): Lookup<Volume> {
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

/**
 * `patch` of a status with `metadata.uid` (of the VA the sync started from, as the metadata
 * patches carry it): the API server refuses it (the uid is immutable) when the VA was deleted
 * and created again under its name since, so a status write it handles late cannot land on the
 * new VA. The Go attacher patches by name only.
 */
export function withUid(
  patch: Record<string, unknown>,
  uid: string | undefined,
): Record<string, unknown> {
  if (!uid) return patch;
  const metadata = (patch.metadata ?? {}) as Record<string, unknown>;
  return { ...patch, metadata: { ...metadata, uid } };
}
