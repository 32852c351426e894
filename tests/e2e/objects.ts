/**
 * The Kubernetes objects the scenarios create, and their API paths.
 *
 * @module
 */

import type {
  CsiNode,
  CsiPersistentVolumeSource,
  PersistentVolume,
  VolumeAttachment,
} from "../../attacher/kube/types.ts";

/** Collection paths. */
export const PATHS = {
  volumeAttachments: "/apis/storage.k8s.io/v1/volumeattachments",
  persistentVolumes: "/api/v1/persistentvolumes",
  csiNodes: "/apis/storage.k8s.io/v1/csinodes",
  nodes: "/api/v1/nodes",
  secrets: (namespace: string) => `/api/v1/namespaces/${namespace}/secrets`,
  leases: (namespace: string) => `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
} as const;

/** A CSINode listing `driver` with `nodeID`. */
export function csiNode(name: string, driver: string, nodeID: string): CsiNode {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name },
    spec: { drivers: [{ name: driver, nodeID }] },
  };
}

/** A Node object (no kubelet runs; it only has to exist). */
export function node(
  name: string,
): { apiVersion: string; kind: string; metadata: { name: string } } {
  return { apiVersion: "v1", kind: "Node", metadata: { name } };
}

/** Options of {@link persistentVolume}. */
export interface PvOptions {
  /** `controllerPublishSecretRef`. */
  secretRef?: { name: string; namespace: string };
  readOnly?: boolean;
  accessModes?: string[];
}

/** A CSI PersistentVolume for `volumeHandle` of `driver`. */
export function persistentVolume(
  name: string,
  driver: string,
  volumeHandle: string,
  opts: PvOptions = {},
): PersistentVolume {
  const csi: CsiPersistentVolumeSource = { driver, volumeHandle, fsType: "ext4" };
  if (opts.readOnly) csi.readOnly = true;
  if (opts.secretRef) csi.controllerPublishSecretRef = opts.secretRef;
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: opts.accessModes ?? ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      csi,
    },
  };
}

/** A VolumeAttachment of `pvName` to `nodeName` for `attacher`. */
export function volumeAttachment(
  name: string,
  attacher: string,
  nodeName: string,
  pvName: string,
): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher, nodeName, source: { persistentVolumeName: pvName } },
  };
}

/** An Opaque secret. */
export function secret(name: string, namespace: string, data: Record<string, string>) {
  const encoded: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) encoded[k] = btoa(v);
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace },
    type: "Opaque",
    data: encoded,
  };
}
