import assert from "node:assert/strict";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import { ATTACH_LANE, DETACH_LANE, volumeAttachmentLane, volumeAttachmentLanes } from "./lanes.ts";

function va(name: string, deleted = false): VolumeAttachment {
  return {
    metadata: { name, deletionTimestamp: deleted ? "2026-01-01T00:00:00Z" : undefined },
    spec: { attacher: "d", nodeName: "n", source: { persistentVolumeName: "p" } },
  };
}

Deno.test("volumeAttachmentLane(): detach once deleted or gone, attach otherwise", () => {
  assert.equal(volumeAttachmentLane(va("a")), ATTACH_LANE);
  assert.equal(volumeAttachmentLane(va("a", true)), DETACH_LANE);
  assert.equal(volumeAttachmentLane(undefined), DETACH_LANE);
  const store = new FakeInformer<VolumeAttachment>([va("x"), va("y", true)]);
  const lanes = volumeAttachmentLanes(store);
  assert.deepEqual(lanes.names, [ATTACH_LANE, DETACH_LANE]);
  assert.deepEqual(["x", "y", "z"].map(lanes.laneOf), [ATTACH_LANE, DETACH_LANE, DETACH_LANE]);
});
