/**
 * CSI migration of Azure Disk, Azure File and vSphere volumes through attach and detach, with the
 * volumes of csi-translation-lib v0.34's own test cases (`plugins/azure_disk_test.go`,
 * `plugins/azure_file_test.go`, `plugins/vsphere_volume_test.go`): the in-tree PVs, and the inline
 * specs its `TranslateInTreeInlineVolumeToCSI` gives (what kube-controller-manager puts into a
 * VolumeAttachment for an in-tree inline volume). Each driver runs under its own name, so the
 * calls carry the `migrated` metrics label.
 */

import assert from "node:assert/strict";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import type { Scenario, TimelineEntry } from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";
import {
  ANN,
  ATT,
  attachError,
  csiNode,
  deleted,
  detachError,
  REMOVE_FIN,
  va,
  vaMetaPatch,
  with_,
} from "../../testkit/harness/fixtures.ts";
import { finalizerName, NODE_ID_ANNOTATION } from "../../lib/controller/names.ts";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type {
  CsiNode,
  PersistentVolume,
  PersistentVolumeSpec,
  VolumeAttachment,
} from "../../lib/kube/types.ts";

const AZURE_DISK = "disk.csi.azure.com";
const AZURE_FILE = "file.csi.azure.com";
const VSPHERE = "csi.vsphere.vmware.com";

const DISK_URI = "/subscriptions/12/resourceGroups/23/providers/Microsoft.Compute/disks/name";
const VMDK = "[vsanDatastore] 6785a85e-268e-6352-a2e8-02008b7afadd/" +
  "kubernetes-dynamic-pvc-68734c9f-a679-42e6-a694-39632c51e31f.vmdk";

/** An in-tree PV `pv1` with `spec`, carrying the finalizer of `driver`. */
function inTreePv(
  driver: string,
  spec: PersistentVolumeSpec,
  meta: Partial<PersistentVolume["metadata"]> = {},
): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv1", resourceVersion: "1", finalizers: [finalizerName(driver)], ...meta },
    spec,
  };
}

/** The `azure disk volume` row of TestTranslateAzureDiskInTreePVToCSI, RWO. */
function azureDiskPv(kind?: string): PersistentVolume {
  return inTreePv(AZURE_DISK, {
    accessModes: ["ReadWriteOnce"],
    azureDisk: {
      diskName: "name",
      diskURI: DISK_URI,
      cachingMode: "cachingmode",
      fsType: "fstype",
      readOnly: true,
      ...(kind ? { kind } : {}),
    },
  });
}

/** The `azure file volume with rg annotation` row of TestTranslateAzureFileInTreePVToCSI, RWX. */
function azureFilePv(secretNamespace?: string): PersistentVolume {
  return inTreePv(AZURE_FILE, {
    accessModes: ["ReadWriteMany"],
    azureFile: {
      shareName: "sharename",
      secretName: "secretname",
      readOnly: true,
      ...(secretNamespace ? { secretNamespace } : {}),
    },
  }, { annotations: { "kubernetes.io/azure-file-resource-group": "rg" } });
}

/** The first valid row of TestTranslateVSphereInTreePVToCSI, with its topology labels. */
function vspherePv(): PersistentVolume {
  return inTreePv(VSPHERE, {
    accessModes: ["ReadWriteOnce"],
    vsphereVolume: {
      volumePath: VMDK,
      fsType: "ext4",
      storagePolicyName: "vSAN Default Storage Policy",
    },
  }, {
    labels: {
      "failure-domain.beta.kubernetes.io/zone": "z1",
      "failure-domain.beta.kubernetes.io/region": "r1",
    },
  });
}

function driverCsiNode(driver: string): CsiNode {
  return with_(csiNode(), (o) => o.spec.drivers = [{ name: driver, nodeID: "nodeID1" }]);
}

/** VA `pv1-node1` of `driver`: new, or attached and being deleted. */
function driverVa(driver: string, state: "new" | "deleting"): VolumeAttachment {
  const obj = state === "new" ? va(false) : deleted(va(true, finalizerName(driver), ANN));
  return with_(obj, (o) => o.spec.attacher = driver);
}

/** VA `pv1-node1` of `driver` for an inline volume with `spec`. */
function inlineVa(
  driver: string,
  spec: PersistentVolumeSpec,
  state: "new" | "deleting",
): VolumeAttachment {
  return with_(driverVa(driver, state), (o) => o.spec.source = { inlineVolumeSpec: spec });
}

function addFinAnn(driver: string) {
  return vaMetaPatch({
    metadata: {
      annotations: { [NODE_ID_ANNOTATION]: "nodeID1" },
      finalizers: [finalizerName(driver)],
    },
  });
}

function publish(volumeId: string, expect: Record<string, unknown>): ScriptedCall {
  return {
    method: "ControllerPublishVolume",
    expect: { volumeId, nodeId: "nodeID1", ...expect },
  };
}

function unpublish(volumeId: string): ScriptedCall {
  return { method: "ControllerUnpublishVolume", expect: { volumeId, nodeId: "nodeID1" } };
}

type CsiEntry = Extract<TimelineEntry, { kind: "csi" }>;

/** Checks the `migrated` label of every publish/unpublish of the run. */
function migratedLabels(want: boolean): Scenario["check"] {
  return (result) => {
    const calls = result.timeline.filter((e): e is CsiEntry => e.kind === "csi");
    assert.ok(calls.length > 0);
    for (const call of calls) assert.equal(call.options.migrated, want);
  };
}

/** The finalizer stays on a VA whose detach failed. */
function finalizerKept(driver: string): Scenario["check"] {
  return ({ server }) => {
    const stored = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "pv1-node1");
    assert.deepEqual(stored.metadata.finalizers, [finalizerName(driver)]);
  };
}

const SNW = "SINGLE_NODE_WRITER";

const scenarios: Scenario[] = [
  //
  // Azure Disk
  //
  {
    name: "Azure Disk PV -> published with the disk URI, caching mode, fsType and kind",
    driverName: AZURE_DISK,
    initialObjects: [azureDiskPv(), driverCsiNode(AZURE_DISK)],
    addedVA: driverVa(AZURE_DISK, "new"),
    expectedActions: [addFinAnn(AZURE_DISK), ATT],
    expectedCsiCalls: [
      publish(DISK_URI, {
        readonly: true,
        volumeContext: { cachingmode: "cachingmode", fstype: "fstype", kind: "Managed" },
        volumeCapability: { mount: { fsType: "fstype" }, accessMode: { mode: SNW } },
      }),
    ],
    check: migratedLabels(true),
  },
  {
    name: "Azure Disk PV marked for deletion -> unpublished with the disk URI",
    driverName: AZURE_DISK,
    initialObjects: [azureDiskPv(), driverCsiNode(AZURE_DISK)],
    addedVA: driverVa(AZURE_DISK, "deleting"),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish(DISK_URI)],
    check: migratedLabels(true),
  },
  {
    name: "Azure Disk PV of a non-managed kind -> attach error",
    driverName: AZURE_DISK,
    initialObjects: [azureDiskPv("Dedicated"), driverCsiNode(AZURE_DISK)],
    addedVA: driverVa(AZURE_DISK, "new"),
    expectedActions: [
      attachError(
        "failed to translate in tree pv to CSI: kind(Dedicated) is not supported in csi migration",
      ),
    ],
  },
  {
    name: "Azure Disk PV of a non-managed kind marked for deletion -> detach error, finalizer kept",
    driverName: AZURE_DISK,
    initialObjects: [azureDiskPv("Dedicated"), driverCsiNode(AZURE_DISK)],
    addedVA: driverVa(AZURE_DISK, "deleting"),
    expectedActions: [
      detachError(
        "failed to translate in tree pv to CSI: kind(Dedicated) is not supported in csi migration",
      ),
    ],
    check: finalizerKept(AZURE_DISK),
  },
  {
    // TestTranslateAzureDiskInTreeInlineVolumeToCSI "azure disk volume", with the Filesystem
    // volume mode TranslateInTreeInlineVolumeToCSI adds.
    name: "Azure Disk inline volume (translated) -> published with its handle",
    driverName: AZURE_DISK,
    initialObjects: [driverCsiNode(AZURE_DISK)],
    addedVA: inlineVa(AZURE_DISK, {
      accessModes: ["ReadWriteOnce"],
      volumeMode: "Filesystem",
      csi: {
        driver: AZURE_DISK,
        volumeHandle: "datadiskuri",
        volumeAttributes: { kind: "Managed" },
      },
    }, "new"),
    expectedActions: [addFinAnn(AZURE_DISK), ATT],
    expectedCsiCalls: [
      publish("datadiskuri", {
        readonly: false,
        volumeContext: { kind: "Managed" },
        volumeCapability: { mount: { fsType: "ext4" }, accessMode: { mode: SNW } },
      }),
    ],
  },
  //
  // Azure File
  //
  {
    name: "Azure File PV -> published with the rg#account#share#pv#namespace handle",
    driverName: AZURE_FILE,
    initialObjects: [azureFilePv("secretnamespace"), driverCsiNode(AZURE_FILE)],
    addedVA: driverVa(AZURE_FILE, "new"),
    expectedActions: [addFinAnn(AZURE_FILE), ATT],
    expectedCsiCalls: [
      publish("rg#secretname#sharename#pv1#secretnamespace", {
        readonly: true,
        // No controller-publish secret: the translation names only the node-stage secret.
        secrets: {},
        volumeContext: { sharename: "sharename" },
        volumeCapability: {
          mount: { fsType: "ext4" },
          accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
        },
      }),
    ],
    check: migratedLabels(true),
  },
  {
    name: "Azure File PV without secret namespace -> namespace from the claim",
    driverName: AZURE_FILE,
    initialObjects: [
      with_(azureFilePv(), (o) => o.spec.claimRef = { namespace: "claimns", name: "pvc1" }),
      driverCsiNode(AZURE_FILE),
    ],
    addedVA: driverVa(AZURE_FILE, "deleting"),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish("rg#secretname#sharename#pv1#claimns")],
    check: migratedLabels(true),
  },
  {
    name: "Azure File PV without any secret namespace -> attach error",
    driverName: AZURE_FILE,
    initialObjects: [azureFilePv(), driverCsiNode(AZURE_FILE)],
    addedVA: driverVa(AZURE_FILE, "new"),
    expectedActions: [
      attachError(
        "failed to translate in tree pv to CSI: " +
          "could not find a secret namespace in PersistentVolumeSource or ClaimRef",
      ),
    ],
  },
  {
    name: "Azure File PV without any secret namespace marked for deletion -> detach error",
    driverName: AZURE_FILE,
    initialObjects: [azureFilePv(), driverCsiNode(AZURE_FILE)],
    addedVA: driverVa(AZURE_FILE, "deleting"),
    expectedActions: [
      detachError(
        "failed to translate in tree pv to CSI: " +
          "could not find a secret namespace in PersistentVolumeSource or ClaimRef",
      ),
    ],
    check: finalizerKept(AZURE_FILE),
  },
  {
    // The inline translation's handle has no resource group and the pod's namespace; the account
    // comes from the generated secret name (TestGetStorageAccount).
    name: "Azure File inline volume (translated) -> unpublished with its handle",
    driverName: AZURE_FILE,
    initialObjects: [driverCsiNode(AZURE_FILE)],
    addedVA: inlineVa(AZURE_FILE, {
      accessModes: ["ReadWriteMany"],
      volumeMode: "Filesystem",
      csi: {
        driver: AZURE_FILE,
        volumeHandle: "#accountname#share#vol1#podns",
        readOnly: false,
        volumeAttributes: { sharename: "share" },
        nodeStageSecretRef: {
          name: "azure-storage-account-accountname-secret",
          namespace: "podns",
        },
      },
    }, "deleting"),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish("#accountname#share#vol1#podns")],
  },
  //
  // vSphere
  //
  {
    name: "vSphere PV -> published with the volume path and storage policy",
    driverName: VSPHERE,
    initialObjects: [vspherePv(), driverCsiNode(VSPHERE)],
    addedVA: driverVa(VSPHERE, "new"),
    expectedActions: [addFinAnn(VSPHERE), ATT],
    expectedCsiCalls: [
      publish(VMDK, {
        readonly: false,
        volumeContext: { storagepolicyname: "vSAN Default Storage Policy" },
        volumeCapability: { mount: { fsType: "ext4" }, accessMode: { mode: SNW } },
      }),
    ],
    check: migratedLabels(true),
  },
  {
    name: "vSphere PV marked for deletion -> unpublished with the volume path",
    driverName: VSPHERE,
    initialObjects: [vspherePv(), driverCsiNode(VSPHERE)],
    addedVA: driverVa(VSPHERE, "deleting"),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish(VMDK)],
    check: migratedLabels(true),
  },
  {
    // TestTranslatevSphereInTreeInlineVolumeToCSI "translate valid in-tree vsphere volume".
    name: "vSphere inline volume (translated) -> published with the volume path",
    driverName: VSPHERE,
    initialObjects: [driverCsiNode(VSPHERE)],
    addedVA: inlineVa(VSPHERE, {
      accessModes: ["ReadWriteOnce"],
      volumeMode: "Filesystem",
      csi: {
        driver: VSPHERE,
        volumeHandle: "[vsanDatastore] volume/inlinevolume.vmdk",
        fsType: "ext4",
        volumeAttributes: {},
      },
    }, "new"),
    expectedActions: [addFinAnn(VSPHERE), ATT],
    expectedCsiCalls: [
      publish("[vsanDatastore] volume/inlinevolume.vmdk", {
        volumeCapability: { mount: { fsType: "ext4" }, accessMode: { mode: SNW } },
      }),
    ],
  },
];

for (const s of scenarios) {
  Deno.test(`migration: ${s.name}`, async () => {
    await runScenario(s);
  });
}
