/**
 * What the PV and the VA as the attach finds them change in its writes and its
 * ControllerPublishVolume request, beyond the Go attacher's table: finalizers and annotations
 * already there, block and mount capabilities, access modes and sources that give an error, and
 * in-tree AWS EBS PVs translated as csi-translation-lib does.
 */

import assert from "node:assert/strict";
import { PERSISTENT_VOLUMES } from "../../lib/kube/api.ts";
import type { PersistentVolume } from "../../lib/kube/types.ts";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import {
  ADD_FIN_ANN,
  ATT,
  attachError,
  csiNode,
  FIN,
  NODE_ID_ANN,
  pv,
  va,
  vaInline,
  vaMetaPatch,
  with_,
} from "../../testkit/harness/fixtures.ts";
import type { Scenario } from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";

function publish(expect: Record<string, unknown> = {}): ScriptedCall {
  return {
    method: "ControllerPublishVolume",
    expect: { volumeId: "handle1", nodeId: "nodeID1", readonly: false, ...expect },
  };
}

/** An in-tree AWS EBS PV `pv1` (RWX, ext4) with our finalizer. */
function ebsPv(volumeID: string): PersistentVolume {
  return with_(pv(), (o) => {
    o.spec.csi = undefined;
    o.spec.awsElasticBlockStore = { volumeID, fsType: "ext4" };
  });
}

const scenarios: Scenario[] = [
  {
    name: "PV with other finalizers -> ours appended with a JSON patch",
    initialObjects: [pv(["kubernetes.io/pv-protection"]), csiNode()],
    addedVA: va(false),
    expectedActions: [
      {
        verb: "patch",
        resource: "persistentvolumes",
        name: "pv1",
        patchType: "json",
        body: [{ op: "add", path: "/metadata/finalizers/-", value: FIN }],
      },
      ADD_FIN_ANN,
      ATT,
    ],
    expectedCsiCalls: [publish()],
    check: ({ server }) => {
      const stored = server.get<PersistentVolume>(PERSISTENT_VOLUMES, "pv1");
      assert.deepEqual(stored.metadata.finalizers, ["kubernetes.io/pv-protection", FIN]);
    },
  },
  {
    name: "VA with finalizer and a stale node ID -> only the annotation is patched",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false, FIN, { [NODE_ID_ANN]: "oldNodeID" }),
    expectedActions: [
      vaMetaPatch({ metadata: { annotations: { [NODE_ID_ANN]: "nodeID1" } } }),
      ATT,
    ],
    expectedCsiCalls: [publish()],
  },
  {
    name: "block PV with mount options -> block capability, options ignored",
    initialObjects: [
      with_(pv(), (o) => {
        o.spec.volumeMode = "Block";
        o.spec.mountOptions = ["ro"];
        o.spec.csi!.fsType = "xfs";
      }),
      csiNode(),
    ],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [
      publish({ volumeCapability: { block: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } } }),
    ],
  },
  {
    name: "PV with fsType and mount options -> mount capability carries them",
    initialObjects: [
      with_(pv(), (o) => {
        o.spec.accessModes = ["ReadOnlyMany"];
        o.spec.mountOptions = ["noatime", "discard"];
        o.spec.csi!.fsType = "xfs";
      }),
      csiNode(),
    ],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [
      publish({
        volumeCapability: {
          mount: { fsType: "xfs", mountFlags: ["noatime", "discard"] },
          accessMode: { mode: "MULTI_NODE_READER_ONLY" },
        },
      }),
    ],
  },
  {
    name: "ReadOnlyMany and ReadWriteOnce on one PV -> error, no finalizer, no publish",
    initialObjects: [
      with_(pv(), (o) => o.spec.accessModes = ["ReadOnlyMany", "ReadWriteOnce"]),
      csiNode(),
    ],
    addedVA: va(false),
    expectedActions: [
      attachError(
        "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume",
      ),
    ],
  },
  {
    name: "PV with a source that is neither CSI nor migratable -> error",
    initialObjects: [
      with_(pv(), (o) => {
        o.spec.csi = undefined;
        o.spec.nfs = { server: "nfs.example.com", path: "/export" };
      }),
      csiNode(),
    ],
    addedVA: va(false),
    expectedActions: [attachError("pv spec contained non-csi source that was not migrated")],
  },
  {
    name: "inline spec without CSI source -> error",
    initialObjects: [csiNode()],
    addedVA: with_(vaInline(false), (o) => o.spec.source.inlineVolumeSpec!.csi = null),
    expectedActions: [attachError("inline volume spec contains nil CSI source")],
  },
  {
    // csi-translation-lib's EBS translation keeps the access modes (only GCE PD maps RWX to RWO)
    // and always sets the partition attribute.
    name: "migrated AWS EBS PV -> handle from the volume ID, access modes kept, partition set",
    initialObjects: [ebsPv("aws://us-east-1a/vol-0123456789abcdef0"), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [
      publish({
        volumeId: "vol-0123456789abcdef0",
        volumeContext: { partition: "0" },
        volumeCapability: {
          mount: { fsType: "ext4" },
          accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
        },
      }),
    ],
  },
  {
    name: "migrated AWS EBS PV with a malformed volume ID -> translation error",
    initialObjects: [ebsPv("aws://us-east-1a/disk-1"), csiNode()],
    addedVA: va(false),
    expectedActions: [
      attachError(
        "failed to translate in tree pv to CSI: failed to translate Kubernetes ID to EBS " +
          "Volume ID Invalid format for AWS volume (aws://us-east-1a/disk-1)",
      ),
    ],
  },
];

for (const s of scenarios) {
  Deno.test(`attach request: ${s.name}`, async () => {
    await runScenario(s);
  });
}
