/**
 * Nothing is kept per VolumeAttachment after it is gone: the backoff record and the
 * per-VolumeAttachment memory end when the VA is deleted, or when a later sync finds it gone.
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

function va(name: string): VolumeAttachment {
  return {
    metadata: { name, resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: `pv-${name}` } },
  };
}

/** Fails every sync (a retry with backoff). */
class FailingHandler implements Handler {
  syncVolumeAttachment(_va: VolumeAttachment): Promise<SyncOutcome> {
    return Promise.resolve("retry");
  }
  syncPersistentVolume(_pv: PersistentVolume): Promise<SyncOutcome> {
    return Promise.resolve("retry");
  }
}

/** The per-VolumeAttachment memory, recording what it was told to forget. */
class RecordingMemory extends AttachmentMemory {
  forgotten: string[] = [];
  override forget(name: string): void {
    this.forgotten.push(name);
    super.forget(name);
  }
}

function setUp() {
  const clock = new FakeClock(0);
  const queue = (name: string) => testQueue(clock, name);
  const vaInformer = new FakeInformer<VolumeAttachment>();
  const pvInformer = new FakeInformer<PersistentVolume>();
  const vaQueue = queue("va");
  const pvQueue = queue("pv");
  const memory = new RecordingMemory({ backoff: vaQueue });
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    vaQueue,
    pvQueue,
    handler: new FailingHandler(),
    memory,
    log: nullLogger,
    clock,
  }, { driverName: DRIVER, workers: 1, reconcileSyncMs: 60_000 });
  return { clock, vaInformer, pvInformer, memory, vaQueue, pvQueue, controller };
}

Deno.test("AttachController forgets a VolumeAttachment's backoff and memory when it is deleted", async () => {
  const { vaInformer, memory, vaQueue, controller } = setUp();
  const names = Array.from({ length: 100 }, (_, i) => `va-${i}`);
  for (const name of names) {
    vaInformer.set(va(name));
    vaInformer.emitAdd(va(name));
    assert.ok(await controller.stepVolumeAttachment());
    assert.equal(vaQueue.numRequeues(name), 1);
  }
  for (const name of names) vaInformer.emitDelete(va(name));
  for (const name of names) assert.equal(vaQueue.numRequeues(name), 0, name);
  assert.deepEqual(memory.forgotten, names);
  vaQueue.shutDown();
});

Deno.test("AttachController forgets a key whose object is gone when its retry comes", async () => {
  const { clock, vaInformer, pvInformer, memory, vaQueue, pvQueue, controller } = setUp();
  // A failure recorded after the delete event (a sync in flight while the VA went away).
  vaQueue.addRateLimited("gone-va");
  pvQueue.addRateLimited("gone-pv");
  assert.equal(vaInformer.get("gone-va"), undefined);
  assert.equal(pvInformer.get("gone-pv"), undefined);
  clock.advance(1000);
  assert.ok(await controller.stepVolumeAttachment());
  assert.ok(await controller.stepPersistentVolume());
  assert.equal(vaQueue.numRequeues("gone-va"), 0);
  assert.equal(pvQueue.numRequeues("gone-pv"), 0);
  assert.deepEqual(memory.forgotten, ["gone-va"]);
  vaQueue.shutDown();
  pvQueue.shutDown();
});
