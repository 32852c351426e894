/**
 * What a VolumeAttachment attaches, and to which node ID: the checks and lookups that the attach,
 * the detach and the ListVolumes reconciler share (external-attacher
 * `pkg/controller/csi_handler.go`: the source checks of `syncAttach`/`syncDetach`, `getNodeID`,
 * and the in-tree translation of `csiAttach`).
 *
 * @module
 */

import { errorText } from "../errors.ts";
import { CSI_NODES, notFoundError } from "../kube/api.ts";
import type { ObjectStore } from "../kube/store.ts";
import type {
  CsiNode,
  CsiPersistentVolumeSource,
  PersistentVolume,
  PersistentVolumeSpec,
  VolumeAttachment,
} from "../kube/types.ts";
import { isMigratablePersistentVolume, translateInTreePersistentVolume } from "./migration.ts";
import { NODE_ID_ANNOTATION } from "./names.ts";

/** What attach and detach need from the VA's source. */
export interface VolumeSource {
  /** The CSI source (`spec.csi` of the PV, translated, or of the inline spec). */
  csi: CsiPersistentVolumeSource;
  /** The spec it belongs to, for the access modes and the volume mode. */
  spec: PersistentVolumeSpec;
  /** True when the source is an in-tree PV translated to CSI (CSI migration). */
  migrated: boolean;
}

/**
 * Checks that the VA names exactly one source and returns the PV name, or undefined for an inline
 * volume.
 *
 * @throws {Error} with the Go attacher's text when the VA names both sources or neither
 */
export function persistentVolumeNameOf(va: VolumeAttachment): string | undefined {
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

/**
 * The CSI source of the VA: the PV's (translated from in-tree when it is a migratable PV), or
 * the VA's inline spec when `pv` is undefined.
 *
 * @throws {Error} with the Go attacher's text when the translation fails or no CSI source remains
 */
export function volumeSourceOf(
  va: VolumeAttachment,
  pv: PersistentVolume | undefined,
): VolumeSource {
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
  const inline = va.spec.source?.inlineVolumeSpec;
  if (!inline?.csi) throw new Error("inline volume spec contains nil CSI source");
  return { csi: inline.csi, spec: inline, migrated: false };
}

/**
 * The driver's node ID for `nodeName`, from its CSINode in `csiNodes`. For a detach (`va` given)
 * the VA's node-ID annotation is the fallback when the CSINode or its driver entry is gone.
 *
 * @throws {Error} NotFound for a missing CSINode, or the Go attacher's text for a CSINode
 *   without the driver, when there is no fallback
 */
export function nodeIdOf(
  csiNodes: ObjectStore<CsiNode>,
  driverName: string,
  nodeName: string,
  va: VolumeAttachment | undefined,
): string {
  const csiNode = csiNodes.get(nodeName);
  let err: Error;
  if (csiNode) {
    const entry = (csiNode.spec?.drivers ?? []).find((d) => d.name === driverName);
    if (entry) return entry.nodeID;
    err = new Error(`CSINode ${nodeName} does not contain driver ${driverName}`);
  } else {
    err = notFoundError(CSI_NODES, nodeName);
  }
  const annotated = va?.metadata.annotations?.[NODE_ID_ANNOTATION];
  if (annotated !== undefined) return annotated;
  throw err;
}
