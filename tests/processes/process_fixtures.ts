/**
 * What the process tests of `main.ts` against the in-memory API server and the example driver
 * share: a working directory with the kubeconfig and the driver socket's path, `node1`'s
 * CSINode, numbered PersistentVolumes and VolumeAttachments, and a poll for a condition the test
 * reads from its own state.
 *
 * @module
 */

import { CSI_NODES } from "../../lib/kube/api.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import type { MemoryApiServer } from "../../testkit/apiserver/server.ts";

/** The example driver's name. */
export const DRIVER = "example.csi.k8s.io";
/** The Lease the attacher takes for {@link DRIVER}. */
export const LEASE = "external-attacher-leader-example-csi-k8s-io";

/** Where one test's attacher and driver meet; the test removes `dir` when it ends. */
export interface Workspace {
  dir: string;
  /** The driver's unix socket path (`--csi-address`). */
  socket: string;
  /** A kubeconfig for `server` (`--kubeconfig`). */
  kubeconfig: string;
}

/**
 * A new temp dir (named after `prefix`) with a kubeconfig for `server`, and `node1`'s CSINode
 * naming the example driver (node ID `node-1`) created in `server`.
 */
export async function prepareWorkspace(
  server: MemoryApiServer,
  prefix: string,
): Promise<Workspace> {
  const dir = await Deno.makeTempDir({ prefix });
  const kubeconfig = `${dir}/kubeconfig`;
  await Deno.writeTextFile(kubeconfig, server.kubeconfig());
  server.create(CSI_NODES, {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: "node1" },
    spec: { drivers: [{ name: DRIVER, nodeID: "node-1" }] },
  });
  return { dir, socket: `${dir}/csi.sock`, kubeconfig };
}

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
