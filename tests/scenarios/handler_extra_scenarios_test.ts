/**
 * Scenarios users run into that the Go table does not cover: objects that appear late, writes
 * that fail after the driver acted, many VolumeAttachments at once, and the PV spec shapes that
 * change the CSI request or give an error.
 */

import assert from "node:assert/strict";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import type { Action } from "../../testkit/harness/fixtures.ts";
import {
  ADD_FIN_ANN,
  addFinAnnFor,
  ANN,
  ATT,
  ATT_CLR,
  attachError,
  csiNode,
  csiNodeEmpty,
  deleted,
  DET,
  DRIVER,
  FIN,
  forUid,
  NODE_ID_ANN,
  pv,
  va,
  vaInline,
  vaMetaPatch,
  vaStatusPatch,
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

function unpublish(expect: Record<string, unknown> = {}): ScriptedCall {
  return {
    method: "ControllerUnpublishVolume",
    expect: { volumeId: "handle1", nodeId: "nodeID1", ...expect },
  };
}

/** An in-tree AWS EBS PV `pv1` (RWX, ext4) with our finalizer. */
function ebsPv(volumeID: string): PersistentVolume {
  return with_(pv(), (o) => {
    o.spec.csi = undefined;
    o.spec.awsElasticBlockStore = { volumeID, fsType: "ext4" };
  });
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
    name: "detach of a VA with another finalizer -> only ours removed, status patched",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(with_(va(true, FIN, ANN), (o) => o.metadata.finalizers!.push("other/fin"))),
    expectedActions: [vaMetaPatch({ metadata: { finalizers: ["other/fin"] } }), DET],
    expectedCsiCalls: [unpublish()],
    check: ({ server }) => {
      const stored = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "pv1-node1");
      assert.deepEqual(stored.metadata.finalizers, ["other/fin"]);
      assert.equal(stored.status?.attached, false);
    },
  },
  {
    name: "detach when the CSINode lost the driver -> node ID from the annotation",
    initialObjects: [pv(), csiNodeEmpty()],
    addedVA: deleted(va(true, FIN, { [NODE_ID_ANN]: "annotatedNodeID" })),
    expectedActions: [vaMetaPatch({ metadata: { finalizers: null } }), DET],
    expectedCsiCalls: [unpublish({ nodeId: "annotatedNodeID" })],
  },
  {
    name: "uncertain attach (finalizer, attached=false) deleted -> unpublished before release",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(false, FIN, ANN)),
    // attached is already false: the status patch has nothing to change but is still sent.
    expectedActions: [vaMetaPatch({ metadata: { finalizers: null } }), vaStatusPatch({})],
    expectedCsiCalls: [unpublish()],
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
  Deno.test(`handler extra: ${s.name}`, async () => {
    await runScenario(s);
  });
}

Deno.test("handler extra: 200 VAs on 20 nodes, 10 workers -> each published exactly once", async () => {
  const nodes = 20;
  const volumes = 200;
  const nodeName = (n: number) => `node-${n}`;
  const nodeId = (n: number) => `nodeID-${n}`;
  const driver = new ExampleDriver({}, {
    name: DRIVER,
    nodeIds: Array.from({ length: nodes }, (_, n) => nodeId(n)),
  });
  const csiNodes: CsiNode[] = [];
  for (let n = 0; n < nodes; n++) {
    csiNodes.push(with_(csiNode(), (o) => {
      o.metadata.name = nodeName(n);
      o.spec.drivers = [
        { name: "other.csi.example.com", nodeID: `other-${n}` },
        { name: DRIVER, nodeID: nodeId(n) },
      ];
    }));
  }
  const pvs: PersistentVolume[] = [];
  const vas: VolumeAttachment[] = [];
  const expectedActions: Action[] = [];
  const expectedPublications: { volumeId: string; nodeId: string }[] = [];
  for (let i = 0; i < volumes; i++) {
    const n = i % nodes;
    const pvName = `pv-${i}`;
    const vaName = `${pvName}-${nodeName(n)}`;
    const handle = `vol-${String(i).padStart(3, "0")}`;
    driver.createVolume(handle);
    pvs.push(with_(pv(null), (o) => {
      o.metadata.name = pvName;
      o.spec.csi!.volumeHandle = handle;
    }));
    vas.push(with_(va(false), (o) => {
      o.metadata.name = vaName;
      o.spec.nodeName = nodeName(n);
      o.spec.source = { persistentVolumeName: pvName };
    }));
    expectedActions.push(
      {
        verb: "patch",
        resource: "persistentvolumes",
        name: pvName,
        patchType: "json",
        body: [
          { op: "test", path: "/metadata/finalizers", value: null },
          { op: "add", path: "/metadata/finalizers", value: [FIN] },
        ],
      },
      vaMetaPatch({
        metadata: { annotations: { [NODE_ID_ANN]: nodeId(n) }, finalizers: [FIN] },
      }, vaName),
      vaStatusPatch({
        status: {
          attachError: null,
          attached: true,
          attachmentMetadata: { devicePath: `/dev/example/${handle}` },
        },
      }, vaName),
    );
    expectedPublications.push({ volumeId: handle, nodeId: nodeId(n) });
  }
  const result = await runScenario({
    name: "flood",
    initialObjects: [...csiNodes, ...pvs],
    addedVAs: vas,
    permissiveDriver: driver,
    workers: 10, // the --worker-threads default
    expectedActions,
  });
  const calls = result.csi.callsOf("ControllerPublishVolume");
  assert.equal(calls.length, volumes);
  const keys = new Set(calls.map((c) => `${c.request.volumeId}@${c.request.nodeId}`));
  assert.equal(keys.size, volumes, "one publish per volume and node");
  assert.deepEqual(
    driver.publications().map((p) => ({ volumeId: p.volumeId, nodeId: p.nodeId })),
    expectedPublications.sort((a, b) => a.volumeId.localeCompare(b.volumeId)),
  );
  for (const obj of result.server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items) {
    assert.equal(obj.status?.attached, true, obj.metadata.name);
    assert.deepEqual(obj.metadata.finalizers, [FIN]);
  }
});
