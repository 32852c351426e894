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
 * Values many objects repeat are kept once (the pools of {@link CacheFields}, one per attacher):
 * strings, and the lists and records made of them, frozen. Cached objects are shared with every reader and must not be
 * changed; a shared part that someone tries to change throws instead of changing every object
 * that holds it. What each byte of a cached pair is: bench/README.md, "What a cached pair is".
 *
 * @module
 */

import { MIGRATED_TO_ANNOTATION, NODE_ID_ANNOTATION } from "./names.ts";
import { AZURE_FILE_RESOURCE_GROUP_ANNOTATION, isMigratablePersistentVolume } from "./migration.ts";
import type {
  CsiNode,
  CsiPersistentVolumeSource,
  ObjectMeta,
  PersistentVolume,
  PersistentVolumeSpec,
  SecretReference,
  VolumeAttachment,
} from "../kube/types.ts";
import type { ObjectStore } from "../kube/store.ts";
import { StringPool } from "./string_pool.ts";

/**
 * The values cached objects share: API versions, kinds, finalizers, driver and node names, node
 * IDs, access modes, secret references and the like, and the lists and records made of them
 * (finalizer lists, node ID annotations). Two per node (its name and node ID) and a few dozen
 * more: room for the 5000 nodes of Kubernetes' scalability envelope.
 */
const SHARED_VALUES_CAPACITY = 16_384;

/**
 * The PVs' `spec.csi.volumeAttributes`, which the volumes of one StorageClass usually share;
 * apart from the other values so that a driver whose attributes are unique per volume fills only
 * this pool.
 */
const SHARED_ATTRIBUTES_CAPACITY = 1024;

/** Which timestamp of an object: its creation or its deletion. */
type TimestampKind = "created" | "deleted";

/** What the caches of one attacher share (see {@link CacheFields}). */
interface Pools {
  values: StringPool;
  attributes: StringPool;
  /**
   * The last creation and the last deletion timestamp kept: objects created (or deleted) in one
   * burst share their second. Apart, so that the two timestamps of each VA being deleted do not
   * push each other out (one slot for both left every VA of a detach burst its own copy of both).
   */
  timestamps: Record<TimestampKind, string | undefined>;
}

const ATTACHED: NonNullable<VolumeAttachment["status"]> = Object.freeze({ attached: true });
const NOT_ATTACHED: NonNullable<VolumeAttachment["status"]> = Object.freeze({ attached: false });

function shared<T extends string | undefined>(p: Pools, value: T): T {
  return (value === undefined ? undefined : p.values.intern(value)) as T;
}

/** `value`, or the instance of the previous timestamp of `kind` when they are equal. */
function timestamp(p: Pools, value: string, kind: TimestampKind): string {
  const last = p.timestamps[kind];
  if (value === last) return last;
  p.timestamps[kind] = value;
  return value;
}

/** `finalizers` as a pooled frozen list (null and other values as they are). */
function sharedList<T>(p: Pools, values: T): T {
  return (Array.isArray(values) ? p.values.internList(values) : values) as T;
}

/**
 * The annotations named in `keys` that `meta` has: a pooled frozen record when there is one (the
 * node ID annotation of a VA is its node's), undefined when there is none.
 */
function keptAnnotations(
  p: Pools,
  meta: ObjectMeta,
  keys: readonly string[],
): Record<string, string> | undefined {
  const all = meta.annotations;
  if (all === undefined || all === null) return undefined;
  let out: Record<string, string> | undefined;
  let only: string | undefined;
  for (const key of keys) {
    const value = all[key];
    if (value === undefined) continue;
    if (out === undefined && only === undefined) {
      only = key;
      continue;
    }
    out ??= { [only!]: shared(p, all[only!]!) };
    out[key] = shared(p, value);
  }
  if (out !== undefined || only === undefined) return out;
  const value = all[only]!;
  return p.values.internRecord(`${only}\n${value}`, () => ({ [only!]: shared(p, value) }));
}

/** A timestamp member: strings through {@link timestamp}, anything else as it is. */
function keptTimestamp(
  p: Pools,
  value: string | undefined,
  kind: TimestampKind,
): string | undefined {
  return typeof value === "string" ? timestamp(p, value, kind) : value;
}

/**
 * The metadata every cached object keeps: name, namespace, deletionTimestamp, finalizers and the
 * `annotations` named; with `identity` also uid, resourceVersion and creationTimestamp.
 *
 * The shapes most objects have are built as one literal each, which keeps every member in the
 * object itself: a member added to an object after its literal goes to a separate properties
 * array (V8's out-of-object properties, 16 bytes and a slot per member more, in steps of three).
 */
function keptMetadata(
  p: Pools,
  meta: ObjectMeta,
  annotations: readonly string[],
  identity: boolean,
): ObjectMeta {
  const name = meta.name;
  const finalizers = meta.finalizers === undefined ? undefined : sharedList(p, meta.finalizers);
  const kept = keptAnnotations(p, meta, annotations);
  if (identity) {
    const uid = meta.uid;
    const resourceVersion = meta.resourceVersion;
    // The attach latency and the oldest-pending gauge count from it.
    const creationTimestamp = keptTimestamp(p, meta.creationTimestamp, "created");
    if (
      meta.namespace === undefined && uid !== undefined && resourceVersion !== undefined &&
      creationTimestamp !== undefined
    ) {
      if (meta.deletionTimestamp === undefined) {
        if (finalizers !== undefined && kept !== undefined) {
          return { name, uid, resourceVersion, creationTimestamp, finalizers, annotations: kept };
        }
        if (finalizers !== undefined) {
          return { name, uid, resourceVersion, creationTimestamp, finalizers };
        }
        if (kept === undefined) return { name, uid, resourceVersion, creationTimestamp };
      } else if (finalizers !== undefined && kept !== undefined) {
        // An attached VA being deleted: every one of them at the start of a detach burst.
        const deletionTimestamp = keptTimestamp(p, meta.deletionTimestamp, "deleted");
        return {
          name,
          uid,
          resourceVersion,
          creationTimestamp,
          deletionTimestamp,
          finalizers,
          annotations: kept,
        };
      }
    }
  } else if (meta.namespace === undefined && meta.deletionTimestamp === undefined) {
    if (finalizers !== undefined && kept === undefined) return { name, finalizers };
    if (finalizers === undefined && kept === undefined) return { name };
  }
  const out: ObjectMeta = { name };
  if (meta.namespace !== undefined) out.namespace = shared(p, meta.namespace);
  if (identity) {
    if (meta.uid !== undefined) out.uid = meta.uid;
    if (meta.resourceVersion !== undefined) out.resourceVersion = meta.resourceVersion;
    if (meta.creationTimestamp !== undefined) {
      out.creationTimestamp = keptTimestamp(p, meta.creationTimestamp, "created");
    }
  }
  if (meta.deletionTimestamp !== undefined) {
    out.deletionTimestamp = keptTimestamp(p, meta.deletionTimestamp, "deleted");
  }
  if (finalizers !== undefined) out.finalizers = finalizers;
  if (kept !== undefined) out.annotations = kept;
  return out;
}

/** A VA's status: one shared instance of each of `{attached: true}` and `{attached: false}`. */
function keptStatus(status: VolumeAttachment["status"]): VolumeAttachment["status"] {
  if (status === null || typeof status !== "object" || typeof status.attached !== "boolean") {
    return status;
  }
  let keys = 0;
  for (const _ in status) keys++;
  if (keys !== 1) return status;
  return status.attached ? ATTACHED : NOT_ATTACHED;
}

/** The cache an object is about to enter, to find the version it replaces; only `get` is asked. */
export type PreviousVersions<T> = Pick<ObjectStore<T>, "get">;

/**
 * Points `meta`'s name, uid and creationTimestamp at the equal strings of `before`, the cached
 * version it replaces, so that a new version holds new strings only for what changed. What the
 * new version holds anew has to be promoted to V8's old generation, while the version it
 * replaces, already there, turns to garbage; in a detach burst every VA gets a new version (its
 * deletionTimestamp) at once.
 */
function reuseStrings(meta: ObjectMeta, before: ObjectMeta): void {
  if (typeof meta.name === "string" && before.name === meta.name) meta.name = before.name;
  if (typeof meta.uid === "string" && before.uid === meta.uid) meta.uid = before.uid;
  const created = meta.creationTimestamp;
  if (typeof created === "string" && before.creationTimestamp === created) {
    meta.creationTimestamp = before.creationTimestamp;
  }
}

/**
 * The cached version that `obj` replaces, if any, with `obj`'s equal strings pointed at its own
 * ({@link reuseStrings}).
 */
function previousVersion<T extends { metadata: ObjectMeta }>(
  obj: T,
  previous: PreviousVersions<T> | undefined,
): T | undefined {
  const name = obj.metadata?.name;
  if (previous === undefined || typeof name !== "string") return undefined;
  const before = previous.get(name);
  if (before !== undefined) reuseStrings(obj.metadata, before.metadata);
  return before;
}

/** The number of own enumerable keys of `value`. */
function keyCount(value: object): number {
  let keys = 0;
  for (const _ in value) keys++;
  return keys;
}

/**
 * Whether two VolumeAttachment specs that name a PV are equal: attacher, node and PV name, and
 * nothing else. The API server refuses any change of a VA's spec (kubernetes
 * `pkg/apis/storage/validation/validation.go`, `ValidateVolumeAttachmentUpdate`: the spec is
 * immutable), so two versions of one VA usually have equal specs; inline volume specs are not
 * compared.
 */
function samePersistentVolumeSpec(
  a: VolumeAttachment["spec"],
  b: VolumeAttachment["spec"],
): boolean {
  const as = a.source;
  const bs = b.source;
  return a.attacher === b.attacher && a.nodeName === b.nodeName &&
    typeof as?.persistentVolumeName === "string" &&
    as.persistentVolumeName === bs?.persistentVolumeName &&
    keyCount(a) === 3 && keyCount(b) === 3 && keyCount(as) === 1 && keyCount(bs) === 1;
}

/**
 * A VolumeAttachment as cached: `spec` and `status` whole, metadata name, namespace, uid,
 * resourceVersion, creationTimestamp, deletionTimestamp, finalizers and the node ID annotation;
 * not `apiVersion` and `kind` (the store says what it holds). With `persistentVolumes`, the PV
 * name in `spec.source` is the cached PV's own string when that PV is cached. With `previous` (the
 * VolumeAttachment cache itself), a new version of a cached VA keeps the cached version's equal
 * name, uid and creationTimestamp strings, and its spec when equal ({@link reuseStrings}).
 */
function cachedVolumeAttachment(
  p: Pools,
  va: VolumeAttachment,
  persistentVolumes?: ObjectStore<PersistentVolume>,
  previous?: PreviousVersions<VolumeAttachment>,
): VolumeAttachment {
  const before = previousVersion(va, previous);
  let spec = va.spec;
  const beforeSpec = before?.spec;
  if (
    spec !== undefined && spec !== null && typeof spec === "object" &&
    beforeSpec !== undefined && beforeSpec !== null && typeof beforeSpec === "object" &&
    samePersistentVolumeSpec(spec, beforeSpec)
  ) {
    spec = beforeSpec;
  } else if (spec !== undefined && spec !== null) {
    if (typeof spec.attacher === "string") spec.attacher = shared(p, spec.attacher);
    if (typeof spec.nodeName === "string") spec.nodeName = shared(p, spec.nodeName);
    const source = spec.source;
    const pvName = source?.persistentVolumeName;
    if (typeof pvName === "string" && persistentVolumes !== undefined) {
      const cachedName = persistentVolumes.get(pvName)?.metadata.name;
      if (cachedName === pvName) source!.persistentVolumeName = cachedName;
    }
  }
  const metadata = keptMetadata(p, va.metadata, [NODE_ID_ANNOTATION], true);
  // One literal per case: every member in the object itself.
  if (va.status === undefined) return { metadata, spec };
  return { metadata, spec, status: keptStatus(va.status) };
}

/** A secret reference as a pooled record (the PVs of a StorageClass share theirs). */
function sharedSecretRef<T extends SecretReference | null | undefined>(p: Pools, ref: T): T {
  if (ref === undefined || ref === null || typeof ref !== "object") return ref;
  const { name, namespace } = ref;
  let keys = 0;
  for (const _ in ref) keys++;
  if (typeof name !== "string" || typeof namespace !== "string" || keys !== 2) return ref;
  return p.values.internRecord(
    `secret\n${namespace}\n${name}`,
    () => ({ name: shared(p, name), namespace: shared(p, namespace) }),
  ) as T;
}

/** `spec.csi` with its shared parts pooled, in place. */
function keptCsiSource(p: Pools, csi: CsiPersistentVolumeSource): CsiPersistentVolumeSource {
  if (typeof csi.driver === "string") csi.driver = shared(p, csi.driver);
  if (typeof csi.fsType === "string") csi.fsType = shared(p, csi.fsType);
  const attributes = csi.volumeAttributes;
  if (attributes !== undefined && attributes !== null && typeof attributes === "object") {
    csi.volumeAttributes = p.attributes.internRecord(
      JSON.stringify(attributes),
      () => attributes,
    );
  }
  if (csi.controllerPublishSecretRef !== undefined) {
    csi.controllerPublishSecretRef = sharedSecretRef(p, csi.controllerPublishSecretRef);
  }
  if (csi.nodeStageSecretRef !== undefined) {
    csi.nodeStageSecretRef = sharedSecretRef(p, csi.nodeStageSecretRef);
  }
  if (csi.nodePublishSecretRef !== undefined) {
    csi.nodePublishSecretRef = sharedSecretRef(p, csi.nodePublishSecretRef);
  }
  if (csi.controllerExpandSecretRef !== undefined) {
    csi.controllerExpandSecretRef = sharedSecretRef(p, csi.controllerExpandSecretRef);
  }
  if (csi.nodeExpandSecretRef !== undefined) {
    csi.nodeExpandSecretRef = sharedSecretRef(p, csi.nodeExpandSecretRef);
  }
  return csi;
}

/**
 * The spec of a CSI PersistentVolume as cached: what attach and detach read (`csi`, the access
 * modes, the volume mode, the mount options), not capacity, claim, reclaim policy, class or node
 * affinity.
 */
function keptCsiSpec(p: Pools, spec: PersistentVolumeSpec): PersistentVolumeSpec {
  const accessModes = spec.accessModes === undefined ? undefined : sharedList(p, spec.accessModes);
  const csi = spec.csi === undefined || spec.csi === null || typeof spec.csi !== "object"
    ? spec.csi
    : keptCsiSource(p, spec.csi);
  if (spec.volumeMode === undefined && spec.mountOptions === undefined) {
    // The usual shape as one literal (see keptMetadata).
    if (accessModes !== undefined && csi !== undefined) return { accessModes, csi };
  }
  const out: PersistentVolumeSpec = {};
  if (accessModes !== undefined) out.accessModes = accessModes;
  if (csi !== undefined) out.csi = csi;
  if (spec.volumeMode !== undefined) out.volumeMode = shared(p, spec.volumeMode);
  if (spec.mountOptions !== undefined) out.mountOptions = sharedList(p, spec.mountOptions);
  return out;
}

/**
 * Whether `a` and `b` have the same own keys with identical (`===`) values, the key `except` (when
 * given) only required on both sides.
 */
function sameMembers(a: object, b: object, except?: string): boolean {
  let keys = 0;
  for (const key in a) {
    keys++;
    if (!Object.hasOwn(b, key)) return false;
    if (key === except) continue;
    if ((a as Record<string, unknown>)[key] !== (b as Record<string, unknown>)[key]) return false;
  }
  return keys === keyCount(b);
}

/**
 * Whether two kept CSI PV specs are equal, compared member by member: their shared parts are
 * pooled, so equal ones are the same instances, and the rest (the volume handle, `readOnly`) are
 * strings and booleans. The source of a PV is immutable in the API (kubernetes
 * `pkg/apis/core/validation/validation.go`, `ValidatePersistentVolumeUpdate`), so a new version
 * of a PV (its finalizer added at the first attach) usually has the spec of the one it replaces.
 */
function sameCsiSpec(a: PersistentVolumeSpec, b: PersistentVolumeSpec): boolean {
  const ac = a.csi;
  const bc = b.csi;
  if (ac === undefined || ac === null || bc === undefined || bc === null) return false;
  return sameMembers(ac, bc) && sameMembers(a, b, "csi");
}

/**
 * A PersistentVolume as cached. A CSI PV keeps metadata name, deletionTimestamp, finalizers and
 * the `pv.kubernetes.io/migrated-to` annotation, and the spec that attach and detach read
 * (`csi`, access modes, volume mode, mount options); nothing reads its `apiVersion`, `kind`, uid,
 * resourceVersion, labels, capacity or claim. An in-tree PV that CSI migration translates also
 * keeps its whole spec and its labels (the translation reads the zone labels, the Azure File
 * resource group annotation and the claim's namespace). No `status`. With `previous` (the
 * PersistentVolume cache itself), a new version of a cached CSI PV keeps the cached version's
 * equal name string, and its kept spec when equal (as {@link cachedVolumeAttachment} does).
 */
function cachedPersistentVolume(
  p: Pools,
  pv: PersistentVolume,
  previous?: PreviousVersions<PersistentVolume>,
): PersistentVolume {
  const before = previousVersion(pv, previous);
  const metadata = keptMetadata(p, pv.metadata, [
    MIGRATED_TO_ANNOTATION,
    AZURE_FILE_RESOURCE_GROUP_ANNOTATION,
  ], false);
  const spec = pv.spec;
  if (spec === undefined || spec === null || typeof spec !== "object") return { metadata, spec };
  if (!isMigratablePersistentVolume(pv)) {
    const kept = keptCsiSpec(p, spec);
    const beforeSpec = before?.spec;
    if (beforeSpec !== undefined && sameCsiSpec(kept, beforeSpec)) {
      return { metadata, spec: beforeSpec };
    }
    return { metadata, spec: kept };
  }
  if (pv.metadata.labels !== undefined) metadata.labels = pv.metadata.labels;
  if (Array.isArray(spec.accessModes)) spec.accessModes = sharedList(p, spec.accessModes);
  if (typeof spec.volumeMode === "string") spec.volumeMode = shared(p, spec.volumeMode);
  return { metadata, spec };
}

/** A CSINode as cached: only the entry of `driverName` in `spec.drivers`, name and node ID. */
function cachedCsiNode(p: Pools, driverName: string): (node: CsiNode) => CsiNode {
  return (node) => {
    const drivers = (node.spec?.drivers ?? [])
      .filter((d) => d.name === driverName)
      .map((d) => ({ name: d.name, nodeID: d.nodeID }));
    return {
      apiVersion: node.apiVersion,
      kind: node.kind,
      metadata: keptMetadata(p, node.metadata, [], true),
      spec: { drivers },
    };
  };
}

/**
 * The transforms of one attacher's informers, with the pools their cached objects share: every
 * attacher makes its own, so that attachers in one process (the chaos simulation, the scenario
 * harness) share nothing.
 *
 * @example
 * ```ts
 * import { CacheFields } from "./cache_fields.ts";
 *
 * const fields = new CacheFields();
 * const va = fields.volumeAttachment({
 *   metadata: { name: "va-1", uid: "u1", resourceVersion: "7" },
 *   spec: { attacher: "csi.example.com", nodeName: "node-1", source: { persistentVolumeName: "pv-1" } },
 * });
 * ```
 */
export class CacheFields {
  #pools: Pools = {
    values: new StringPool(SHARED_VALUES_CAPACITY),
    attributes: new StringPool(SHARED_ATTRIBUTES_CAPACITY),
    timestamps: { created: undefined, deleted: undefined },
  };

  /**
   * A VolumeAttachment as cached: `spec` and `status` whole, metadata name, namespace, uid,
   * resourceVersion, creationTimestamp, deletionTimestamp, finalizers and the node ID annotation;
   * not `apiVersion` and `kind` (the store says what it holds). With `persistentVolumes`, the PV
   * name in `spec.source` is the cached PV's own string when that PV is cached. With `previous`
   * (the VolumeAttachment cache itself), a new version of a cached VA keeps the cached version's
   * equal name, uid and creationTimestamp strings, and its spec when equal.
   */
  volumeAttachment(
    va: VolumeAttachment,
    persistentVolumes?: ObjectStore<PersistentVolume>,
    previous?: PreviousVersions<VolumeAttachment>,
  ): VolumeAttachment {
    return cachedVolumeAttachment(this.#pools, va, persistentVolumes, previous);
  }

  /**
   * A PersistentVolume as cached: for a CSI PV metadata name, deletionTimestamp, finalizers and
   * the migration annotations, and the spec attach and detach read; an in-tree PV that CSI
   * migration translates keeps its whole spec and its labels. With `previous` (the
   * PersistentVolume cache itself), a new version keeps the cached version's equal strings and
   * spec.
   */
  persistentVolume(
    pv: PersistentVolume,
    previous?: PreviousVersions<PersistentVolume>,
  ): PersistentVolume {
    return cachedPersistentVolume(this.#pools, pv, previous);
  }

  /** The CSINode transform for `driverName`: only its entry of `spec.drivers`, name and node ID. */
  csiNode(driverName: string): (node: CsiNode) => CsiNode {
    return cachedCsiNode(this.#pools, driverName);
  }

  /** How many values the shared pool holds (for tests and memory reports). */
  get sharedValueCount(): number {
    return this.#pools.values.size;
  }
}
