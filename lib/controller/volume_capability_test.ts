import assert from "node:assert/strict";
import { getVolumeCapability, getVolumeHandle, toCsiAccessMode } from "./volume_capability.ts";
import type { PersistentVolumeSpec } from "../kube/types.ts";

function spec(
  accessModes: string[],
  extra: Partial<PersistentVolumeSpec> = {},
): PersistentVolumeSpec {
  return { accessModes, csi: { driver: "d", volumeHandle: "h" }, ...extra };
}

// external-attacher pkg/controller/util_test.go TestGetVolumeCapabilities, default fsType ext4.
const rows: {
  name: string;
  spec: PersistentVolumeSpec;
  snmw?: boolean;
  want?: unknown;
  error?: string;
}[] = [
  {
    name: "RWX",
    spec: spec(["ReadWriteMany"]),
    want: {
      mount: { fsType: "ext4", mountFlags: [] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
  },
  {
    name: "Block RWX",
    spec: spec(["ReadWriteMany"], { volumeMode: "Block" }),
    want: { block: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } },
  },
  {
    name: "RWX + specified fsType",
    spec: spec(["ReadWriteMany"], { csi: { driver: "d", volumeHandle: "h", fsType: "ext3" } }),
    want: {
      mount: { fsType: "ext3", mountFlags: [] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
  },
  {
    name: "RWO",
    spec: spec(["ReadWriteOnce"]),
    want: { mount: { fsType: "ext4", mountFlags: [] }, accessMode: { mode: "SINGLE_NODE_WRITER" } },
  },
  {
    name: "Block RWO",
    spec: spec(["ReadWriteOnce"], { volumeMode: "Block" }),
    want: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
  },
  {
    name: "ROX",
    spec: spec(["ReadOnlyMany"]),
    want: {
      mount: { fsType: "ext4", mountFlags: [] },
      accessMode: { mode: "MULTI_NODE_READER_ONLY" },
    },
  },
  {
    name: "RWX + anything",
    spec: spec(["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce"]),
    want: {
      mount: { fsType: "ext4", mountFlags: [] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
  },
  {
    name: "mount options",
    spec: spec(["ReadWriteMany"], { mountOptions: ["first", "second"] }),
    want: {
      mount: { fsType: "ext4", mountFlags: ["first", "second"] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
  },
  {
    name: "ROX+RWO",
    spec: spec(["ReadOnlyMany", "ReadWriteOnce"]),
    error: "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume",
  },
  { name: "nothing", spec: spec([]), error: "unsupported AccessMode combination: []" },
  {
    name: "RWX with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec(["ReadWriteMany"]),
    snmw: true,
    want: {
      mount: { fsType: "ext4", mountFlags: [] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
  },
  {
    name: "ROX + RWO with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec(["ReadOnlyMany", "ReadWriteOnce"]),
    snmw: true,
    error: "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume",
  },
  {
    name: "ROX + RWOP with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec(["ReadOnlyMany", "ReadWriteOncePod"]),
    snmw: true,
    error:
      "Kubernetes does not support use of ReadWriteOncePod with other access modes on the same PersistentVolume",
  },
  {
    name: "RWO + RWOP with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec(["ReadWriteOnce", "ReadWriteOncePod"]),
    snmw: true,
    error:
      "Kubernetes does not support use of ReadWriteOncePod with other access modes on the same PersistentVolume",
  },
  {
    name: "ROX with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec(["ReadOnlyMany"]),
    snmw: true,
    want: {
      mount: { fsType: "ext4", mountFlags: [] },
      accessMode: { mode: "MULTI_NODE_READER_ONLY" },
    },
  },
  {
    name: "RWO with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec(["ReadWriteOnce"]),
    snmw: true,
    want: {
      mount: { fsType: "ext4", mountFlags: [] },
      accessMode: { mode: "SINGLE_NODE_MULTI_WRITER" },
    },
  },
  {
    name: "RWOP with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec(["ReadWriteOncePod"]),
    snmw: true,
    want: {
      mount: { fsType: "ext4", mountFlags: [] },
      accessMode: { mode: "SINGLE_NODE_SINGLE_WRITER" },
    },
  },
  {
    name: "nothing with SINGLE_NODE_MULTI_WRITER capable driver",
    spec: spec([]),
    snmw: true,
    error: "unsupported AccessMode combination: []",
  },
];

for (const row of rows) {
  Deno.test(`getVolumeCapability() ${row.name}`, () => {
    const opts = { supportsSingleNodeMultiWriter: row.snmw ?? false, defaultFsType: "ext4" };
    if (row.error) {
      assert.throws(() => getVolumeCapability(row.spec, opts), { message: row.error });
    } else {
      assert.deepEqual(getVolumeCapability(row.spec, opts), row.want);
    }
  });
}

Deno.test("toCsiAccessMode() maps RWOP without SINGLE_NODE_MULTI_WRITER to SINGLE_NODE_WRITER", () => {
  assert.equal(toCsiAccessMode(["ReadWriteOncePod"], false), "SINGLE_NODE_WRITER");
});

Deno.test("getVolumeHandle() returns the handle and read-only flag", () => {
  assert.deepEqual(getVolumeHandle({ driver: "d", volumeHandle: "name" }), {
    volumeHandle: "name",
    readOnly: false,
  });
  assert.deepEqual(getVolumeHandle({ driver: "d", volumeHandle: "name", readOnly: true }), {
    volumeHandle: "name",
    readOnly: true,
  });
  assert.throws(() => getVolumeHandle(null), { message: "csi source was nil" });
});
