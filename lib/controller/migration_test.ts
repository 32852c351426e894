/**
 * The Azure Disk, Azure File and vSphere translations, row by row from csi-translation-lib
 * v0.34's own tests (`plugins/azure_disk_test.go` TestTranslateAzureDiskInTreePVToCSI,
 * `plugins/azure_file_test.go` TestTranslateAzureFileInTreePVToCSI and TestGetStorageAccount,
 * `plugins/vsphere_volume_test.go` TestTranslateVSphereInTreePVToCSI), and the Cinder and
 * Portworx translations (`plugins/openstack_cinder.go`, `plugins/portworx.go`).
 */

import assert from "node:assert/strict";
import type { PersistentVolume, PersistentVolumeSpec } from "../kube/types.ts";
import {
  isMigratablePersistentVolume,
  MIGRATION_DRIVER_NAMES,
  repairVolumeHandle,
  translateInTreePersistentVolume,
} from "./migration.ts";

function inTreePv(
  spec: PersistentVolumeSpec,
  meta: Partial<PersistentVolume["metadata"]> = {},
): PersistentVolume {
  return { metadata: { name: "uuid", ...meta }, spec };
}

const DISK_URI = "/subscriptions/12/resourceGroups/23/providers/Microsoft.Compute/disks/name";
const VMDK = "[vsanDatastore] 6785a85e-268e-6352-a2e8-02008b7afadd/" +
  "kubernetes-dynamic-pvc-68734c9f-a679-42e6-a694-39632c51e31f.vmdk";

interface Row {
  name: string;
  pv: PersistentVolume;
  /** The translated spec, or the error message. */
  want: PersistentVolumeSpec | string;
}

const rows: Row[] = [
  // plugins/azure_disk_test.go
  {
    name: "azure disk volume",
    pv: inTreePv({
      azureDisk: {
        diskName: "",
        diskURI: DISK_URI,
        cachingMode: "cachingmode",
        fsType: "fstype",
        readOnly: true,
      },
    }),
    want: {
      csi: {
        driver: "disk.csi.azure.com",
        volumeHandle: DISK_URI,
        fsType: "fstype",
        readOnly: true,
        volumeAttributes: { cachingmode: "cachingmode", fstype: "fstype", kind: "Managed" },
      },
    },
  },
  {
    name: "azure disk volume with non-managed kind",
    pv: inTreePv({
      azureDisk: {
        diskName: "",
        diskURI: DISK_URI,
        cachingMode: "cachingmode",
        fsType: "fstype",
        readOnly: true,
        kind: "Dedicated",
      },
    }),
    want: "kind(Dedicated) is not supported in csi migration",
  },
  {
    // The kind is compared case-insensitively (strings.EqualFold).
    name: "azure disk volume with kind managed, lower case",
    pv: inTreePv({ azureDisk: { diskName: "name", diskURI: DISK_URI, kind: "managed" } }),
    want: {
      csi: {
        driver: "disk.csi.azure.com",
        volumeHandle: DISK_URI,
        fsType: "",
        readOnly: false,
        volumeAttributes: { kind: "Managed" },
      },
    },
  },
  // plugins/azure_file_test.go
  {
    name: "return error if secret namespace could not be found",
    pv: inTreePv(
      { azureFile: { shareName: "sharename", secretName: "secretname", readOnly: true } },
      { annotations: { "kubernetes.io/azure-file-resource-group": "rg" } },
    ),
    want: "could not find a secret namespace in PersistentVolumeSource or ClaimRef",
  },
  {
    name: "azure file volume",
    pv: inTreePv({
      azureFile: {
        shareName: "sharename",
        secretName: "secretname",
        secretNamespace: "secretnamespace",
        readOnly: true,
      },
    }),
    want: {
      csi: {
        driver: "file.csi.azure.com",
        volumeHandle: "#secretname#sharename#uuid#secretnamespace",
        readOnly: true,
        fsType: "",
        nodeStageSecretRef: { name: "secretname", namespace: "secretnamespace" },
        volumeAttributes: { sharename: "sharename" },
      },
    },
  },
  {
    name: "azure file volume with rg annotation",
    pv: inTreePv(
      {
        azureFile: {
          shareName: "sharename",
          secretName: "secretname",
          secretNamespace: "secretnamespace",
          readOnly: true,
        },
      },
      { annotations: { "kubernetes.io/azure-file-resource-group": "rg" } },
    ),
    want: {
      csi: {
        driver: "file.csi.azure.com",
        volumeHandle: "rg#secretname#sharename#uuid#secretnamespace",
        readOnly: true,
        fsType: "",
        nodeStageSecretRef: { name: "secretname", namespace: "secretnamespace" },
        volumeAttributes: { sharename: "sharename" },
      },
    },
  },
  {
    name: "get secret namespace from ClaimRef when it's missing in pv spec source",
    pv: inTreePv(
      {
        azureFile: { shareName: "sharename", secretName: "secretname", readOnly: true },
        claimRef: { namespace: "secretnamespace" },
      },
      { annotations: { "kubernetes.io/azure-file-resource-group": "rg" } },
    ),
    want: {
      claimRef: { namespace: "secretnamespace" },
      csi: {
        driver: "file.csi.azure.com",
        volumeHandle: "rg#secretname#sharename#uuid#secretnamespace",
        readOnly: true,
        fsType: "",
        nodeStageSecretRef: { name: "secretname", namespace: "secretnamespace" },
        volumeAttributes: { sharename: "sharename" },
      },
    },
  },
  {
    // TestGetStorageAccount: the account is the middle of `azure-storage-account-<a>-secret`.
    name: "azure file volume with a generated secret name -> account from the secret name",
    pv: inTreePv({
      azureFile: {
        shareName: "share",
        secretName: "azure-storage-account-accountname-dup-secret",
        secretNamespace: "ns",
      },
    }),
    want: {
      csi: {
        driver: "file.csi.azure.com",
        volumeHandle: "#accountname-dup#share#uuid#ns",
        readOnly: false,
        fsType: "",
        nodeStageSecretRef: {
          name: "azure-storage-account-accountname-dup-secret",
          namespace: "ns",
        },
        volumeAttributes: { sharename: "share" },
      },
    },
  },
  // plugins/vsphere_volume_test.go
  {
    name: "translate valid vSphere in-tree PV to vSphere CSI PV",
    pv: inTreePv({
      vsphereVolume: {
        volumePath: VMDK,
        fsType: "ext4",
        storagePolicyName: "vSAN Default Storage Policy",
      },
      accessModes: ["ReadWriteOnce"],
    }, { name: "pvc-d8b4475f-2c47-486e-9b57-43ae006f9b59" }),
    want: {
      csi: {
        driver: "csi.vsphere.vmware.com",
        volumeHandle: VMDK,
        fsType: "ext4",
        readOnly: false,
        volumeAttributes: { storagepolicyname: "vSAN Default Storage Policy" },
      },
      accessModes: ["ReadWriteOnce"],
    },
  },
  {
    // The topology labels become node affinity in csi-translation-lib; the CSI source is the same.
    name: "translate valid vSphere in-tree PV with GA topology labels to vSphere CSI PV",
    pv: inTreePv({
      vsphereVolume: { volumePath: VMDK, fsType: "ext4" },
      accessModes: ["ReadWriteOnce"],
    }, {
      name: "pvc-d8b4475f-2c47-486e-9b57-43ae006f9b59",
      labels: { "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1" },
    }),
    want: {
      csi: {
        driver: "csi.vsphere.vmware.com",
        volumeHandle: VMDK,
        fsType: "ext4",
        readOnly: false,
        volumeAttributes: {},
      },
      accessModes: ["ReadWriteOnce"],
    },
  },
  // plugins/openstack_cinder.go and plugins/portworx.go: the volume ID is the handle.
  {
    name: "cinder volume",
    pv: inTreePv({
      cinder: { volumeID: "d1d2f4a0", fsType: "ext4", readOnly: true },
      accessModes: ["ReadWriteMany"],
    }),
    want: {
      csi: {
        driver: "cinder.csi.openstack.org",
        volumeHandle: "d1d2f4a0",
        fsType: "ext4",
        readOnly: true,
        volumeAttributes: {},
      },
      accessModes: ["ReadWriteMany"],
    },
  },
  {
    name: "portworx volume",
    pv: inTreePv({ portworxVolume: { volumeID: "pwx-1" } }),
    want: {
      csi: {
        driver: "pxd.portworx.com",
        volumeHandle: "pwx-1",
        fsType: "",
        readOnly: false,
        volumeAttributes: {},
      },
    },
  },
];

for (const row of rows) {
  Deno.test(`translateInTreePersistentVolume() ${row.name}`, () => {
    assert.ok(isMigratablePersistentVolume(row.pv));
    const before = structuredClone(row.pv);
    if (typeof row.want === "string") {
      assert.throws(() => translateInTreePersistentVolume(row.pv), { message: row.want });
    } else {
      const got = translateInTreePersistentVolume(row.pv);
      assert.deepEqual(got.spec, row.want);
      assert.deepEqual(got.metadata, row.pv.metadata);
    }
    assert.deepEqual(row.pv, before, "the input PV is not modified");
  });
}

Deno.test("MIGRATION_DRIVER_NAMES holds the drivers of all seven csi-translation-lib plugins", () => {
  assert.deepEqual([...MIGRATION_DRIVER_NAMES].sort(), [
    "cinder.csi.openstack.org",
    "csi.vsphere.vmware.com",
    "disk.csi.azure.com",
    "ebs.csi.aws.com",
    "file.csi.azure.com",
    "pd.csi.storage.gke.io",
    "pxd.portworx.com",
  ]);
});

Deno.test("repairVolumeHandle() keeps Azure and vSphere handles as they are", () => {
  // Only GCE PD repairs handles; the other plugins' RepairVolumeHandle returns its input.
  for (
    const [driver, handle] of [
      ["disk.csi.azure.com", DISK_URI],
      ["file.csi.azure.com", "rg#account#share#pv1#ns"],
      ["csi.vsphere.vmware.com", VMDK],
    ]
  ) {
    assert.equal(repairVolumeHandle(driver!, handle!, "node-1"), handle);
  }
});
