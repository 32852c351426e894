/**
 * The one way the handlers write a VolumeAttachment's status, and the uid guard every VA patch
 * carries. The Go attacher's `markAsAttached`, `markAsDetached`, `saveAttachError` and
 * `saveDetachError` (external-attacher `pkg/controller/util.go`, `csi_handler.go`) each compute a
 * merge patch between the cached VA and its changed copy (`createMergePatch`) and send it to the
 * `status` subresource by name; here the four writes (attach, detach, the saved error, the
 * trivial handler) are one {@link writeStatus} with their {@link StatusChange}, and the patch also
 * carries the uid of the VA the sync started from ({@link withUid}).
 *
 * @module
 */

import { type KubeApi, VOLUME_ATTACHMENTS } from "../kube/api.ts";
import { createMergePatch } from "../kube/patches.ts";
import type { VolumeAttachment } from "../kube/types.ts";

/** The status of a VolumeAttachment. */
export type VolumeAttachmentStatus = NonNullable<VolumeAttachment["status"]>;

/** The status fields a write may clear. */
export type ClearableField = "attachmentMetadata" | "attachError" | "detachError";

/**
 * A change of a VA's status, as the Go attacher's edit of the cached copy before its merge patch:
 * - `set`: fields and their new values; `undefined` removes a field the cached status has (Go's
 *   `nil`: written as `null` only when the cache shows the field);
 * - `clear`: fields written as `null` whatever the cached status shows, for a value an earlier
 *   sync wrote that the cache may not show yet.
 */
export interface StatusChange {
  readonly set: { readonly [K in keyof VolumeAttachmentStatus]?: VolumeAttachmentStatus[K] };
  readonly clear?: readonly ClearableField[];
}

/**
 * `patch` with `metadata.uid` (of the VA the sync started from): the API server refuses it (the
 * uid is immutable) when the VA was deleted and created again under its name since, so a write it
 * handles late cannot land on the new VA. Nothing is added when `uid` is unknown. The Go attacher
 * patches by name only.
 */
export function withUid(
  patch: Record<string, unknown>,
  uid: string | undefined,
): Record<string, unknown> {
  if (!uid) return patch;
  const metadata = (patch.metadata ?? {}) as Record<string, unknown>;
  return { ...patch, metadata: { ...metadata, uid } };
}

/**
 * The merge patch that applies `change` to `status` (the cached one; `{}` when there is none),
 * guarded by `uid` (see {@link withUid}). Only changed fields appear, as in the Go attacher's
 * `createMergePatch`.
 */
export function statusPatch(
  status: VolumeAttachmentStatus | undefined,
  change: StatusChange,
  uid: string | undefined,
): Record<string, unknown> {
  const old = status ?? {};
  const body = createMergePatch({ status: old }, { status: { ...old, ...change.set } });
  if (change.clear !== undefined && change.clear.length > 0) {
    const cleared = Object.fromEntries(change.clear.map((field) => [field, null]));
    body.status = { ...(body.status as Record<string, unknown> | undefined), ...cleared };
  }
  return withUid(body, uid);
}

/**
 * Writes `change` to the status subresource of `va` (the newest VA the sync saw: its name, and
 * the status the patch is computed from), guarded by `uid`; the VA as the API server stored it.
 * Rejects as the API request does.
 */
export function writeStatus(
  kube: KubeApi,
  va: VolumeAttachment,
  change: StatusChange,
  uid: string | undefined,
): Promise<VolumeAttachment> {
  return kube.patch<VolumeAttachment>(
    VOLUME_ATTACHMENTS,
    va.metadata.name,
    { type: "merge", body: statusPatch(va.status, change, uid) },
    { subresource: "status" },
  );
}
