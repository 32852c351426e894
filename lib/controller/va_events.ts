/**
 * The Events of the CSI handler on VolumeAttachments, beyond the Go attacher, which records
 * none: a Warning when an attach or detach fails (with the text saved as `attachError` or
 * `detachError`), a Normal one when an attach or detach succeeds after it had failed.
 *
 * @module
 */

import { errorText } from "../errors.ts";
import type { Operation } from "./attachment_memory.ts";
import type { ObjectReference, VolumeAttachment } from "../kube/types.ts";
import type { SyncContext } from "./sync_step.ts";

/** What the Events of a sync are recorded with: the per-VA memory and the Event sink. */
export type EventContext = Pick<SyncContext, "memory" | "events">;

/** Reasons of the Events on VolumeAttachments. */
export const EVENT_REASONS = {
  attachFailed: "AttachFailed",
  detachFailed: "DetachFailed",
  attached: "Attached",
  detached: "Detached",
} as const;

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
 * Remembers the failure of `op` and records a Warning Event with the text just saved as
 * `attachError`/`detachError` (errors never carry secret values: secrets are only read into the
 * CSI request).
 */
export function recordFailure(
  ctx: EventContext,
  va: VolumeAttachment,
  op: Operation,
  err: unknown,
): void {
  ctx.memory.recordFailure(va.metadata.name, op);
  const reason = op === "attach" ? EVENT_REASONS.attachFailed : EVENT_REASONS.detachFailed;
  ctx.events?.record(involvedObject(va), "Warning", reason, errorText(err));
}

/** A Normal Event when the attach or detach that just succeeded had failed before. */
export function recordRecovery(ctx: EventContext, va: VolumeAttachment, op: Operation): void {
  const failedHere = ctx.memory.takeFailure(va.metadata.name) === op;
  const hadError = op === "attach"
    ? va.status?.attachError != null
    : va.status?.detachError != null;
  if (!hadError && !failedHere) return;
  const message = op === "attach"
    ? `Volume attached to node ${va.spec.nodeName}`
    : `Volume detached from node ${va.spec.nodeName}`;
  const reason = op === "attach" ? EVENT_REASONS.attached : EVENT_REASONS.detached;
  ctx.events?.record(involvedObject(va), "Normal", reason, message);
}
