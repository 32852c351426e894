import assert from "node:assert/strict";
import {
  CANARY,
  csiNode,
  type FixtureSpec,
  indexOfVa,
  nodeOf,
  persistentVolume,
  podName,
  pvcName,
  vaName,
  volumeAttachment,
} from "./fixtures.ts";

const spec: FixtureSpec = { driver: "example.csi.k8s.io", count: 120, nodes: 50, prefix: "b1-" };

Deno.test("volumeAttachment() spreads VAs over the nodes and names its own PV", () => {
  const va = volumeAttachment(spec, 73);
  assert.equal(va.metadata.name, "b1-va-00073");
  assert.equal(va.spec.nodeName, "b1-node-023");
  assert.equal(va.spec.source.persistentVolumeName, "b1-pv-00073");
  assert.equal(va.spec.attacher, spec.driver);
  assert.equal(persistentVolume(spec, 73).spec.csi?.volumeHandle, "b1-vol-00073");
  assert.equal(nodeOf(spec, CANARY), 0);
  assert.deepEqual(csiNode(spec, 23).spec.drivers[0], {
    name: spec.driver,
    nodeID: "b1-node-id-023",
    topologyKeys: null,
  });
  const shared = { ...spec, sharedNodeId: "mock" };
  assert.equal(csiNode(shared, 23).spec.drivers[0]?.nodeID, "mock");
});

Deno.test("indexOfVa() inverts vaName() and ignores other objects", () => {
  assert.equal(indexOfVa(spec, vaName(spec, 0)), 0);
  assert.equal(indexOfVa(spec, vaName(spec, 119)), 119);
  assert.equal(indexOfVa(spec, vaName(spec, CANARY)), CANARY);
  assert.equal(indexOfVa(spec, vaName(spec, 120)), undefined);
  assert.equal(indexOfVa(spec, "b2-va-00001"), undefined);
  assert.equal(indexOfVa(spec, "b1-va-x"), undefined);
});

Deno.test("pvcName() and podName() follow the PV's index, the canary included (--pods)", () => {
  assert.equal(pvcName(spec, 73), "b1-pvc-00073");
  assert.equal(podName(spec, 73), "b1-pod-00073");
  assert.equal(podName(spec, CANARY), "b1-pod-canary");
});
