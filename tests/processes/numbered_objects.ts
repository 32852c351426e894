/**
 * What the SIGTERM process tests share: numbered PersistentVolumes and VolumeAttachments of the
 * example driver on `node1`, and a poll for a condition the test reads from its own state.
 *
 * @module
 */

import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";

/** The example driver's name. */
export const DRIVER = "example.csi.k8s.io";
/** The Lease the attacher takes for {@link DRIVER}. */
export const LEASE = "external-attacher-leader-example-csi-k8s-io";

/** PersistentVolume `pv-<i>` of volume `vol-<i>`. */
export function numberedPv(i: number): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: `pv-${i}` },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver: DRIVER, volumeHandle: `vol-${i}` },
    },
  };
}

/** VolumeAttachment `va-<i>` of `pv-<i>` on `node1`. */
export function numberedVa(i: number): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: `va-${i}` },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: `pv-${i}` } },
  };
}

/** Resolves when `pred()` holds, checked every 20 ms; rejects after `ms`. */
export async function until(what: string, pred: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
