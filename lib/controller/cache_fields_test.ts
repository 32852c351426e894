import assert from "node:assert/strict";
import {
  AZURE_FILE_RESOURCE_GROUP_ANNOTATION,
  translateInTreePersistentVolume,
} from "./migration.ts";
import {
  cachedCsiNode,
  cachedPersistentVolume,
  cachedVolumeAttachment,
  SHARED_VALUES,
} from "./cache_fields.ts";
import { finalizerName, MIGRATED_TO_ANNOTATION, NODE_ID_ANNOTATION } from "./names.ts";
import { applyMergePatch } from "../../testkit/apiserver/merge_patch.ts";
import { createMergePatch } from "../kube/patches.ts";
import { applyJsonPatch, parseJsonPatch } from "../../testkit/apiserver/json_patch.ts";
import { addFinalizerPatch, removeFinalizerPatch } from "../kube/finalizer_patch.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";

const FINALIZER = finalizerName("csi.example.com");
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** A VolumeAttachment as the API server has it, with fields the attacher never reads. */
function serverVA(): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: {
      name: "va1",
      uid: "u1",
      resourceVersion: "7",
      generation: 1,
      creationTimestamp: "2026-01-01T00:00:00Z",
      labels: { app: "x" },
      annotations: { [LAST_APPLIED]: '{"big":true}', "example.com/other": "keep me" },
      finalizers: ["other.example.com/guard"],
      managedFields: [{ manager: "kubectl" }],
    },
    spec: {
      attacher: "csi.example.com",
      nodeName: "node1",
      source: { persistentVolumeName: "pv1" },
    },
    status: { attached: false, attachError: { message: "boom", time: "2026-01-01T00:00:00Z" } },
  };
}

Deno.test("cachedVolumeAttachment() keeps spec, status and the metadata the attacher reads", () => {
  const va = serverVA();
  va.metadata.annotations![NODE_ID_ANNOTATION] = "n-1";
  va.metadata.deletionTimestamp = "2026-01-02T00:00:00Z";
  assert.deepEqual(cachedVolumeAttachment(va), {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: {
      name: "va1",
      uid: "u1",
      resourceVersion: "7",
      creationTimestamp: "2026-01-01T00:00:00Z",
      deletionTimestamp: "2026-01-02T00:00:00Z",
      finalizers: ["other.example.com/guard"],
      annotations: { [NODE_ID_ANNOTATION]: "n-1" },
    },
    spec: va.spec,
    status: va.status,
  });
});

Deno.test("cachedVolumeAttachment(): the handler's merge patches from the cache keep every other field on the server", () => {
  const server = serverVA();
  const cached = cachedVolumeAttachment(server);
  // Attach: finalizer and node ID annotation added to a copy of the cached metadata.
  const updated = structuredClone(cached);
  updated.metadata.finalizers = [...(updated.metadata.finalizers ?? []), FINALIZER];
  updated.metadata.annotations = { ...updated.metadata.annotations, [NODE_ID_ANNOTATION]: "n-1" };
  const attached = applyMergePatch(
    server,
    createMergePatch({ metadata: cached.metadata }, { metadata: updated.metadata }),
  ) as VolumeAttachment;
  const expected = serverVA();
  expected.metadata.finalizers = ["other.example.com/guard", FINALIZER];
  expected.metadata.annotations![NODE_ID_ANNOTATION] = "n-1";
  assert.deepEqual(attached, expected);

  // Status: attached, the error cleared.
  const cachedAttached = cachedVolumeAttachment(attached);
  const status = applyMergePatch(
    attached,
    createMergePatch({ status: cachedAttached.status }, {
      status: { ...cachedAttached.status, attached: true, attachError: undefined },
    }),
  ) as VolumeAttachment;
  assert.deepEqual(status.status, { attached: true });
  assert.deepEqual(status.metadata, attached.metadata);

  // Detach: our finalizer removed from the cached list, the other one kept.
  const remaining = cachedAttached.metadata.finalizers!.filter((f) => f !== FINALIZER);
  const detached = applyMergePatch(
    attached,
    createMergePatch({ metadata: cachedAttached.metadata }, {
      metadata: { ...cachedAttached.metadata, finalizers: remaining },
    }),
  ) as VolumeAttachment;
  assert.deepEqual(detached.metadata, {
    ...attached.metadata,
    finalizers: ["other.example.com/guard"],
  });
});

Deno.test("cachedPersistentVolume() keeps spec, labels and finalizers, so the finalizer JSON patches apply", () => {
  const server: PersistentVolume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: "pv1",
      uid: "p1",
      resourceVersion: "3",
      labels: { "topology.kubernetes.io/zone": "z1" },
      annotations: {
        [MIGRATED_TO_ANNOTATION]: "pd.csi.storage.gke.io",
        "pv.kubernetes.io/provisioned-by": "x",
      },
      finalizers: ["kubernetes.io/pv-protection"],
      managedFields: [{ manager: "kcm" }],
    },
    spec: { csi: { driver: "csi.example.com", volumeHandle: "h" }, accessModes: ["ReadWriteOnce"] },
    status: { phase: "Bound" },
  };
  const cached = cachedPersistentVolume(server);
  assert.deepEqual(cached, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: "pv1",
      uid: "p1",
      resourceVersion: "3",
      labels: { "topology.kubernetes.io/zone": "z1" },
      annotations: { [MIGRATED_TO_ANNOTATION]: "pd.csi.storage.gke.io" },
      finalizers: ["kubernetes.io/pv-protection"],
    },
    spec: server.spec,
  });
  const added = applyJsonPatch(
    server,
    parseJsonPatch(addFinalizerPatch(cached.metadata.finalizers, FINALIZER)),
  ) as PersistentVolume;
  assert.deepEqual(added.metadata.finalizers, ["kubernetes.io/pv-protection", FINALIZER]);
  assert.equal(added.status?.phase, "Bound");
  const removed = applyJsonPatch(
    added,
    parseJsonPatch(
      removeFinalizerPatch(cachedPersistentVolume(added).metadata.finalizers, FINALIZER),
    ),
  ) as PersistentVolume;
  assert.deepEqual(removed, server);

  // Without finalizers the add patch tests for null: still true on the server.
  const bare = structuredClone(server);
  delete bare.metadata.finalizers;
  const first = applyJsonPatch(
    bare,
    parseJsonPatch(
      addFinalizerPatch(cachedPersistentVolume(bare).metadata.finalizers, FINALIZER),
    ),
  ) as PersistentVolume;
  assert.deepEqual(first.metadata.finalizers, [FINALIZER]);
});

Deno.test("cachedCsiNode() keeps only this driver's entry, with its node ID", () => {
  const node: CsiNode = {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: "node1", uid: "c1", resourceVersion: "9", labels: { a: "b" } },
    spec: {
      drivers: [
        { name: "other.example.com", nodeID: "o-1" },
        {
          name: "csi.example.com",
          nodeID: "n-1",
          topologyKeys: ["zone"],
          allocatable: { count: 8 },
        },
      ],
    },
  };
  assert.deepEqual(cachedCsiNode("csi.example.com")(node), {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: "node1", uid: "c1", resourceVersion: "9" },
    spec: { drivers: [{ name: "csi.example.com", nodeID: "n-1" }] },
  });
  assert.deepEqual(cachedCsiNode("absent.example.com")(node).spec, { drivers: [] });
});

Deno.test("cachedPersistentVolume() keeps the Azure File resource group, part of the migrated volume handle", () => {
  const pv: PersistentVolume = {
    metadata: {
      name: "pv1",
      annotations: {
        [AZURE_FILE_RESOURCE_GROUP_ANNOTATION]: "rg",
        "pv.kubernetes.io/provisioned-by": "kubernetes.io/azure-file",
      },
    },
    spec: {
      azureFile: { shareName: "share", secretName: "secret", secretNamespace: "ns" },
    },
  };
  const cached = cachedPersistentVolume(pv);
  assert.deepEqual(cached.metadata.annotations, { [AZURE_FILE_RESOURCE_GROUP_ANNOTATION]: "rg" });
  assert.equal(
    translateInTreePersistentVolume(cached).spec.csi?.volumeHandle,
    "rg#secret#share#pv1#ns",
  );
});

Deno.test("the cache pools the values objects share, not the ones unique to each object", () => {
  const before = SHARED_VALUES.size;
  for (let i = 0; i < 50; i++) {
    const va = cachedVolumeAttachment(JSON.parse(JSON.stringify({
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: {
        name: `pool-va-${i}`,
        uid: `pool-uid-va-${i}`,
        finalizers: ["pool.example.com/finalizer"],
        annotations: { [NODE_ID_ANNOTATION]: "pool-node-id" },
      },
      spec: { attacher: "pool.example.com", nodeName: "pool-node", source: {} },
    })));
    assert.equal(va.spec.attacher, "pool.example.com");
    const pv = cachedPersistentVolume(JSON.parse(JSON.stringify({
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: `pool-pv-${i}`, uid: `pool-uid-pv-${i}` },
      spec: {
        accessModes: ["ReadWriteOncePod"],
        volumeMode: "Block",
        csi: { driver: "pool.example.com", volumeHandle: `pool-vol-${i}`, fsType: "xfs" },
      },
    })));
    assert.deepEqual(pv.spec.accessModes, ["ReadWriteOncePod"]);
  }
  // At most the distinct shared values: the finalizer, node ID, driver, node, access mode, volume
  // mode and fsType, and the API versions and kinds (if no earlier test pooled them); no name,
  // uid or volume handle.
  const added = SHARED_VALUES.size - before;
  assert.ok(added >= 7 && added <= 11, `pooled ${added} values`);
});
