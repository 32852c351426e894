/**
 * The Kubernetes objects the attacher reads and writes, as the raw JSON the API server sends.
 *
 * Objects are never passed through a generated serializer: a read-modify-write through one drops
 * fields it does not know (client-node 1.4.0 `ObjectSerializer.deserialize` copies only the
 * attributes of its generated type maps), and list and watch would give different types for
 * the same field. Timestamps stay RFC 3339 strings.
 *
 * @module
 */

/** `metadata` of any object; only the fields the attacher uses are named. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  finalizers?: string[] | null;
  annotations?: Record<string, string> | null;
  labels?: Record<string, string> | null;
  managedFields?: unknown[];
  [key: string]: unknown;
}

/** Any Kubernetes object. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

/**
 * `v1.ObjectReference`: the object an Event is about (`involvedObject`), with the fields
 * client-go's `tools/reference.GetReference` fills in.
 */
export interface ObjectReference {
  kind: string;
  apiVersion: string;
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

/** `storage.k8s.io/v1` VolumeError. */
export interface VolumeError {
  time?: string | null;
  message?: string;
  errorCode?: number;
}

/** A reference to a Secret. */
export interface SecretReference {
  name?: string;
  namespace?: string;
}

/** `spec.csi` of a PersistentVolume. */
export interface CsiPersistentVolumeSource {
  driver: string;
  volumeHandle: string;
  readOnly?: boolean;
  fsType?: string;
  volumeAttributes?: Record<string, string> | null;
  controllerPublishSecretRef?: SecretReference | null;
  nodeStageSecretRef?: SecretReference | null;
  nodePublishSecretRef?: SecretReference | null;
  controllerExpandSecretRef?: SecretReference | null;
  nodeExpandSecretRef?: SecretReference | null;
}

/** `spec.gcePersistentDisk` of an in-tree PersistentVolume (CSI migration). */
export interface GcePersistentDiskVolumeSource {
  pdName: string;
  fsType?: string;
  partition?: number;
  readOnly?: boolean;
}

/** `spec.azureDisk` of an in-tree PersistentVolume (CSI migration). */
export interface AzureDiskVolumeSource {
  diskName: string;
  diskURI: string;
  cachingMode?: string | null;
  fsType?: string | null;
  readOnly?: boolean | null;
  /** `Shared`, `Dedicated` or `Managed`; only `Managed` disks can be migrated. */
  kind?: string | null;
}

/** `spec.azureFile` of an in-tree PersistentVolume (CSI migration). */
export interface AzureFilePersistentVolumeSource {
  secretName: string;
  shareName: string;
  readOnly?: boolean;
  secretNamespace?: string | null;
}

/** `spec.vsphereVolume` of an in-tree PersistentVolume (CSI migration). */
export interface VsphereVirtualDiskVolumeSource {
  volumePath: string;
  fsType?: string;
  storagePolicyName?: string;
  storagePolicyID?: string;
}

/** `spec` of a PersistentVolume (also the VA's `spec.source.inlineVolumeSpec`). */
export interface PersistentVolumeSpec {
  accessModes?: string[] | null;
  capacity?: Record<string, string>;
  csi?: CsiPersistentVolumeSource | null;
  gcePersistentDisk?: GcePersistentDiskVolumeSource | null;
  azureDisk?: AzureDiskVolumeSource | null;
  azureFile?: AzureFilePersistentVolumeSource | null;
  vsphereVolume?: VsphereVirtualDiskVolumeSource | null;
  volumeMode?: string;
  mountOptions?: string[] | null;
  persistentVolumeReclaimPolicy?: string;
  storageClassName?: string;
  claimRef?: Record<string, unknown> | null;
  [key: string]: unknown;
}

/** `v1` PersistentVolume. */
export interface PersistentVolume extends KubeObject {
  spec: PersistentVolumeSpec;
  status?: { phase?: string; [key: string]: unknown };
}

/** `storage.k8s.io/v1` VolumeAttachment. */
export interface VolumeAttachment extends KubeObject {
  spec: {
    attacher: string;
    nodeName: string;
    source: {
      persistentVolumeName?: string | null;
      inlineVolumeSpec?: PersistentVolumeSpec | null;
    };
  };
  status?: {
    attached: boolean;
    attachmentMetadata?: Record<string, string> | null;
    attachError?: VolumeError | null;
    detachError?: VolumeError | null;
  };
}

/** One driver entry of a CSINode. */
export interface CsiNodeDriver {
  name: string;
  nodeID: string;
  topologyKeys?: string[] | null;
  allocatable?: { count?: number } | null;
}

/** `storage.k8s.io/v1` CSINode. */
export interface CsiNode extends KubeObject {
  spec: { drivers?: CsiNodeDriver[] | null };
}

/** `v1` Secret; `data` values are base64. */
export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string> | null;
  stringData?: Record<string, string> | null;
}

/** `coordination.k8s.io/v1` Lease. Times are MicroTime strings (6 fraction digits). */
export interface Lease extends KubeObject {
  spec: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number | null;
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number | null;
  };
}

/** `v1` Status, the body of every API error. */
export interface Status {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, unknown>;
  status: "Failure" | "Success";
  message?: string;
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: unknown[];
    retryAfterSeconds?: number;
  };
  code: number;
}
