/**
 * Attaches that end on a retry, beyond the Go attacher's table: objects that appear after the VA
 * (its PV, the node's driver), a status write that fails after the driver published (retried
 * with the finalizer kept, published again only when the request changed), and a cache that
 * shows the VA as it was before the attach's own write.
 */

import assert from "node:assert/strict";
import { PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { CsiNode, VolumeAttachment } from "../../lib/kube/types.ts";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import {
  ADD_FIN_ANN,
  addFinAnnFor,
  ATT,
  ATT_CLR,
  attachError,
  csiNode,
  DRIVER,
  FIN,
  forUid,
  pv,
  va,
  with_,
} from "../../testkit/harness/fixtures.ts";
import type {
  Scenario,
  ScenarioResult,
  TimelineEntry,
} from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";

function publish(expect: Record<string, unknown> = {}): ScriptedCall {
  return {
    method: "ControllerPublishVolume",
    expect: { volumeId: "handle1", nodeId: "nodeID1", readonly: false, ...expect },
  };
}

type ApiEntry = Extract<TimelineEntry, { kind: "api" }>;
type CsiEntry = Extract<TimelineEntry, { kind: "csi" }>;

/** Asserts that the VA carried our finalizer in every stored state and at every publish. */
function assertFinalizerKept(result: ScenarioResult): void {
  const states = result.timeline.filter((e): e is ApiEntry =>
    e.kind === "api" && e.resource === "volumeattachments"
  );
  assert.ok(states.length > 0);
  for (const s of states) assert.ok(s.finalizers.includes(FIN), `VA lost its finalizer: ${s.type}`);
  const publishes = result.timeline.filter((e): e is CsiEntry =>
    e.kind === "csi" && e.method === "ControllerPublishVolume"
  );
  for (const p of publishes) assert.deepEqual(p.vaFinalizers, [[FIN]]);
}

/** The attached VA as the cache still shows it right after the attach: stale, with its uid. */
const staleVA = with_(va(false), (o) => o.metadata.uid = "uid-1");
let staleResynced = false;

const scenarios: Scenario[] = [
  {
    name: "VA synced again from a cache older than its own attach -> no second publish",
    initialObjects: [pv(), csiNode()],
    addedVA: staleVA,
    between: ({ actions, vaInformer }) => {
      // The metadata patch queues the VA again; the watch has not yet delivered the status write.
      if (actions().length === 2 && !staleResynced) {
        staleResynced = true;
        vaInformer.emitUpdate(staleVA, staleVA);
      }
    },
    expectedActions: [addFinAnnFor("uid-1"), forUid(ATT, "uid-1")],
    expectedCsiCalls: [publish()],
    check: () => assert.ok(staleResynced, "the stale VA was synced again"),
  },
  {
    name: "VA before its PV -> not found, then attached once the PV exists",
    initialObjects: [csiNode()],
    addedVA: va(false),
    between: ({ actions, server, pvInformer }) => {
      if (actions().length === 1 && !pvInformer.get("pv1")) {
        server.create(PERSISTENT_VOLUMES, pv());
        pvInformer.set(pv());
      }
    },
    expectedActions: [attachError('persistentvolume "pv1" not found'), ADD_FIN_ANN, ATT_CLR],
    expectedCsiCalls: [publish()],
  },
  {
    name: "VA before the node's driver registered -> CSINode error, then attached",
    initialObjects: [pv()],
    addedVA: va(false),
    between: ({ actions, server, csiNodeInformer }) => {
      if (actions().length === 1 && !csiNodeInformer.get("node1")) {
        server.create("csinodes", csiNode());
        csiNodeInformer.set(csiNode());
      }
    },
    expectedActions: [
      attachError('csinode.storage.k8s.io "node1" not found'),
      ADD_FIN_ANN,
      ATT_CLR,
    ],
    expectedCsiCalls: [publish()],
  },
  {
    // The VA has no uid (as in the Go fixtures), so nothing ties the earlier publish to it: each
    // retry publishes again.
    name: "status patch fails after a successful publish -> retried, finalizer kept throughout",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    faults: [{
      verb: "patch",
      resource: "volumeattachments",
      subresource: "status",
      status: 500,
      times: 2,
    }],
    expectedActions: [ADD_FIN_ANN, ATT, ADD_FIN_ANN, ATT, ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish(), publish(), publish()],
    check: (result) => {
      assertFinalizerKept(result);
      const stored = result.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "pv1-node1");
      assert.deepEqual(stored.metadata.finalizers, [FIN]);
      assert.equal(stored.status?.attached, true);
    },
  },
  {
    // As the row above, with a uid as every real VA has: the driver confirmed the publish, so
    // the retries only write the status (the Go attacher publishes again each time).
    name: "status patch fails after a successful publish -> retries record it, no second publish",
    initialObjects: [pv(), csiNode()],
    addedVA: with_(va(false), (o) => o.metadata.uid = "uid-1"),
    faults: [{
      verb: "patch",
      resource: "volumeattachments",
      subresource: "status",
      status: 500,
      times: 2,
    }],
    expectedActions: [
      addFinAnnFor("uid-1"),
      forUid(ATT, "uid-1"),
      addFinAnnFor("uid-1"),
      forUid(ATT, "uid-1"),
      addFinAnnFor("uid-1"),
      forUid(ATT, "uid-1"),
    ],
    expectedCsiCalls: [publish()],
    check: (result) => {
      assertFinalizerKept(result);
      const stored = result.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "pv1-node1");
      assert.deepEqual(stored.metadata.finalizers, [FIN]);
      assert.equal(stored.status?.attached, true);
    },
  },
  {
    // The earlier publish answered another request (the node's driver registered again with a
    // new node ID): the retry publishes with the new one.
    name: "status patch fails, then the node ID changes -> the retry publishes again",
    initialObjects: [pv(), csiNode()],
    addedVA: with_(va(false), (o) => o.metadata.uid = "uid-1"),
    faults: [{ verb: "patch", resource: "volumeattachments", subresource: "status", status: 500 }],
    between: ({ actions, server, csiNodeInformer }) => {
      const node = csiNodeInformer.get("node1");
      if (actions().length === 2 && node?.spec.drivers?.[0]?.nodeID === "nodeID1") {
        const renamed = with_(
          server.get<CsiNode>("csinodes", "node1"),
          (o) => o.spec.drivers = [{ name: DRIVER, nodeID: "nodeID2" }],
        );
        csiNodeInformer.set(server.update("csinodes", renamed));
      }
    },
    expectedActions: [
      addFinAnnFor("uid-1"),
      forUid(ATT, "uid-1"),
      addFinAnnFor("uid-1", "nodeID2"),
      forUid(ATT, "uid-1"),
    ],
    expectedCsiCalls: [publish(), publish({ nodeId: "nodeID2" })],
  },
];

for (const s of scenarios) {
  Deno.test(`attach retry: ${s.name}`, async () => {
    await runScenario(s);
  });
}
