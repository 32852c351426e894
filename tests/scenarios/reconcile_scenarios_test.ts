/**
 * The Go attacher's TestCSIHandlerReconcileVA scenarios (external-attacher
 * `pkg/controller/csi_handler_test.go`; `ReconcileVA` in `csi_handler.go`), by their Go test
 * names, plus paging and filtering rows. The reconciler compares ListVolumes' published nodes with
 * `status.attached` and force-syncs the VAs that differ; it writes nothing itself.
 */

import assert from "node:assert/strict";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import type { CsiNode, VolumeAttachment } from "../../attacher/kube/types.ts";
import type { Scenario } from "../../testkit/harness/scenario_harness.ts";
import {
  DEFAULT_DRIVER_CAPABILITIES,
  runScenario,
} from "../../testkit/harness/scenario_harness.ts";
import {
  ANN,
  csiNode,
  deleted,
  FIN,
  gcePdPv,
  NODE_ID_ANN,
  pv,
  va,
  vaInline,
  vaStatusPatch,
  with_,
} from "../../testkit/harness/fixtures.ts";

const RECONCILE_CAPABILITIES = [
  ...DEFAULT_DRIVER_CAPABILITIES,
  "LIST_VOLUMES",
  "LIST_VOLUMES_PUBLISHED_NODES",
];

/** One ListVolumes page: volume ID → published node IDs. */
function listVolumes(
  published: Record<string, string[]>,
  page: { startingToken?: string; maxEntries?: number; nextToken?: string } = {},
): ScriptedCall {
  return {
    method: "ListVolumes",
    expect: { startingToken: page.startingToken ?? "", maxEntries: page.maxEntries ?? 0 },
    respond: {
      entries: Object.entries(published).map(([volumeId, nodes]) => ({
        volume: { volumeId },
        status: { publishedNodeIds: nodes },
      })),
      nextToken: page.nextToken ?? "",
    },
  };
}

const publish: ScriptedCall = {
  method: "ControllerPublishVolume",
  expect: { volumeId: "handle1", nodeId: "nodeID1", readonly: false, secrets: {} },
};

const unpublish: ScriptedCall = {
  method: "ControllerUnpublishVolume",
  expect: { volumeId: "handle1", nodeId: "nodeID1", secrets: {} },
};

const GCE_DRIVER = "pd.csi.storage.gke.io";
const GCE_FIN = "external-attacher/pd-csi-storage-gke-io";
const GCE_NODE_ID = "projects/proj/zones/testZone/instances/node1";

/** An attached VA of the GCE PD driver for `pv1` on `node1`, with the node ID annotation. */
function gceVa(nodeId: string): VolumeAttachment {
  return with_(va(true, GCE_FIN, { [NODE_ID_ANN]: nodeId }), (o) => o.spec.attacher = GCE_DRIVER);
}

function gceCsiNode(nodeId: string): CsiNode {
  return with_(csiNode(), (o) => o.spec.drivers = [{ name: GCE_DRIVER, nodeID: nodeId }]);
}

const scenarios: Scenario[] = [
  {
    name: "va attached actual state not attached",
    initialObjects: [va(true, FIN, ANN), pv(), csiNode()],
    expectedCsiCalls: [listVolumes({}), publish],
    // Already attached with finalizer and annotation: only the (empty) status patch.
    expectedActions: [vaStatusPatch({})],
  },
  {
    name: "va attached actual state attached",
    initialObjects: [va(true, "", ANN), pv()],
    expectedCsiCalls: [listVolumes({ handle1: ["nodeID1"] })],
    expectedActions: [],
  },
  {
    name: "va not attached actual state attached",
    // No CSINode: the node ID comes from the annotation; nothing to patch afterwards.
    initialObjects: [deleted(va(false, "", ANN)), pv()],
    expectedCsiCalls: [listVolumes({ handle1: ["nodeID1"] }), unpublish],
    expectedActions: [],
  },
  {
    name: "no volume attachments but existing lister response results in no action",
    expectedCsiCalls: [listVolumes({ handle1: ["nodeID1"] })],
    expectedActions: [],
  },
  // Not in the Go table (its fake lister had no pages or other drivers).
  {
    name: "paged ListVolumes -> every page is read before comparing",
    initialObjects: [va(true, "", ANN), pv()],
    handlerOptions: { maxEntries: 1 },
    expectedCsiCalls: [
      listVolumes({ other: ["nodeID1"] }, { maxEntries: 1, nextToken: "1" }),
      listVolumes({ handle1: ["nodeID1"] }, { maxEntries: 1, startingToken: "1" }),
    ],
    expectedActions: [],
  },
  {
    name: "VA of another driver -> not touched",
    initialObjects: [with_(va(true, "", ANN), (o) => o.spec.attacher = "other/driver"), pv()],
    expectedCsiCalls: [listVolumes({})],
    expectedActions: [],
  },
  {
    name: "volume published to another node -> VA re-attached",
    initialObjects: [va(true, FIN, ANN), pv(), csiNode()],
    expectedCsiCalls: [listVolumes({ handle1: ["nodeID2"] }), publish],
    expectedActions: [vaStatusPatch({})],
  },
  {
    // The Go attacher skips inline VAs here (RepairVolumeHandle fails for drivers without an
    // in-tree counterpart); ours compares them like PV-backed ones.
    name: "inline VA attached, driver reports it unpublished -> re-attached",
    initialObjects: [vaInline(true, FIN, ANN), csiNode()],
    expectedCsiCalls: [listVolumes({}), { ...publish, expect: { volumeId: "handle1" } }],
    expectedActions: [vaStatusPatch({})],
  },
  {
    name: "migrated GCE PD PV -> handle repaired from the node ID before comparing",
    driverName: GCE_DRIVER,
    initialObjects: [gceVa(GCE_NODE_ID), gcePdPv([GCE_FIN]), gceCsiNode(GCE_NODE_ID)],
    expectedCsiCalls: [listVolumes({ "projects/proj/zones/testZone/disks/testpd": [GCE_NODE_ID] })],
    expectedActions: [],
  },
  {
    // csi-translation-lib cannot repair the handle without a GCE node ID: the VA is skipped
    // rather than compared with a handle the driver never lists.
    name: "migrated GCE PD PV, node ID not in GCE form -> VA skipped",
    driverName: GCE_DRIVER,
    initialObjects: [gceVa("nodeID1"), gcePdPv([GCE_FIN]), gceCsiNode("nodeID1")],
    expectedCsiCalls: [listVolumes({})],
    expectedActions: [],
  },
  {
    name: "ListVolumes fails -> pass aborted, nothing forced",
    initialObjects: [va(true, FIN, ANN), pv(), csiNode()],
    expectedCsiCalls: [{
      method: "ListVolumes",
      error: { code: 14, message: "driver restarting" },
    }],
    expectedActions: [],
    check: ({ reconcileError }) => {
      assert.ok(reconcileError instanceof Error);
      assert.equal(
        reconcileError.message,
        "failed to ListVolumes: failed to list volumes: " +
          "rpc error: code = Unavailable desc = driver restarting",
      );
    },
  },
];

for (const s of scenarios) {
  Deno.test(`CSI handler reconcile: ${s.name}`, async () => {
    const result = await runScenario({
      ...s,
      reconcile: true,
      driverCapabilities: RECONCILE_CAPABILITIES,
    });
    if (!s.check) assert.equal(result.reconcileError, undefined);
  });
}
