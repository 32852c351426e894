/**
 * Names the attacher derives from the driver name: the finalizer it puts on VolumeAttachments and
 * PersistentVolumes, the node-ID annotation, and the Lease name.
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

/** The leader-election Lease name for `driver`. */
export function leaseName(driver: string): string {
  return sanitizeDriverName(`external-attacher-leader-${driver}`);
}
