/**
 * RFC 6902 patches that add or remove exactly one finalizer.
 *
 * A merge patch carries the whole finalizer list, built from a possibly stale cached object, and
 * can silently re-add or drop another controller's finalizer. These patches touch one entry and
 * guard it with `test` operations, so the API server rejects them when the cache was stale
 * (https://github.com/kubernetes-csi/external-provisioner/issues/1217,
 * https://github.com/kubernetes-csi/external-attacher/pull/707).
 *
 * @module
 */

import type { JsonPatchOp } from "./api.ts";

/**
 * The patch that appends `finalizer` to `current` (the object's finalizers as last seen).
 * With no list it tests for `null` and adds one; with an empty list it tests for `[]` and
 * replaces it; otherwise it appends.
 */
export function addFinalizerPatch(
  current: readonly string[] | null | undefined,
  finalizer: string,
): JsonPatchOp[] {
  if (current === null || current === undefined) {
    return [
      { op: "test", path: "/metadata/finalizers", value: null },
      { op: "add", path: "/metadata/finalizers", value: [finalizer] },
    ];
  }
  if (current.length === 0) {
    return [
      { op: "test", path: "/metadata/finalizers", value: [] },
      { op: "replace", path: "/metadata/finalizers", value: [finalizer] },
    ];
  }
  return [{ op: "add", path: "/metadata/finalizers/-", value: finalizer }];
}

/**
 * The patch that removes the first `finalizer` of `current`, guarded by a `test` of that index.
 *
 * @throws {RangeError} when `current` does not contain `finalizer`.
 */
export function removeFinalizerPatch(
  current: readonly string[] | null | undefined,
  finalizer: string,
): JsonPatchOp[] {
  const index = current?.indexOf(finalizer) ?? -1;
  if (index < 0) {
    throw new RangeError(`Cannot remove finalizer "${finalizer}": not present`);
  }
  const path = `/metadata/finalizers/${index}`;
  return [{ op: "test", path, value: finalizer }, { op: "remove", path }];
}
