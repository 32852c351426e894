/**
 * The CSI volume capability, access mode, handle and attributes derived from a PersistentVolume
 * spec, as the Go attacher derives them (external-attacher `pkg/controller/util.go`
 * `GetVolumeCapabilities`; csi-lib-utils `accessmodes`).
 *
 * @module
 */

import type { AccessModeName, VolumeCapability } from "../csi/api.ts";
import type { CsiPersistentVolumeSource, PersistentVolumeSpec } from "../kube/types.ts";

/**
 * Maps the PV's access modes to one CSI access mode.
 *
 * @throws {Error} for combinations CSI cannot express, with the Go attacher's texts.
 */
export function toCsiAccessMode(
  pvAccessModes: readonly string[] | null | undefined,
  supportsSingleNodeMultiWriter: boolean,
): AccessModeName {
  const modes = new Set(pvAccessModes ?? []);
  if (modes.has("ReadWriteOncePod")) {
    if (modes.size > 1) {
      throw new Error(
        "Kubernetes does not support use of ReadWriteOncePod with other access modes on the same PersistentVolume",
      );
    }
    return supportsSingleNodeMultiWriter ? "SINGLE_NODE_SINGLE_WRITER" : "SINGLE_NODE_WRITER";
  }
  if (modes.has("ReadWriteMany")) return "MULTI_NODE_MULTI_WRITER";
  if (modes.has("ReadOnlyMany") && modes.has("ReadWriteOnce")) {
    throw new Error(
      "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume",
    );
  }
  if (modes.has("ReadOnlyMany")) return "MULTI_NODE_READER_ONLY";
  if (modes.has("ReadWriteOnce")) {
    return supportsSingleNodeMultiWriter ? "SINGLE_NODE_MULTI_WRITER" : "SINGLE_NODE_WRITER";
  }
  throw new Error(`unsupported AccessMode combination: [${(pvAccessModes ?? []).join(" ")}]`);
}

/**
 * The capability to publish the volume with: `block` for `volumeMode: Block`, else `mount` with
 * the PV's fsType (or `defaultFsType`) and mount options.
 */
export function getVolumeCapability(
  spec: PersistentVolumeSpec,
  opts: { supportsSingleNodeMultiWriter: boolean; defaultFsType: string },
): VolumeCapability {
  if (!spec.csi) throw new Error("CSI volume source was nil");
  const mode = toCsiAccessMode(spec.accessModes, opts.supportsSingleNodeMultiWriter);
  if (spec.volumeMode === "Block") {
    return { block: {}, accessMode: { mode } };
  }
  return {
    mount: {
      fsType: spec.csi.fsType || opts.defaultFsType,
      mountFlags: [...(spec.mountOptions ?? [])],
    },
    accessMode: { mode },
  };
}

/** The volume handle and read-only flag of a CSI source. */
export function getVolumeHandle(
  csi: CsiPersistentVolumeSource | null | undefined,
): { volumeHandle: string; readOnly: boolean } {
  if (!csi) throw new Error("csi source was nil");
  return { volumeHandle: csi.volumeHandle, readOnly: csi.readOnly ?? false };
}
