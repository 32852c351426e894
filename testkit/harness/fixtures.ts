/**
 * Objects and expected requests of the handler scenarios, named as in the Go attacher's
 * `pkg/controller/csi_handler_test.go` (with the harness of `framework_test.go`).
 *
 * @module
 */

import type {
  CsiNode,
  KubeObject,
  PersistentVolume,
  PersistentVolumeSpec,
  Secret,
  VolumeAttachment,
} from "../../lib/kube/types.ts";

export const DRIVER = "csi/test";
export const FIN = "external-attacher/csi-test";
export const NODE_ID_ANN = "csi.alpha.kubernetes.io/node-id";
export const ANN = { [NODE_ID_ANN]: "nodeID1" };
export const TIME = "2026-01-01T00:00:00Z";

/** `va(attached, finalizer, annotations)`: VA `pv1-node1` of `csi/test` for PV `pv1` on `node1`. */
export function va(
  attached: boolean,
  finalizer = "",
  annotations?: Record<string, string>,
): VolumeAttachment {
  const obj: VolumeAttachment = {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: "pv1-node1", resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv1" } },
    status: { attached },
  };
  if (finalizer) obj.metadata.finalizers = [finalizer];
  if (annotations) obj.metadata.annotations = { ...annotations };
  return obj;
}

/** Applies `fn` to a copy of `obj`. */
export function with_<T>(obj: T, fn: (o: T) => void): T {
  const copy = structuredClone(obj);
  fn(copy);
  return copy;
}

/** Marks an object deleted. */
export function deleted<T extends { metadata: { deletionTimestamp?: string } }>(obj: T): T {
  return with_(obj, (o) => o.metadata.deletionTimestamp = TIME);
}

/** The inline volume spec of the Go attacher's tests: RWO, driver `com.test.foo`, handle `handle1`. */
export function inlineSpec(): PersistentVolumeSpec {
  return {
    accessModes: ["ReadWriteOnce"],
    csi: { driver: "com.test.foo", volumeHandle: "handle1", readOnly: false },
  };
}

/** `vaInlineSpecWithFinalizer(...)` style: a VA whose source is the inline spec. */
export function vaInline(attached: boolean, finalizer = "", annotations?: Record<string, string>) {
  return with_(va(attached, finalizer, annotations), (o) => {
    o.spec.source = { inlineVolumeSpec: inlineSpec() };
  });
}

/** `pv()`: `pv1` of `csi/test`, handle `handle1`, RWX, with our finalizer. */
export function pv(finalizers: string[] | null = [FIN]): PersistentVolume {
  const obj: PersistentVolume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv1", resourceVersion: "1" },
    spec: {
      accessModes: ["ReadWriteMany"],
      csi: { driver: DRIVER, volumeHandle: "handle1", readOnly: false },
    },
  };
  if (finalizers) obj.metadata.finalizers = [...finalizers];
  return obj;
}

/** A GCE PD in-tree PV in zone `testZone` (CSI migration). */
export function gcePdPv(finalizers: string[] | null = [FIN]): PersistentVolume {
  const obj: PersistentVolume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: "pv1",
      resourceVersion: "1",
      labels: { "failure-domain.beta.kubernetes.io/zone": "testZone" },
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      gcePersistentDisk: { pdName: "testpd", fsType: "ext4", partition: 0, readOnly: false },
    },
  };
  if (finalizers) obj.metadata.finalizers = [...finalizers];
  return obj;
}

/** `csiNode()`: `node1` with driver `csi/test` and node ID `nodeID1`. */
export function csiNode(): CsiNode {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: "node1", resourceVersion: "1" },
    spec: { drivers: [{ name: DRIVER, nodeID: "nodeID1" }] },
  };
}

/** `node()`: the Node `node1`, without annotations (the attacher does not read Nodes). */
export function node(): KubeObject {
  return { apiVersion: "v1", kind: "Node", metadata: { name: "node1", resourceVersion: "1" } };
}

/** `csiNodeEmpty()`: `node1` without drivers. */
export function csiNodeEmpty(): CsiNode {
  return with_(csiNode(), (o) => o.spec.drivers = []);
}

/** `secret()`: `default/secret` with `foo: bar`. */
export function secret(): Secret {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "secret", namespace: "default", resourceVersion: "1" },
    data: { foo: btoa("bar") },
  };
}

/** `emptySecret()`: `default/emptySecret` without data. */
export function emptySecret(): Secret {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "emptySecret", namespace: "default", resourceVersion: "1" },
  };
}

/** A PV spec change: the controller-publish secret reference. */
export function withSecretRef<T extends PersistentVolume>(obj: T, name: string): T {
  return with_(obj, (o) => o.spec.csi!.controllerPublishSecretRef = { name, namespace: "default" });
}

/** An API request as the scenarios compare it. */
export interface Action {
  verb: "get" | "patch" | "create" | "update" | "delete" | "list";
  resource: string;
  name: string;
  namespace?: string;
  subresource?: "status";
  /** `merge` or `json` for patches. */
  patchType?: "merge" | "json";
  body?: unknown;
}

/** MP: merge patch on the VA's metadata (VA `pv1-node1` unless `name` is given). */
export function vaMetaPatch(body: unknown, name = "pv1-node1"): Action {
  return {
    verb: "patch",
    resource: "volumeattachments",
    name,
    patchType: "merge",
    body,
  };
}

/** SP: merge patch on the VA's status subresource (VA `pv1-node1` unless `name` is given). */
export function vaStatusPatch(body: unknown, name = "pv1-node1"): Action {
  return {
    verb: "patch",
    resource: "volumeattachments",
    name,
    subresource: "status",
    patchType: "merge",
    body,
  };
}

/** +fin/ann: finalizer and node-ID annotation added to the VA. */
export const ADD_FIN_ANN = vaMetaPatch({
  metadata: { annotations: { [NODE_ID_ANN]: "nodeID1" }, finalizers: [FIN] },
});
/**
 * +fin +ann of a VA with `uid` (every real VA has one; the Go attacher's fixtures have none): the
 * uid makes the server refuse the patch for a VA deleted and created again under the same name.
 */
export function addFinAnnFor(uid: string, nodeId = "nodeID1"): Action {
  return vaMetaPatch({
    metadata: { annotations: { [NODE_ID_ANN]: nodeId }, finalizers: [FIN], uid },
  });
}
/** −fin: the VA's only finalizer removed. */
export const REMOVE_FIN = vaMetaPatch({ metadata: { finalizers: null } });
/**
 * att: marked attached; the attach error is cleared whatever the cache showed (the Go attacher's
 * `{status: {attached: true}}` leaves an error its cache has not seen yet).
 */
export const ATT = vaStatusPatch({ status: { attachError: null, attached: true } });
/** att of the trivial handler (no driver, no error to clear), as the Go attacher's. */
export const TRIVIAL_ATT = vaStatusPatch({ status: { attached: true } });
/** The status write of a forced publish of a VA already attached: only the error cleared. */
export const REATT = vaStatusPatch({ status: { attachError: null } });
/** att+clr: marked attached, error cleared. */
export const ATT_CLR = vaStatusPatch({ status: { attachError: null, attached: true } });
/** det: marked detached. */
export const DET = vaStatusPatch({ status: { attached: false } });
/** det+clr: marked detached, error cleared. */
export const DET_CLR = vaStatusPatch({ status: { attached: false, detachError: null } });

/**
 * A status patch (ATT, DET, AE, ...) of a VA with `uid`: status patches carry the uid of the VA
 * their sync started from, as the metadata patches do (the Go attacher's carry none).
 */
export function forUid(action: Action, uid: string): Action {
  const body = action.body as Record<string, unknown>;
  return { ...action, body: { ...body, metadata: { ...(body.metadata ?? {}), uid } } };
}

/** AE(msg): attach error saved (`time` is compared as null). */
export function attachError(message: string, errorCode?: number): Action {
  const error: Record<string, unknown> = { message, time: null };
  if (errorCode !== undefined) error.errorCode = errorCode;
  return vaStatusPatch({ status: { attachError: error } });
}

/** DE(msg): detach error saved. */
export function detachError(message: string): Action {
  return vaStatusPatch({ status: { detachError: { message, time: null } } });
}

/** GET of secret `default/<name>`. */
export function getSecret(name: string): Action {
  return { verb: "get", resource: "secrets", name, namespace: "default" };
}

/** PV+fin: our finalizer added to a PV with no finalizers. */
export const PV_ADD_FIN: Action = {
  verb: "patch",
  resource: "persistentvolumes",
  name: "pv1",
  patchType: "json",
  body: [
    { op: "test", path: "/metadata/finalizers", value: null },
    { op: "add", path: "/metadata/finalizers", value: [FIN] },
  ],
};

/** PV−fin(i): our finalizer removed from index `i`. */
export function pvRemoveFin(index: number): Action {
  const path = `/metadata/finalizers/${index}`;
  return {
    verb: "patch",
    resource: "persistentvolumes",
    name: "pv1",
    patchType: "json",
    body: [{ op: "test", path, value: FIN }, { op: "remove", path }],
  };
}
