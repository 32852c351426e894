/**
 * Names the attacher derives from the driver name: the finalizer it puts on VolumeAttachments and
 * PersistentVolumes and the node-ID annotation (the Lease name is the leader election's,
 * `lib/leaderelection/config.ts`).
 *
 * @module
 */

import { sanitizeDriverName } from "../driver_name.ts";

/** Annotation on a VolumeAttachment holding the node ID used at attach time (detach fallback). */
export const NODE_ID_ANNOTATION = "csi.alpha.kubernetes.io/node-id";

/** Annotation set by the PV controller on in-tree PVs migrated to a CSI driver. */
export const MIGRATED_TO_ANNOTATION = "pv.kubernetes.io/migrated-to";

/** Driver name used in dummy mode. */
export const DUMMY_DRIVER_NAME = "csi/dummy";

/** The finalizer this attacher puts on VolumeAttachments and PersistentVolumes. */
export function finalizerName(driver: string): string {
  return `external-attacher/${sanitizeDriverName(driver)}`;
}
