/**
 * What the informer caches keep of each object: only the fields the attacher reads or patches,
 * as client-go's `SharedIndexInformer.SetTransform` lets a controller do
 * (`tools/cache/shared_informer.go`). Everything else (labels and annotations nobody here reads,
 * `kubectl.kubernetes.io/last-applied-configuration` copies, owner references, PV status,
 * other drivers' CSINode entries) is dropped when the object enters the cache, so memory grows
 * with what the attacher needs, not with what other tools attach to the objects.
 *
 * Why this is safe for every write (`attach.ts`, `detach.ts`, `csi_handler.ts`, the patches):
 * - VolumeAttachment metadata is written by merge patches made by `createMergePatch` from the
 *   cached metadata and a copy with our finalizer / node ID annotation changed: a field dropped
 *   here is absent on both sides, so it is not in the patch and the server keeps it.
 * - The VolumeAttachment finalizer removal sends the whole `finalizers` list: kept whole.
 * - VolumeAttachment status is written by merge patches between the cached `status` and the new
 *   one: `status` is kept whole.
 * - PersistentVolume finalizers are written by JSON patches whose `test` operations check
 *   `/metadata/finalizers` (or one index of it): kept whole. No other PV field is written.
 * - CSINodes are only read.
 *
 * @module
 */

import { MIGRATED_TO_ANNOTATION, NODE_ID_ANNOTATION } from "./names.ts";
import { AZURE_FILE_RESOURCE_GROUP_ANNOTATION } from "./migration.ts";
import type { CsiNode, ObjectMeta, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { StringPool } from "./string_pool.ts";

/**
 * The values cached objects share: API versions, kinds, finalizers, driver and node names, node
 * IDs, access modes and the like. A few hundred in a cluster with many nodes.
 */
export const SHARED_VALUES: StringPool = new StringPool(4096);

function shared<T extends string | undefined>(value: T): T {
  return (value === undefined ? undefined : SHARED_VALUES.intern(value)) as T;
}

/** The metadata every cached object keeps; `annotations` only the ones named. */
function keptMetadata(meta: ObjectMeta, annotations: readonly string[]): ObjectMeta {
  const out: ObjectMeta = { name: meta.name };
  if (meta.namespace !== undefined) out.namespace = shared(meta.namespace);
  if (meta.uid !== undefined) out.uid = meta.uid;
  if (meta.resourceVersion !== undefined) out.resourceVersion = meta.resourceVersion;
  // The attach latency and the oldest-pending gauge count from it.
  if (meta.creationTimestamp !== undefined) out.creationTimestamp = meta.creationTimestamp;
  if (meta.deletionTimestamp !== undefined) out.deletionTimestamp = meta.deletionTimestamp;
  if (meta.finalizers !== undefined) {
    const finalizers = meta.finalizers;
    out.finalizers = Array.isArray(finalizers) ? SHARED_VALUES.internAll(finalizers) : finalizers;
  }
  for (const key of annotations) {
    const value = meta.annotations?.[key];
    if (value !== undefined) (out.annotations ??= {})[key] = shared(value);
  }
  return out;
}

/**
 * A VolumeAttachment as cached: `spec` and `status` whole, metadata name, namespace, uid,
 * resourceVersion, creationTimestamp, deletionTimestamp, finalizers and the node ID annotation.
 */
export function cachedVolumeAttachment(va: VolumeAttachment): VolumeAttachment {
  const spec = va.spec;
  if (spec !== undefined && spec !== null) {
    if (typeof spec.attacher === "string") spec.attacher = shared(spec.attacher);
    if (typeof spec.nodeName === "string") spec.nodeName = shared(spec.nodeName);
  }
  const out: VolumeAttachment = {
    apiVersion: shared(va.apiVersion),
    kind: shared(va.kind),
    metadata: keptMetadata(va.metadata, [NODE_ID_ANNOTATION]),
    spec,
  };
  if (va.status !== undefined) out.status = va.status;
  return out;
}

/**
 * A PersistentVolume as cached: `spec` whole (the volume source, access modes and what CSI
 * migration translates), the labels (migration reads the zone labels), metadata as for a
 * VolumeAttachment with the `pv.kubernetes.io/migrated-to` annotation; no `status`.
 */
export function cachedPersistentVolume(pv: PersistentVolume): PersistentVolume {
  const metadata = keptMetadata(pv.metadata, [
    MIGRATED_TO_ANNOTATION,
    AZURE_FILE_RESOURCE_GROUP_ANNOTATION,
  ]);
  if (pv.metadata.labels !== undefined) metadata.labels = pv.metadata.labels;
  const spec = pv.spec;
  if (spec !== undefined && spec !== null) {
    if (Array.isArray(spec.accessModes)) SHARED_VALUES.internAll(spec.accessModes);
    if (typeof spec.persistentVolumeReclaimPolicy === "string") {
      spec.persistentVolumeReclaimPolicy = shared(spec.persistentVolumeReclaimPolicy);
    }
    if (typeof spec.volumeMode === "string") spec.volumeMode = shared(spec.volumeMode);
    if (typeof spec.storageClassName === "string") {
      spec.storageClassName = shared(spec.storageClassName);
    }
    const csi = spec.csi;
    if (csi !== undefined && csi !== null) {
      if (typeof csi.driver === "string") csi.driver = shared(csi.driver);
      if (typeof csi.fsType === "string") csi.fsType = shared(csi.fsType);
    }
  }
  return { apiVersion: shared(pv.apiVersion), kind: shared(pv.kind), metadata, spec };
}

/** A CSINode as cached: only the entry of `driverName` in `spec.drivers`, name and node ID. */
export function cachedCsiNode(driverName: string): (node: CsiNode) => CsiNode {
  return (node) => {
    const drivers = (node.spec?.drivers ?? [])
      .filter((d) => d.name === driverName)
      .map((d) => ({ name: d.name, nodeID: d.nodeID }));
    return {
      apiVersion: node.apiVersion,
      kind: node.kind,
      metadata: keptMetadata(node.metadata, []),
      spec: { drivers },
    };
  };
}
