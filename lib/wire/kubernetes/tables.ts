/**
 * The messages the Kubernetes decoder (`./decode.ts`) reads, as tables: for each field its number
 * in the upstream `generated.proto`, its JSON name (the proto name, as in every
 * `k8s.io/api` message), its kind and its JSON presence rule, taken from the Go struct tag:
 *
 * - `omitempty`: the JSON form leaves the field out when it is Go's zero value (`""`, 0, false,
 *   an empty list or map). Protobuf cannot tell an absent value from a zero one, and Go's
 *   `encoding/json` cannot either, so absent and zero give the same JSON.
 * - `always`: a tag without `omitempty`, or a struct value (Go ignores `omitempty` on structs):
 *   the field is always there, its zero value when absent on the wire (`""`, 0, false, `null`
 *   for a nil list or map, the message's own defaults for a struct, `null` for a zero
 *   `metav1.Time`).
 * - `pointer`: a Go pointer with `omitempty` (`*string`, `*int32`, `*VolumeError`): present in
 *   JSON exactly when present on the wire (gogo writes a non-nil pointer even when it points to
 *   a zero value).
 * - `nullable`: a Go pointer without `omitempty` (`AzureFilePersistentVolumeSource.secretNamespace`):
 *   `null` when absent on the wire.
 * - `empty`: a list's `items`, `[]` when there are none (the API server never sends a nil list).
 * - `omitzero`: a `metav1.Time` tagged `omitempty,omitzero` (`ObjectMeta.creationTimestamp` since
 *   apimachinery v0.35): left out when zero.
 *
 * Sources, checked by `tables_test.ts` against both releases: `k8s.io/api` and
 * `k8s.io/apimachinery` v0.35.4 and v0.37.2, the `generated.proto` and `types.go` of each package.
 *
 * What is read: every field of ObjectMeta but `managedFields` (about half of each object the
 * API server sends) and `selfLink` (never set since Kubernetes 1.20); all of VolumeAttachment,
 * Lease, metav1.Status, ListMeta; CSINode's spec, and its `status` (new in v0.37, read by
 * nothing) as the `{}` that the JSON of a v1.37 server always has, without `storageHealth` (from
 * a v1.35 server too, whose JSON has no `status`: the bytes cannot tell); of a PersistentVolume's
 * spec the CSI source and the in-tree sources CSI migration translates
 * (`lib/controller/migration.ts`), capacity, access modes, claim, reclaim policy, class, mount
 * options, volume mode and attributes class, not `nodeAffinity` nor the volume sources that the
 * attacher never handles (NFS, host path, iSCSI, ...), and the PV's status.
 * Every field not in a table is skipped by its wire type without being decoded.
 *
 * @module
 */

/** How a field is decoded. */
export type FieldKind =
  | "string"
  | "bool"
  | "int32"
  | "int64"
  /** `metav1.Time`: RFC 3339 in seconds, as its `MarshalJSON`. */
  | "time"
  /** `metav1.MicroTime`: RFC 3339 with 6 fraction digits. */
  | "microTime"
  /** `map<string, string>`. */
  | "map"
  /** `map<string, resource.Quantity>`: the quantity's canonical string. */
  | "quantityMap"
  /** `repeated string`. */
  | "strings"
  | "message"
  /** `repeated` message. */
  | "messages"
  /** A struct embedded with `json:",inline"`: its fields go into the parent object. */
  | "inline";

/** A field's JSON presence rule (see the module doc). */
export type Presence = "omitempty" | "always" | "pointer" | "omitzero" | "nullable" | "empty";

/** One field of a {@link MessageTable}. */
export interface FieldTable {
  /** The field number in `generated.proto`. */
  readonly number: number;
  /** The JSON (and proto) name. */
  readonly name: string;
  readonly kind: FieldKind;
  readonly presence: Presence;
  /** The message of a `message`, `messages` or `inline` field. */
  readonly message?: MessageTable;
  /** The first `k8s.io/api` release that has the field, when newer than v0.35.4. */
  readonly since?: string;
  /** The wire type the field must have: 0 for bools and numbers, else 2. */
  readonly wireType: number;
}

/** One message: its fully qualified proto name and the fields read. */
export interface MessageTable {
  /** E.g. `k8s.io.api.storage.v1.VolumeAttachment`. */
  readonly proto: string;
  readonly fields: readonly FieldTable[];
  /** The fields by number (holes for the numbers not read). */
  readonly byNumber: readonly (FieldTable | undefined)[];
  /** The fields JSON always has (presence `always`, `nullable`, `empty`; not `inline`). */
  readonly filled: readonly FieldTable[];
}

type FieldArgs = [number: number, name: string, kind: FieldKind, presence: Presence];

function message(
  proto: string,
  fields: (FieldArgs | [...FieldArgs, MessageTable] | [...FieldArgs, MessageTable, string])[],
): MessageTable {
  const list: FieldTable[] = fields.map(([number, name, kind, presence, sub, since]) => ({
    number,
    name,
    kind,
    presence,
    ...(sub === undefined ? {} : { message: sub }),
    ...(since === undefined ? {} : { since }),
    wireType: kind === "bool" || kind === "int32" || kind === "int64" ? 0 : 2,
  }));
  const byNumber: (FieldTable | undefined)[] = [];
  for (const f of list) byNumber[f.number] = f;
  const filled = list.filter((f) =>
    f.kind !== "inline" &&
    (f.presence === "always" || f.presence === "nullable" || f.presence === "empty")
  );
  return { proto, fields: list, byNumber, filled };
}

const META = "k8s.io.apimachinery.pkg.apis.meta.v1";
const CORE = "k8s.io.api.core.v1";
const STORAGE = "k8s.io.api.storage.v1";
const COORDINATION = "k8s.io.api.coordination.v1";

/** `metav1.OwnerReference`. */
export const OWNER_REFERENCE: MessageTable = message(`${META}.OwnerReference`, [
  [5, "apiVersion", "string", "always"],
  [1, "kind", "string", "always"],
  [3, "name", "string", "always"],
  [4, "uid", "string", "always"],
  [6, "controller", "bool", "pointer"],
  [7, "blockOwnerDeletion", "bool", "pointer"],
]);

/** `metav1.ObjectMeta` without `selfLink` (4) and `managedFields` (17). */
export const OBJECT_META: MessageTable = message(`${META}.ObjectMeta`, [
  [1, "name", "string", "omitempty"],
  [2, "generateName", "string", "omitempty"],
  [3, "namespace", "string", "omitempty"],
  [5, "uid", "string", "omitempty"],
  [6, "resourceVersion", "string", "omitempty"],
  [7, "generation", "int64", "omitempty"],
  [8, "creationTimestamp", "time", "omitzero"],
  [9, "deletionTimestamp", "time", "pointer"],
  [10, "deletionGracePeriodSeconds", "int64", "pointer"],
  [11, "labels", "map", "omitempty"],
  [12, "annotations", "map", "omitempty"],
  [13, "ownerReferences", "messages", "omitempty", OWNER_REFERENCE],
  [14, "finalizers", "strings", "omitempty"],
]);

/** `metav1.ListMeta` without `selfLink` (1) and `shardInfo` (5, v0.37). */
export const LIST_META: MessageTable = message(`${META}.ListMeta`, [
  [2, "resourceVersion", "string", "omitempty"],
  [3, "continue", "string", "omitempty"],
  [4, "remainingItemCount", "int64", "pointer"],
]);

/** `metav1.StatusCause`. */
export const STATUS_CAUSE: MessageTable = message(`${META}.StatusCause`, [
  [1, "reason", "string", "omitempty"],
  [2, "message", "string", "omitempty"],
  [3, "field", "string", "omitempty"],
]);

/** `metav1.StatusDetails`. */
export const STATUS_DETAILS: MessageTable = message(`${META}.StatusDetails`, [
  [1, "name", "string", "omitempty"],
  [2, "group", "string", "omitempty"],
  [3, "kind", "string", "omitempty"],
  [6, "uid", "string", "omitempty"],
  [4, "causes", "messages", "omitempty", STATUS_CAUSE],
  [5, "retryAfterSeconds", "int32", "omitempty"],
]);

/** `metav1.Status`. */
export const STATUS: MessageTable = message(`${META}.Status`, [
  [1, "metadata", "message", "always", LIST_META],
  [2, "status", "string", "omitempty"],
  [3, "message", "string", "omitempty"],
  [4, "reason", "string", "omitempty"],
  [5, "details", "message", "pointer", STATUS_DETAILS],
  [6, "code", "int32", "omitempty"],
]);

/** `v1.SecretReference`. */
const SECRET_REFERENCE = message(`${CORE}.SecretReference`, [
  [1, "name", "string", "omitempty"],
  [2, "namespace", "string", "omitempty"],
]);

/** `v1.ObjectReference` (a PV's `claimRef`). */
const OBJECT_REFERENCE = message(`${CORE}.ObjectReference`, [
  [1, "kind", "string", "omitempty"],
  [2, "namespace", "string", "omitempty"],
  [3, "name", "string", "omitempty"],
  [4, "uid", "string", "omitempty"],
  [5, "apiVersion", "string", "omitempty"],
  [6, "resourceVersion", "string", "omitempty"],
  [7, "fieldPath", "string", "omitempty"],
]);

const CSI_SOURCE = message(`${CORE}.CSIPersistentVolumeSource`, [
  [1, "driver", "string", "always"],
  [2, "volumeHandle", "string", "always"],
  [3, "readOnly", "bool", "omitempty"],
  [4, "fsType", "string", "omitempty"],
  [5, "volumeAttributes", "map", "omitempty"],
  [6, "controllerPublishSecretRef", "message", "pointer", SECRET_REFERENCE],
  [7, "nodeStageSecretRef", "message", "pointer", SECRET_REFERENCE],
  [8, "nodePublishSecretRef", "message", "pointer", SECRET_REFERENCE],
  [9, "controllerExpandSecretRef", "message", "pointer", SECRET_REFERENCE],
  [10, "nodeExpandSecretRef", "message", "pointer", SECRET_REFERENCE],
]);

const GCE_PD_SOURCE = message(`${CORE}.GCEPersistentDiskVolumeSource`, [
  [1, "pdName", "string", "always"],
  [2, "fsType", "string", "omitempty"],
  [3, "partition", "int32", "omitempty"],
  [4, "readOnly", "bool", "omitempty"],
]);

const AWS_EBS_SOURCE = message(`${CORE}.AWSElasticBlockStoreVolumeSource`, [
  [1, "volumeID", "string", "always"],
  [2, "fsType", "string", "omitempty"],
  [3, "partition", "int32", "omitempty"],
  [4, "readOnly", "bool", "omitempty"],
]);

const CINDER_SOURCE = message(`${CORE}.CinderPersistentVolumeSource`, [
  [1, "volumeID", "string", "always"],
  [2, "fsType", "string", "omitempty"],
  [3, "readOnly", "bool", "omitempty"],
  [4, "secretRef", "message", "pointer", SECRET_REFERENCE],
]);

const AZURE_FILE_SOURCE = message(`${CORE}.AzureFilePersistentVolumeSource`, [
  [1, "secretName", "string", "always"],
  [2, "shareName", "string", "always"],
  [3, "readOnly", "bool", "omitempty"],
  // `SecretNamespace *string json:"secretNamespace"`: a nil pointer is `null`.
  [4, "secretNamespace", "string", "nullable"],
]);

const VSPHERE_SOURCE = message(`${CORE}.VsphereVirtualDiskVolumeSource`, [
  [1, "volumePath", "string", "always"],
  [2, "fsType", "string", "omitempty"],
  [3, "storagePolicyName", "string", "omitempty"],
  [4, "storagePolicyID", "string", "omitempty"],
]);

const AZURE_DISK_SOURCE = message(`${CORE}.AzureDiskVolumeSource`, [
  [1, "diskName", "string", "always"],
  [2, "diskURI", "string", "always"],
  [3, "cachingMode", "string", "pointer"],
  [4, "fsType", "string", "pointer"],
  [5, "readOnly", "bool", "pointer"],
  [6, "kind", "string", "pointer"],
]);

const PORTWORX_SOURCE = message(`${CORE}.PortworxVolumeSource`, [
  [1, "volumeID", "string", "always"],
  [2, "fsType", "string", "omitempty"],
  [3, "readOnly", "bool", "omitempty"],
]);

/** `v1.PersistentVolumeSource`: the sources the attacher handles (see the module doc). */
const PERSISTENT_VOLUME_SOURCE = message(`${CORE}.PersistentVolumeSource`, [
  [1, "gcePersistentDisk", "message", "pointer", GCE_PD_SOURCE],
  [2, "awsElasticBlockStore", "message", "pointer", AWS_EBS_SOURCE],
  [8, "cinder", "message", "pointer", CINDER_SOURCE],
  [13, "azureFile", "message", "pointer", AZURE_FILE_SOURCE],
  [14, "vsphereVolume", "message", "pointer", VSPHERE_SOURCE],
  [16, "azureDisk", "message", "pointer", AZURE_DISK_SOURCE],
  [18, "portworxVolume", "message", "pointer", PORTWORX_SOURCE],
  [22, "csi", "message", "pointer", CSI_SOURCE],
]);

/** `v1.PersistentVolumeSpec` without `nodeAffinity` (9). */
export const PERSISTENT_VOLUME_SPEC: MessageTable = message(`${CORE}.PersistentVolumeSpec`, [
  [1, "capacity", "quantityMap", "omitempty"],
  [2, "persistentVolumeSource", "inline", "always", PERSISTENT_VOLUME_SOURCE],
  [3, "accessModes", "strings", "omitempty"],
  [4, "claimRef", "message", "pointer", OBJECT_REFERENCE],
  [5, "persistentVolumeReclaimPolicy", "string", "omitempty"],
  [6, "storageClassName", "string", "omitempty"],
  [7, "mountOptions", "strings", "omitempty"],
  [8, "volumeMode", "string", "pointer"],
  [10, "volumeAttributesClassName", "string", "pointer"],
]);

const PERSISTENT_VOLUME_STATUS = message(`${CORE}.PersistentVolumeStatus`, [
  [1, "phase", "string", "omitempty"],
  [2, "message", "string", "omitempty"],
  [3, "reason", "string", "omitempty"],
  [4, "lastPhaseTransitionTime", "time", "pointer"],
]);

/** `v1.PersistentVolume`. */
export const PERSISTENT_VOLUME: MessageTable = message(`${CORE}.PersistentVolume`, [
  [1, "metadata", "message", "always", OBJECT_META],
  [2, "spec", "message", "always", PERSISTENT_VOLUME_SPEC],
  [3, "status", "message", "always", PERSISTENT_VOLUME_STATUS],
]);

const VOLUME_ERROR = message(`${STORAGE}.VolumeError`, [
  [1, "time", "time", "always"],
  [2, "message", "string", "omitempty"],
  [3, "errorCode", "int32", "pointer"],
]);

const VOLUME_ATTACHMENT_SOURCE = message(`${STORAGE}.VolumeAttachmentSource`, [
  [1, "persistentVolumeName", "string", "pointer"],
  [2, "inlineVolumeSpec", "message", "pointer", PERSISTENT_VOLUME_SPEC],
]);

const VOLUME_ATTACHMENT_SPEC = message(`${STORAGE}.VolumeAttachmentSpec`, [
  [1, "attacher", "string", "always"],
  [2, "source", "message", "always", VOLUME_ATTACHMENT_SOURCE],
  [3, "nodeName", "string", "always"],
]);

const VOLUME_ATTACHMENT_STATUS = message(`${STORAGE}.VolumeAttachmentStatus`, [
  [1, "attached", "bool", "always"],
  [2, "attachmentMetadata", "map", "omitempty"],
  [3, "attachError", "message", "pointer", VOLUME_ERROR],
  [4, "detachError", "message", "pointer", VOLUME_ERROR],
]);

/** `storage.k8s.io/v1` VolumeAttachment. */
export const VOLUME_ATTACHMENT: MessageTable = message(`${STORAGE}.VolumeAttachment`, [
  [1, "metadata", "message", "always", OBJECT_META],
  [2, "spec", "message", "always", VOLUME_ATTACHMENT_SPEC],
  [3, "status", "message", "always", VOLUME_ATTACHMENT_STATUS],
]);

const VOLUME_NODE_RESOURCES = message(`${STORAGE}.VolumeNodeResources`, [
  [1, "count", "int32", "pointer"],
]);

const CSI_NODE_DRIVER = message(`${STORAGE}.CSINodeDriver`, [
  [1, "name", "string", "always"],
  [2, "nodeID", "string", "always"],
  [3, "topologyKeys", "strings", "always"],
  [4, "allocatable", "message", "pointer", VOLUME_NODE_RESOURCES],
]);

const CSI_NODE_SPEC = message(`${STORAGE}.CSINodeSpec`, [
  [1, "drivers", "messages", "always", CSI_NODE_DRIVER],
]);

/** `CSINodeStatus` (v0.37) without `storageHealth` (1): `{}` as JSON always has it. */
const CSI_NODE_STATUS = message(`${STORAGE}.CSINodeStatus`, []);

/** `storage.k8s.io/v1` CSINode. */
export const CSI_NODE: MessageTable = message(`${STORAGE}.CSINode`, [
  [1, "metadata", "message", "always", OBJECT_META],
  [2, "spec", "message", "always", CSI_NODE_SPEC],
  [3, "status", "message", "always", CSI_NODE_STATUS, "v0.37.2"],
]);

const LEASE_SPEC = message(`${COORDINATION}.LeaseSpec`, [
  [1, "holderIdentity", "string", "pointer"],
  [2, "leaseDurationSeconds", "int32", "pointer"],
  [3, "acquireTime", "microTime", "pointer"],
  [4, "renewTime", "microTime", "pointer"],
  [5, "leaseTransitions", "int32", "pointer"],
  [6, "strategy", "string", "pointer"],
  [7, "preferredHolder", "string", "pointer"],
]);

/** `coordination.k8s.io/v1` Lease. */
export const LEASE: MessageTable = message(`${COORDINATION}.Lease`, [
  [1, "metadata", "message", "always", OBJECT_META],
  [2, "spec", "message", "always", LEASE_SPEC],
]);

/** The list message of `item`: `metadata` (ListMeta) 1, `items` 2. */
function list(proto: string, item: MessageTable): MessageTable {
  return message(proto, [
    [1, "metadata", "message", "always", LIST_META],
    [2, "items", "messages", "empty", item],
  ]);
}

/** `metav1.WatchEvent`: `type` 1, `object` 2 (a `runtime.RawExtension`, its `raw` 1). */
export const WATCH_EVENT_FIELDS = { type: 1, object: 2, raw: 1 } as const;

/** `runtime.Unknown`: `typeMeta` 1 (`apiVersion` 1, `kind` 2), `raw` 2, `contentEncoding` 3. */
export const UNKNOWN_FIELDS = {
  typeMeta: 1,
  apiVersion: 1,
  kind: 2,
  raw: 2,
  contentEncoding: 3,
  contentType: 4,
} as const;

/** The objects the decoder reads, by `apiVersion` and `kind` (`"<apiVersion> <kind>"`). */
export const KINDS: ReadonlyMap<string, MessageTable> = new Map([
  ["storage.k8s.io/v1 VolumeAttachment", VOLUME_ATTACHMENT],
  [
    "storage.k8s.io/v1 VolumeAttachmentList",
    list(`${STORAGE}.VolumeAttachmentList`, VOLUME_ATTACHMENT),
  ],
  ["v1 PersistentVolume", PERSISTENT_VOLUME],
  ["v1 PersistentVolumeList", list(`${CORE}.PersistentVolumeList`, PERSISTENT_VOLUME)],
  ["storage.k8s.io/v1 CSINode", CSI_NODE],
  ["storage.k8s.io/v1 CSINodeList", list(`${STORAGE}.CSINodeList`, CSI_NODE)],
  ["coordination.k8s.io/v1 Lease", LEASE],
  ["coordination.k8s.io/v1 LeaseList", list(`${COORDINATION}.LeaseList`, LEASE)],
  ["v1 Status", STATUS],
]);
