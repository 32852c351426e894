/**
 * Test kit: objects in the JSON form kube-apiserver v1.37 sends them (`kubectl get -o json`
 * of the e2e cluster's objects, trimmed), one of each kind the Kubernetes protobuf decoder reads,
 * with the `managedFields` every object from the API server carries. For the decoder's tests,
 * the fuzz target's seeds and the microbenchmark.
 *
 * @module
 */

const MANAGED_FIELDS = [
  {
    manager: "csi-attacher",
    operation: "Update",
    apiVersion: "storage.k8s.io/v1",
    time: "2026-12-02T06:00:01Z",
    fieldsType: "FieldsV1",
    fieldsV1: {
      "f:metadata": {
        "f:finalizers": { ".": {}, 'v:"external-attacher/hostpath-csi-k8s-io"': {} },
      },
    },
  },
  {
    manager: "csi-attacher",
    operation: "Update",
    apiVersion: "storage.k8s.io/v1",
    time: "2026-12-02T06:00:02Z",
    fieldsType: "FieldsV1",
    fieldsV1: { "f:status": { "f:attached": {}, "f:attachmentMetadata": { ".": {}, "f:k": {} } } },
    subresource: "status",
  },
];

/** An attached VolumeAttachment with our finalizer and the node ID annotation. */
export function volumeAttachment(name = "csi-0123456789abcdef"): Record<string, unknown> {
  return {
    kind: "VolumeAttachment",
    apiVersion: "storage.k8s.io/v1",
    metadata: {
      name,
      uid: "6f1c6f0e-0b8e-4a4e-9b8c-2f3c1d0e9a71",
      resourceVersion: "123456",
      creationTimestamp: "2026-12-02T06:00:00Z",
      annotations: { "csi.alpha.kubernetes.io/node-id": "node-1" },
      finalizers: ["external-attacher/hostpath-csi-k8s-io"],
      managedFields: MANAGED_FIELDS,
    },
    spec: {
      attacher: "hostpath.csi.k8s.io",
      source: { persistentVolumeName: "pv-0001" },
      nodeName: "node-1",
    },
    status: { attached: true, attachmentMetadata: { k: "v" } },
  };
}

/** A VolumeAttachment being deleted, with an attach and a detach error and an inline spec. */
export function failingVolumeAttachment(): Record<string, unknown> {
  return {
    kind: "VolumeAttachment",
    apiVersion: "storage.k8s.io/v1",
    metadata: {
      name: "csi-inline",
      uid: "a1",
      resourceVersion: "7",
      generation: 2,
      creationTimestamp: "2026-12-02T06:00:00Z",
      deletionTimestamp: "2026-12-02T06:05:00Z",
      deletionGracePeriodSeconds: 0,
      labels: { app: "x", "": "empty key" },
      ownerReferences: [
        { apiVersion: "v1", kind: "Node", name: "node-1", uid: "n1", controller: false },
      ],
      finalizers: ["external-attacher/hostpath-csi-k8s-io", "other/finalizer"],
      managedFields: MANAGED_FIELDS,
    },
    spec: {
      attacher: "pd.csi.storage.gke.io",
      source: {
        inlineVolumeSpec: {
          accessModes: ["ReadWriteOnce"],
          gcePersistentDisk: { pdName: "disk-1", fsType: "ext4", partition: -1 },
          volumeMode: "",
        },
      },
      nodeName: "node-1",
    },
    status: {
      attached: false,
      attachError: { time: "2026-12-02T06:01:00Z", message: "rpc error: ünïcode ✓", errorCode: 5 },
      detachError: { time: null, errorCode: 0 },
    },
  };
}

/** A CSI PersistentVolume with secret references, bound and in use. */
export function persistentVolume(name = "pv-0001"): Record<string, unknown> {
  return {
    kind: "PersistentVolume",
    apiVersion: "v1",
    metadata: {
      name,
      uid: "2b7e",
      resourceVersion: "99",
      creationTimestamp: "2026-12-02T05:59:00Z",
      annotations: { "pv.kubernetes.io/provisioned-by": "hostpath.csi.k8s.io" },
      finalizers: ["kubernetes.io/pv-protection", "external-attacher/hostpath-csi-k8s-io"],
      managedFields: MANAGED_FIELDS,
    },
    spec: {
      capacity: { storage: "1Gi" },
      csi: {
        driver: "hostpath.csi.k8s.io",
        volumeHandle: "vol-0001",
        fsType: "ext4",
        volumeAttributes: { "storage.kubernetes.io/csiProvisionerIdentity": "1764-8081" },
        controllerPublishSecretRef: { name: "s", namespace: "default" },
        nodeStageSecretRef: { name: "s" },
      },
      accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
      claimRef: {
        kind: "PersistentVolumeClaim",
        namespace: "default",
        name: "claim-1",
        uid: "c1",
        apiVersion: "v1",
        resourceVersion: "50",
      },
      persistentVolumeReclaimPolicy: "Delete",
      storageClassName: "csi-hostpath-sc",
      mountOptions: ["ro"],
      volumeMode: "Filesystem",
    },
    status: { phase: "Bound", lastPhaseTransitionTime: "2026-12-02T05:59:01Z" },
  };
}

/** An in-tree Azure File PV (CSI migration reads its claim and annotations). */
export function azureFilePersistentVolume(): Record<string, unknown> {
  return {
    kind: "PersistentVolume",
    apiVersion: "v1",
    metadata: {
      name: "pv-azure",
      uid: "az",
      resourceVersion: "3",
      creationTimestamp: "2026-12-02T05:59:00Z",
      labels: { "topology.kubernetes.io/zone": "eu-1" },
    },
    spec: {
      azureFile: { secretName: "az", shareName: "share", readOnly: true, secretNamespace: null },
      accessModes: ["ReadWriteMany"],
      persistentVolumeReclaimPolicy: "Retain",
    },
    status: { phase: "Available" },
  };
}

/** A CSINode with two drivers. */
export function csiNode(name = "node-1"): Record<string, unknown> {
  return {
    kind: "CSINode",
    apiVersion: "storage.k8s.io/v1",
    metadata: {
      name,
      uid: "cn",
      resourceVersion: "11",
      creationTimestamp: "2026-12-02T05:58:00Z",
      ownerReferences: [{ apiVersion: "v1", kind: "Node", name, uid: "n1" }],
      managedFields: MANAGED_FIELDS,
    },
    spec: {
      drivers: [
        {
          name: "hostpath.csi.k8s.io",
          nodeID: name,
          topologyKeys: ["topology.hostpath.csi/node"],
          allocatable: { count: 100 },
        },
        { name: "other.csi", nodeID: "x", topologyKeys: null },
      ],
    },
    status: {},
  };
}

/** The attacher's leader election Lease. */
export function lease(): Record<string, unknown> {
  return {
    kind: "Lease",
    apiVersion: "coordination.k8s.io/v1",
    metadata: {
      name: "external-attacher-leader-hostpath-csi-k8s-io",
      namespace: "kube-system",
      uid: "l1",
      resourceVersion: "4242",
      creationTimestamp: "2026-12-02T05:00:00Z",
      labels: { "app.kubernetes.io/name": "csi-attacher" },
      managedFields: MANAGED_FIELDS,
    },
    spec: {
      holderIdentity: "node-1_5b3c",
      leaseDurationSeconds: 137,
      acquireTime: "2026-12-02T05:00:00.000000Z",
      renewTime: "2026-12-02T06:00:05.123456Z",
      leaseTransitions: 0,
    },
  };
}

/** A 404 Status. */
export function notFoundStatus(): Record<string, unknown> {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: 'volumeattachments.storage.k8s.io "csi-x" not found',
    reason: "NotFound",
    details: { name: "csi-x", group: "storage.k8s.io", kind: "volumeattachments" },
    code: 404,
  };
}

/** A 410 Status as a watch's ERROR event carries it. */
export function expiredStatus(): Record<string, unknown> {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: "too old resource version: 1 (4242)",
    reason: "Expired",
    code: 410,
  };
}

/** `obj` without `metadata.managedFields`, as the decoder gives it. */
export function withoutManagedFields(obj: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(obj);
  const meta = copy.metadata as Record<string, unknown> | undefined;
  if (meta !== undefined) delete meta.managedFields;
  return copy;
}
