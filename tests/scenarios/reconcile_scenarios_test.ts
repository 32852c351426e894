/**
 * The Go attacher's TestCSIHandlerReconcileVA scenarios (external-attacher
 * `pkg/controller/csi_handler_test.go`; `ReconcileVA` in `csi_handler.go`), by their Go test
 * names, plus paging and filtering rows. The reconciler compares ListVolumes' published nodes with
 * `status.attached` and force-syncs the VAs that differ; it writes nothing itself.
 *
 * Then rows where the ListVolumes answer races an attach or a detach (no second driver call), and
 * rows where the difference is real but the VA is busy or changing when a pass compares (repaired
 * by the next pass).
 */

import assert from "node:assert/strict";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import type { CsiNode, VolumeAttachment } from "../../lib/kube/types.ts";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type {
  CsiCallPoint,
  Scenario,
  ScenarioResult,
  StepContext,
} from "../../testkit/harness/scenario_harness.ts";
import {
  DEFAULT_DRIVER_CAPABILITIES,
  runScenario,
} from "../../testkit/harness/scenario_harness.ts";
import {
  ADD_FIN_ANN,
  addFinAnnFor,
  ANN,
  ATT,
  csiNode,
  deleted,
  DET,
  FIN,
  forUid,
  gcePdPv,
  NODE_ID_ANN,
  pv,
  REATT,
  va,
  vaInline,
  vaMetaPatch,
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
    expectedActions: [REATT],
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
    reconcilerOptions: { maxEntries: 1 },
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
    expectedActions: [REATT],
  },
  {
    // The Go attacher skips inline VAs here (RepairVolumeHandle fails for drivers without an
    // in-tree counterpart); ours compares them like PV-backed ones.
    name: "inline VA attached, driver reports it unpublished -> re-attached",
    initialObjects: [vaInline(true, FIN, ANN), csiNode()],
    expectedCsiCalls: [listVolumes({}), { ...publish, expect: { volumeId: "handle1" } }],
    expectedActions: [REATT],
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

/** Another controller's finalizer: it keeps a deleted VA in the server after ours is removed. */
const KEEP = "example.com/keep";

/** A deleted, attached VA with our finalizer and {@link KEEP}. */
function deletedVaKept(): VolumeAttachment {
  return with_(deleted(va(true, FIN, ANN)), (o) => o.metadata.finalizers = [FIN, KEEP]);
}

/** −fin with {@link KEEP} left. */
const REMOVE_FIN_KEEP = vaMetaPatch({ metadata: { finalizers: [KEEP] } });

/** The publish, unpublish and ListVolumes calls the driver got, in order. */
function driverCalls(result: ScenarioResult): string[] {
  return result.csi.calls.map((c) => c.method).filter((m) =>
    m === "ListVolumes" || m === "ControllerPublishVolume" || m === "ControllerUnpublishVolume"
  );
}

/** `fn` for the first call of `method` in `phase` only. */
function onFirst(
  method: CsiCallPoint["method"],
  phase: CsiCallPoint["phase"],
  fn: (ctx: StepContext) => Promise<void>,
): (call: CsiCallPoint, ctx: StepContext) => Promise<void> {
  let done = false;
  return async (call, ctx) => {
    if (done || call.method !== method || call.phase !== phase) return;
    done = true;
    await fn(ctx);
  };
}

/** Syncs every queued VA, letting the cache see each write, until nothing is queued. */
async function syncAndWatch(ctx: StepContext): Promise<void> {
  while (await ctx.stepVolumeAttachment()) ctx.deliverWatchEvents();
}

const raceScenarios: Scenario[] = [
  {
    // The pass compares while the driver has published but `attached: true` is not yet written:
    // the Go attacher forces a sync here, which publishes again once the attach has finished.
    name: "ListVolumes answers while an attach is in flight -> no second publish",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    between: (ctx) => ctx.deliverWatchEvents(),
    duringCsiCall: onFirst("ControllerPublishVolume", "after", (ctx) => ctx.reconcile()),
    expectedCsiCalls: [
      publish,
      listVolumes({ handle1: ["nodeID1"] }),
      listVolumes({ handle1: ["nodeID1"] }),
    ],
    expectedActions: [ADD_FIN_ANN, ATT],
    check: (result) =>
      assert.deepEqual(driverCalls(result), [
        "ControllerPublishVolume",
        "ListVolumes",
        "ListVolumes",
      ]),
  },
  {
    // The driver answers before the attach; the attach is recorded (and seen by the cache)
    // before the answer is compared: `attached: true` without a publication, in appearance only.
    name: "ListVolumes answer from before an attach, compared after it -> no second publish",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    between: async (ctx) => {
      if (ctx.step === 0) await ctx.reconcile();
    },
    duringCsiCall: onFirst("ListVolumes", "after", syncAndWatch),
    expectedCsiCalls: [listVolumes({}), publish, listVolumes({ handle1: ["nodeID1"] })],
    expectedActions: [ADD_FIN_ANN, ATT],
    check: (result) =>
      assert.deepEqual(driverCalls(result), [
        "ListVolumes",
        "ControllerPublishVolume",
        "ListVolumes",
      ]),
  },
  {
    // The pass compares while the driver has unpublished but the VA still says attached.
    name: "ListVolumes answers while a detach is in flight -> no second unpublish",
    initialObjects: [pv(), csiNode()],
    updatedVA: deletedVaKept(),
    between: (ctx) => ctx.deliverWatchEvents(),
    duringCsiCall: onFirst("ControllerUnpublishVolume", "after", (ctx) => ctx.reconcile()),
    expectedCsiCalls: [unpublish, listVolumes({}), listVolumes({})],
    expectedActions: [REMOVE_FIN_KEEP, DET],
    check: (result) =>
      assert.deepEqual(driverCalls(result), [
        "ControllerUnpublishVolume",
        "ListVolumes",
        "ListVolumes",
      ]),
  },
  {
    // The driver answers before the detach; the detach is recorded before the answer is
    // compared: a publication without `attached: true`, in appearance only.
    name: "ListVolumes answer from before a detach, compared after it -> no second unpublish",
    initialObjects: [pv(), csiNode()],
    updatedVA: deletedVaKept(),
    between: async (ctx) => {
      if (ctx.step === 0) await ctx.reconcile();
    },
    duringCsiCall: onFirst("ListVolumes", "after", syncAndWatch),
    expectedCsiCalls: [listVolumes({ handle1: ["nodeID1"] }), unpublish, listVolumes({})],
    expectedActions: [REMOVE_FIN_KEEP, DET],
    check: (result) =>
      assert.deepEqual(driverCalls(result), [
        "ListVolumes",
        "ControllerUnpublishVolume",
        "ListVolumes",
      ]),
  },
  {
    // The detach is done but its writes have not reached the cache when the pass compares: the
    // forced sync finds a cached VA older than the handler's own finalizer removal and skips.
    name: "detach done, cache not caught up when the pass compares -> no second unpublish",
    initialObjects: [pv(), csiNode()],
    updatedVA: with_(deleted(va(true, FIN, ANN)), (o) => o.metadata.uid = "uid-1"),
    expectedCsiCalls: [unpublish, listVolumes({})],
    // Our finalizer was its last one: the removal deleted the VA, no status patch follows.
    expectedActions: [vaMetaPatch({ metadata: { finalizers: null, uid: "uid-1" } })],
    check: (result) =>
      assert.deepEqual(driverCalls(result), ["ControllerUnpublishVolume", "ListVolumes"]),
  },
  {
    // A real difference (attached, but not published) on a VA that changes while ListVolumes
    // runs: that pass leaves it, the next one repairs it.
    name: "real difference, VA changed during ListVolumes -> repaired by the next pass",
    initialObjects: [with_(va(true, FIN, ANN), (o) => o.metadata.uid = "uid-1"), pv(), csiNode()],
    between: async (ctx) => {
      if (ctx.step === 0) await ctx.reconcile();
    },
    duringCsiCall: onFirst("ListVolumes", "after", async (ctx) => {
      ctx.server.patch(VOLUME_ATTACHMENTS, "pv1-node1", {
        type: "merge",
        body: { metadata: { labels: { team: "a" } } },
      });
      ctx.deliverWatchEvents();
      await syncAndWatch(ctx);
    }),
    expectedCsiCalls: [listVolumes({}), listVolumes({}), publish],
    expectedActions: [forUid(REATT, "uid-1")],
    check: (result) =>
      assert.deepEqual(driverCalls(result), [
        "ListVolumes",
        "ListVolumes",
        "ControllerPublishVolume",
      ]),
  },
  {
    // A real difference on a VA that is queued when the pass compares (e.g. by a resync): its
    // sync finds nothing to do, and the next pass repairs it.
    name: "real difference, VA queued during the pass -> repaired by the next pass",
    initialObjects: [pv(), csiNode()],
    updatedVA: va(true, FIN, ANN),
    between: async (ctx) => {
      if (ctx.step === 0) await ctx.reconcile();
    },
    expectedCsiCalls: [listVolumes({}), listVolumes({}), publish],
    expectedActions: [REATT],
    check: (result) =>
      assert.deepEqual(driverCalls(result), [
        "ListVolumes",
        "ListVolumes",
        "ControllerPublishVolume",
      ]),
  },
  {
    // The status write reached the server but its answer was lost: the handler keeps the
    // publish as unrecorded, the cache then shows the VA attached. When the driver stops listing
    // the volume, the forced sync must really publish, not reuse that earlier answer.
    name: "real difference after a status write whose answer was lost -> the forced sync publishes",
    initialObjects: [pv(), csiNode()],
    addedVA: with_(va(false), (o) => o.metadata.uid = "uid-1"),
    faults: [{
      verb: "patch",
      resource: "volumeattachments",
      subresource: "status",
      status: 500,
      applyChange: true,
    }],
    between: (ctx) => ctx.deliverWatchEvents(),
    expectedCsiCalls: [publish, listVolumes({}), publish],
    expectedActions: [
      addFinAnnFor("uid-1"),
      forUid(ATT, "uid-1"),
      forUid(REATT, "uid-1"),
    ],
    check: (result) =>
      assert.deepEqual(driverCalls(result), [
        "ControllerPublishVolume",
        "ListVolumes",
        "ControllerPublishVolume",
      ]),
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

for (const s of raceScenarios) {
  Deno.test(`CSI handler reconcile race: ${s.name}`, async () => {
    const result = await runScenario({
      ...s,
      reconcile: true,
      driverCapabilities: RECONCILE_CAPABILITIES,
    });
    assert.equal(result.reconcileError, undefined);
  });
}
