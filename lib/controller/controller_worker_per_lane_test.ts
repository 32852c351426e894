/** The attach and detach lanes of the VolumeAttachment queue, as the controller uses them. */

import assert from "node:assert/strict";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { nullLogger } from "../observe/logger.ts";
import { ItemExponentialFailureRateLimiter } from "../workqueue/rate_limiters.ts";
import { LanedWorkQueue } from "../workqueue/lanes.ts";
import type { QueueLanes } from "../workqueue/lanes.ts";
import { AttachController } from "./controller.ts";
import { volumeAttachmentLanes } from "./lanes.ts";
import type { Handler } from "./handler.ts";

const noopHandler: Handler = {
  syncVolumeAttachment: () => Promise.resolve("done"),
  syncPersistentVolume: () => Promise.resolve("done"),
};

function controller(laneWorkers: Record<string, number> | undefined, lanes?: QueueLanes) {
  const queue = (name: string, l?: QueueLanes) =>
    new LanedWorkQueue({
      rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1, maxMs: 1 }),
    }, { name, lanes: l });
  const vaQueue = queue("va", lanes);
  return new AttachController({
    vaInformer: new FakeInformer<VolumeAttachment>(),
    pvInformer: new FakeInformer<PersistentVolume>(),
    vaQueue,
    pvQueue: queue("pv"),
    handler: noopHandler,
    memory: new AttachmentMemory({ backoff: vaQueue }),
    log: nullLogger,
  }, { driverName: "d", workers: 2, laneWorkers, reconcileSyncMs: 1 });
}

Deno.test("AttachController needs at least one worker for each lane of the VA queue", () => {
  const lanes = volumeAttachmentLanes(new FakeInformer<VolumeAttachment>());
  controller({ attach: 1, detach: 3 }, lanes);
  controller(undefined, lanes); // one pool over both lanes
  assert.throws(() => controller({ attach: 2 }, lanes), RangeError);
  assert.throws(() => controller({ attach: 2, detach: 0 }, lanes), RangeError);
  assert.throws(() => controller({ attach: 1, detach: 1, resize: 1 }, lanes), RangeError);
  assert.throws(() => controller({ attach: 1 }), RangeError, "a queue without these lanes");
});
