/**
 * Objects and a connection for the tests of the API client itself (retries, liveness): a plain
 * VolumeAttachment and PersistentVolume by name, and a connection to a plain-HTTP server.
 *
 * @module
 */

import { type ClusterConnection, connectionFromKubeconfigs } from "../../lib/kube/config.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";

/** A connection to `url` without credentials or TLS checks (the test servers speak plain HTTP). */
export function plainConnection(url: string): ClusterConnection {
  return { server: url, tls: { insecureSkipTlsVerify: true }, headers: () => Promise.resolve({}) };
}

/**
 * The connection of a kubeconfig with one cluster (`cluster`, its fields as in the file) and a
 * user with bearer token `token`, loaded by the kubeconfig loader.
 */
export function kubeconfigConnection(
  cluster: Record<string, unknown>,
  token = "t",
): Promise<ClusterConnection> {
  return connectionFromKubeconfigs([{
    file: "/test/kubeconfig",
    text: JSON.stringify({
      clusters: [{ name: "c", cluster }],
      users: [{ name: "u", user: { token } }],
      contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
      "current-context": "ctx",
    }),
  }]);
}

/** A VolumeAttachment of driver `csi.example.com` for PV `pv1` on `node1`. */
export function plainVolumeAttachment(name: string): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: {
      attacher: "csi.example.com",
      nodeName: "node1",
      source: { persistentVolumeName: "pv1" },
    },
  };
}

/** A CSI PersistentVolume with handle `h`. */
export function plainPersistentVolume(name: string): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: { csi: { driver: "csi/test", volumeHandle: "h" }, accessModes: ["ReadWriteMany"] },
  };
}

/** A 1Gi ReadWriteOnce CSI PersistentVolume of `driver` with volume handle `handle`. */
export function driverPersistentVolume(
  name: string,
  driver: string,
  handle: string,
): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver, volumeHandle: handle },
    },
  };
}

/** A VolumeAttachment of `driver` for PV `pvName` on `node`. */
export function driverVolumeAttachment(
  name: string,
  pvName: string,
  driver: string,
  node: string,
): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher: driver, nodeName: node, source: { persistentVolumeName: pvName } },
  };
}
