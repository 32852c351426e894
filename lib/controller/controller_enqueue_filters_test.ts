/**
 * The Go attacher's TestShouldEnqueueVAChange and TestProcessFinalizers tables (external-attacher `pkg/controller/controller_test.go`),
 * with the Go attacher's row names and values.
 */

import assert from "node:assert/strict";
import { shouldEnqueueVAChange, shouldProcessPersistentVolume } from "./controller.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";

// va1 ends with both errors set. As in the Go test, va1WithAttachError is copied before the
// attach error is set (so it has no error) and va1WithDetachError before the detach error (so it
// has only the attach error).
const va1: VolumeAttachment = {
  metadata: { name: "foo", resourceVersion: "1" },
  spec: { attacher: "1", nodeName: "", source: {} },
  status: { attached: false },
};
const va1WithAttachError = structuredClone(va1);
va1.status!.attachError = { message: "mock error1", time: null };
const va1WithDetachError = structuredClone(va1);
va1.status!.detachError = { message: "mock error1", time: null };

function changed(fn: (va: VolumeAttachment) => void): VolumeAttachment {
  const copy = structuredClone(va1);
  copy.metadata.resourceVersion = "2";
  fn(copy);
  return copy;
}

const va2ChangedSpec = changed((va) => va.spec.attacher = "2");
const va2ChangedMetadata = changed((va) => va.metadata.annotations = { foo: "bar" });
const va2ChangedAttachError = changed((va) =>
  va.status!.attachError = { message: "mock error2", time: null }
);
const va2ChangedDetachError = changed((va) =>
  va.status!.detachError = { message: "mock error2", time: null }
);
const va2AppendManagedFields = changed((va) => {
  va.metadata.managedFields = [{
    apiVersion: "storage.k8s.io/v1beta1",
    manager: "csi-attacher",
    operation: "Update",
    fieldsType: "FieldsV1",
    fieldsV1: {
      "f:metadata": {
        "f:annotations": { ".": {}, "f:csi.alpha.kubernetes.io/node-id": {} },
        "f:finalizers": { ".": {}, 'v:"external-attacher/csi-cdsplugin"': {} },
      },
      "f:status": {
        "f:attached": {},
        "f:attachmentMetadata": { ".": {}, "f:devName": {}, "f:serial": {} },
      },
    },
  }];
});

const enqueueRows: {
  name: string;
  oldVA: VolumeAttachment;
  newVA: VolumeAttachment;
  want: boolean;
}[] = [
  { name: "periodic sync", oldVA: va1, newVA: va1, want: true },
  { name: "changed spec", oldVA: va1, newVA: va2ChangedSpec, want: true },
  { name: "changed metadata", oldVA: va1, newVA: va2ChangedMetadata, want: true },
  { name: "added attachError", oldVA: va1, newVA: va2ChangedAttachError, want: false },
  { name: "added detachError", oldVA: va1, newVA: va2ChangedDetachError, want: false },
  {
    name: "changed attachError",
    oldVA: va1WithAttachError,
    newVA: va2ChangedAttachError,
    want: false,
  },
  {
    name: "changed detachError",
    oldVA: va1WithDetachError,
    newVA: va2ChangedDetachError,
    want: false,
  },
  { name: "appended managedFields", oldVA: va1, newVA: va2AppendManagedFields, want: false },
];

for (const row of enqueueRows) {
  Deno.test(`shouldEnqueueVAChange(): ${row.name}`, () => {
    assert.equal(shouldEnqueueVAChange(row.oldVA, row.newVA), row.want);
  });
}

Deno.test("shouldEnqueueVAChange(): an error written together with another status change is synced", () => {
  const newVA = changed((va) => {
    va.status!.attached = true;
    va.status!.attachError = { message: "mock error2", time: null };
  });
  assert.equal(shouldEnqueueVAChange(va1, newVA), true);
});

Deno.test("shouldEnqueueVAChange(): does not modify its arguments", () => {
  const oldVA = structuredClone(va1);
  const newVA = structuredClone(va2AppendManagedFields);
  shouldEnqueueVAChange(oldVA, newVA);
  assert.deepEqual(oldVA, va1);
  assert.deepEqual(newVA, va2AppendManagedFields);
});

const GCE_DRIVER = "pd.csi.storage.gke.io";
const GCE_FIN = "external-attacher/pd-csi-storage-gke-io";
const NOW = "2026-01-01T00:00:00Z";

/** An in-tree GCE PD source as the Go test gives it: all fields empty. */
const gceSource = { pdName: "" };

const finalizerRows: { name: string; pv: PersistentVolume; want: boolean }[] = [
  {
    name: "nothing interesting in the PV",
    pv: { metadata: { name: "" }, spec: {} },
    want: false,
  },
  {
    name: "no deletion timestamp, has finalizer",
    pv: { metadata: { name: "", finalizers: [GCE_FIN] }, spec: {} },
    want: false,
  },
  {
    name: "Has deletion timestamp, has finalizer",
    pv: { metadata: { name: "", deletionTimestamp: NOW, finalizers: [GCE_FIN] }, spec: {} },
    want: true,
  },
  {
    name: "no deletion timestamp, has finalizer, migrated PV, no migrated-to annotation",
    pv: { metadata: { name: "", finalizers: [GCE_FIN] }, spec: { gcePersistentDisk: gceSource } },
    want: true,
  },
  {
    name:
      "no deletion timestamp, has finalizer, migrated PV, no migrated-to annotation with random anno",
    pv: {
      metadata: { name: "", finalizers: [GCE_FIN], annotations: { random: "random" } },
      spec: { gcePersistentDisk: gceSource },
    },
    want: true,
  },
  {
    name: "no deletion timestamp, has finalizer, migrated PV, has migrated-to annotation",
    pv: {
      metadata: {
        name: "",
        finalizers: [GCE_FIN],
        annotations: { "pv.kubernetes.io/migrated-to": GCE_DRIVER },
      },
      spec: { gcePersistentDisk: gceSource },
    },
    want: false,
  },
];

for (const row of finalizerRows) {
  Deno.test(`shouldProcessPersistentVolume(): ${row.name}`, () => {
    assert.equal(shouldProcessPersistentVolume(row.pv, GCE_DRIVER), row.want);
  });
}
