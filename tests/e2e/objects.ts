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
} from "../../lib/kube/types.ts";

/** Collection paths. */
export const PATHS = {
  volumeAttachments: "/apis/storage.k8s.io/v1/volumeattachments",
  persistentVolumes: "/api/v1/persistentvolumes",
  csiNodes: "/apis/storage.k8s.io/v1/csinodes",
  nodes: "/api/v1/nodes",
  pods: (namespace: string) => `/api/v1/namespaces/${namespace}/pods`,
  persistentVolumeClaims: (namespace: string) =>
    `/api/v1/namespaces/${namespace}/persistentvolumeclaims`,
  events: (namespace: string) => `/api/v1/namespaces/${namespace}/events`,
  secrets: (namespace: string) => `/api/v1/namespaces/${namespace}/secrets`,
  leases: (namespace: string) => `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
} as const;

/**
 * A CSINode listing `driver` with `nodeID`; with `ownerUid`, owned by the Node of the same name
 * (as the kubelet creates it), so the garbage collector deletes it with its Node.
 */
export function csiNode(name: string, driver: string, nodeID: string, ownerUid?: string): CsiNode {
  const metadata: CsiNode["metadata"] = { name };
  if (ownerUid !== undefined) {
    metadata.ownerReferences = [{ apiVersion: "v1", kind: "Node", name, uid: ownerUid }];
  }
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata,
    spec: { drivers: [{ name: driver, nodeID }] },
  };
}

/**
 * The annotation with which the kubelet leaves attaching and detaching to kube-controller-manager's
 * attach/detach controller (kubernetes pkg/volume/util/util.go, ControllerManagedAttachAnnotation);
 * the controller ignores Nodes without it.
 */
export const CONTROLLER_MANAGED_ATTACH = "volumes.kubernetes.io/controller-managed-attach-detach";

/** A Node object as a kubelet would register it for controller-managed attach/detach. */
export function node(name: string) {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, annotations: { [CONTROLLER_MANAGED_ATTACH]: "true" } },
  };
}

/**
 * A PVC without storage class asking for the PV `volumeName`, or, without it, for any PV of
 * `storage` or more: the binder binds them.
 */
export function persistentVolumeClaim(
  name: string,
  namespace: string,
  volumeName: string | undefined,
  storage = "1Gi",
) {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage } },
      storageClassName: "",
      ...(volumeName === undefined ? {} : { volumeName }),
    },
  };
}

/**
 * A Pod bound to `nodeName` (no scheduler runs) that mounts the PVCs `claims`. No kubelet runs
 * either, so it stays Pending; the attach/detach controller acts on scheduled Pods all the same.
 */
export function pod(name: string, namespace: string, nodeName: string, claims: string[]) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace },
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      containers: [{
        name: "app",
        image: "registry.k8s.io/pause:3.10",
        volumeMounts: claims.map((c, i) => ({ name: `v${i}`, mountPath: `/data/${c}` })),
      }],
      volumes: claims.map((c, i) => ({ name: `v${i}`, persistentVolumeClaim: { claimName: c } })),
    },
  };
}

/** Options of {@link persistentVolume}. */
export interface PvOptions {
  /** `controllerPublishSecretRef`. */
  secretRef?: { name: string; namespace: string };
  readOnly?: boolean;
  accessModes?: string[];
  /** Another driver's name (a PV the attacher must leave alone). */
  driver?: string;
}

/** A CSI PersistentVolume for `volumeHandle` of `driver`. */
export function persistentVolume(
  name: string,
  driver: string,
  volumeHandle: string,
  opts: PvOptions = {},
): PersistentVolume {
  const csi: CsiPersistentVolumeSource = {
    driver: opts.driver ?? driver,
    volumeHandle,
    fsType: "ext4",
  };
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
      storageClassName: "",
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
