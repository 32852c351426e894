/**
 * `afterSync` and `whenIdle` (the collection of the initial lists' and of each burst's garbage,
 * `lib/heap.ts`): `afterSync` runs once, when both caches have synced, before any worker syncs a
 * key; `whenIdle` once per burst, when the queues have stayed empty for `IDLE_AFTER_MS`.
 */

import assert from "node:assert/strict";
import { AttachController, IDLE_AFTER_MS } from "./controller.ts";
import type { Handler, SyncOutcome } from "./handler.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { testQueue } from "../../testkit/fakes/work_queue.ts";
import type { Clock } from "../clock.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { NEVER_ABORTED } from "../../testkit/harness/ready_work.ts";

const DRIVER = "csi.example.com";

/** A fake informer whose cache syncs when the test says so. */
class SyncingInformer<T extends { metadata: { name: string } }> extends FakeInformer<T> {
  readonly #synced = Promise.withResolvers<void>();
  sync(): void {
    this.#synced.resolve();
  }
  override waitForSync(_signal: AbortSignal): Promise<void> {
    return this.#synced.promise;
  }
}

Deno.test("AttachController says once that the caches synced, then calls afterSync, before any sync", async () => {
  const clock = new FakeClock(0);
  const queue = (name: string) => testQueue(clock, name);
  const vaInformer = new SyncingInformer<VolumeAttachment>();
  const pvInformer = new SyncingInformer<PersistentVolume>();
  const vaQueue = queue("va");
  const pvQueue = queue("pv");
  const order: string[] = [];
  const log = new FakeLogger(0);
  const logged = () => log.withMessage("Caches are synced").map((l) => l.fields.controller);
  const handler: Handler = {
    syncVolumeAttachment(va: VolumeAttachment): Promise<SyncOutcome> {
      order.push(`logged ${logged().join()}`);
      order.push(`sync ${va.metadata.name}`);
      return Promise.resolve("done");
    },
    syncPersistentVolume(pv: PersistentVolume): Promise<SyncOutcome> {
      order.push(`sync ${pv.metadata.name}`);
      return Promise.resolve("done");
    },
  };
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    vaQueue,
    pvQueue,
    handler,
    memory: new AttachmentMemory({ backoff: vaQueue }),
    log,
    clock,
    afterSync: () => order.push("afterSync"),
  }, { driverName: DRIVER, workers: 2, reconcileSyncMs: 0 });
  const va: VolumeAttachment = {
    metadata: { name: "va-1", resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv-1" } },
  };
  vaInformer.set(va);
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  vaInformer.emitAdd(va);
  await new Promise((r) => setTimeout(r, 0));
  vaInformer.sync();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(order, [], "not before the PV cache has synced too");
  assert.deepEqual(logged(), []);
  pvInformer.sync();
  for (let i = 0; i < 20 && !synced(order); i++) {
    await new Promise((r) => setTimeout(r, 0));
  }
  assert.deepEqual(order, ["afterSync", "logged csi-attacher", "sync va-1"]);
  stop.abort();
  await running;
  assert.equal(order.filter((o) => o === "afterSync").length, 1);
  assert.deepEqual(logged(), ["csi-attacher"], "once, at V(0)");
});

function synced(order: readonly string[]): boolean {
  return order.includes("sync va-1");
}

Deno.test("AttachController calls whenIdle once the queues stay empty for IDLE_AFTER_MS", async () => {
  const clock = new FakeClock(0);
  const queue = (name: string) => testQueue(clock, name);
  const vaInformer = new FakeInformer<VolumeAttachment>();
  const pvInformer = new FakeInformer<PersistentVolume>();
  const vaQueue = queue("va");
  const pvQueue = queue("pv");
  let idle = 0;
  const handler: Handler = {
    syncVolumeAttachment: () => Promise.resolve("done"),
    syncPersistentVolume: () => Promise.resolve("done"),
  };
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    vaQueue,
    pvQueue,
    handler,
    memory: new AttachmentMemory({ backoff: vaQueue }),
    log: nullLogger,
    clock,
    whenIdle: () => idle++,
  }, { driverName: DRIVER, workers: 1, reconcileSyncMs: 0 });
  const va = (name: string): VolumeAttachment => ({
    metadata: { name, resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: `pv-${name}` } },
  });
  for (const name of ["va-1", "va-2"]) {
    vaInformer.set(va(name));
    vaInformer.emitAdd(va(name));
  }
  assert.ok(await controller.processNextVolumeAttachment(NEVER_ABORTED));
  clock.advance(IDLE_AFTER_MS);
  assert.equal(idle, 0, "va-2 is still queued: not idle");
  assert.ok(await controller.processNextVolumeAttachment(NEVER_ABORTED));
  clock.advance(IDLE_AFTER_MS - 1);
  assert.equal(idle, 0, "not before IDLE_AFTER_MS");
  clock.advance(1);
  assert.equal(idle, 1, "the burst ended");
  clock.advance(10 * IDLE_AFTER_MS);
  assert.equal(idle, 1, "once per burst");
  vaQueue.shutDown();
  pvQueue.shutDown();
});

Deno.test("AttachController keeps one idle timer during a burst, not one per key", async () => {
  const clock = new FakeClock(0);
  let armed = 0;
  const counting: Clock = {
    now: () => clock.now(),
    wallNow: () => clock.wallNow(),
    setTimer: (ms, fn) => {
      armed++;
      return clock.setTimer(ms, fn);
    },
    sleep: (ms, signal) => clock.sleep(ms, signal),
  };
  const queue = (name: string) => testQueue(clock, name);
  const vaInformer = new FakeInformer<VolumeAttachment>();
  const vaQueue = queue("va");
  const pvQueue = queue("pv");
  let idle = 0;
  const controller = new AttachController({
    vaInformer,
    pvInformer: new FakeInformer<PersistentVolume>(),
    vaQueue,
    pvQueue,
    handler: {
      syncVolumeAttachment: () => Promise.resolve("done"),
      syncPersistentVolume: () => Promise.resolve("done"),
    },
    memory: new AttachmentMemory({ backoff: vaQueue }),
    log: nullLogger,
    clock: counting,
    whenIdle: () => idle++,
  }, { driverName: DRIVER, workers: 1, reconcileSyncMs: 0 });
  const names = Array.from({ length: 50 }, (_, i) => `va-${i}`);
  for (const name of names) {
    const va: VolumeAttachment = {
      metadata: { name, resourceVersion: "1" },
      spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: `pv-${name}` } },
    };
    vaInformer.set(va);
    vaInformer.emitAdd(va);
  }
  // 50 keys, 10 ms apart: 500 ms of work, so the first timer fires once while keys remain.
  for (const _ of names) {
    assert.ok(await controller.processNextVolumeAttachment(NEVER_ABORTED));
    clock.advance(10);
  }
  assert.ok(armed <= 2, `${armed} idle timers armed for one burst of 50 keys`);
  clock.advance(IDLE_AFTER_MS);
  assert.equal(idle, 1, "the burst ended once");
  vaQueue.shutDown();
  pvQueue.shutDown();
});
