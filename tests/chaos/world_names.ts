/**
 * Names of the chaos world.
 *
 * @module
 */

/** Our driver's name (GetPluginInfo, VA `spec.attacher`, finalizer). */
export const DRIVER_NAME = "chaos.csi.k8s.io";
/** Another attacher whose VolumeAttachments we must never touch. */
export const OTHER_ATTACHER = "other.csi.k8s.io";
/** Namespace of the controller-publish secrets. */
export const SECRET_NAMESPACE = "chaos";
