/**
 * Many attaches at once: 200 VolumeAttachments on 20 nodes with the default 10 workers, each
 * published exactly once, with every write the attach makes.
 */

import assert from "node:assert/strict";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import type { Action } from "../../testkit/harness/fixtures.ts";
import {
  csiNode,
  DRIVER,
  FIN,
  NODE_ID_ANN,
  pv,
  va,
  vaMetaPatch,
  vaStatusPatch,
  with_,
} from "../../testkit/harness/fixtures.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";

Deno.test("attach flood: 200 VAs on 20 nodes, 10 workers -> each published exactly once", async () => {
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
