/**
 * Stopping the controller: syncs in flight finish, no worker takes another key.
 */

import assert from "node:assert/strict";
import { AttachController } from "./controller.ts";
import type { Handler, SyncOutcome } from "./handler.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { testQueue } from "../../testkit/fakes/work_queue.ts";
import { nullLogger } from "../observe/logger.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";

const DRIVER = "csi.example.com";

/** Each sync waits until released; records which VAs it started. */
class SlowHandler implements Handler {
  started: string[] = [];
  #release: Array<() => void> = [];
  syncVolumeAttachment(va: VolumeAttachment): Promise<SyncOutcome> {
    this.started.push(va.metadata.name);
    return new Promise((resolve) => this.#release.push(() => resolve("done")));
  }
  syncPersistentVolume(_pv: PersistentVolume): Promise<SyncOutcome> {
    return Promise.resolve("done");
  }
  releaseAll(): void {
    for (const release of this.#release.splice(0)) release();
  }
}

Deno.test("AttachController.run(): after the stop no worker takes another key; syncs in flight finish", async () => {
  const clock = new FakeClock(0);
  const queue = (name: string) => testQueue(clock, name);
  const vaInformer = new FakeInformer<VolumeAttachment>();
  const handler = new SlowHandler();
  const vaQueue = queue("va");
  const controller = new AttachController({
    vaInformer,
    pvInformer: new FakeInformer<PersistentVolume>(),
    vaQueue,
    pvQueue: queue("pv"),
    handler,
    memory: new AttachmentMemory({ backoff: vaQueue }),
    log: nullLogger,
    clock,
  }, { driverName: DRIVER, workers: 3, reconcileSyncMs: 60_000 });
  for (let i = 0; i < 20; i++) {
    vaInformer.emitAdd({
      metadata: { name: `va-${i}` },
      spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: `pv-${i}` } },
    });
  }
  const stop = new AbortController();
  let finished = false;
  const running = controller.run(stop.signal).then(() => finished = true);
  while (handler.started.length < 3) await new Promise((resolve) => setTimeout(resolve, 0));
  stop.abort();
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(finished, false, "run() waits for the syncs in flight");
  handler.releaseAll();
  await running;
  assert.deepEqual(handler.started, ["va-0", "va-1", "va-2"]);
  assert.equal(vaQueue.len(), 17, "the keys left stay queued, unsynced");
});
