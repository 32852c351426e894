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

/** A controller over syncing fake informers whose syncs and callbacks are noted in `order`. */
function noting() {
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
    whenIdle: () => order.push("whenIdle"),
  }, { driverName: DRIVER, workers: 2, reconcileSyncMs: 0 });
  const va: VolumeAttachment = {
    metadata: { name: "va-1", resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv-1" } },
  };
  return { clock, vaInformer, pvInformer, order, logged, controller, va };
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 20 && !done(); i++) await new Promise((r) => setTimeout(r, 0));
}

Deno.test("AttachController says once that the caches synced, then calls afterSync, before any sync", async () => {
  const { vaInformer, pvInformer, order, logged, controller, va } = noting();
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  vaInformer.sync();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(order.length, 0, "not before the PV cache has synced too");
  assert.equal(logged().length, 0);
  pvInformer.sync();
  await until(() => order.includes("afterSync"));
  vaInformer.set(va);
  vaInformer.emitAdd(va);
  await until(() => synced(order));
  assert.deepEqual(order, ["afterSync", "logged csi-attacher", "sync va-1"]);
  stop.abort();
  await running;
  assert.equal(order.filter((o) => o === "afterSync").length, 1);
  assert.deepEqual(logged(), ["csi-attacher"], "once, at V(0)");
});

Deno.test("AttachController with keys queued at the sync works first and collects when idle", async () => {
  const { clock, vaInformer, pvInformer, order, controller, va } = noting();
  // A new leader whose initial list holds a VA to attach.
  const { stop, running } = runOver(va, { vaInformer, pvInformer, controller });
  await until(() => synced(order));
  assert.deepEqual(order, ["logged csi-attacher", "sync va-1"], "no collection before the attach");
  clock.advance(IDLE_AFTER_MS);
  assert.deepEqual(order, ["logged csi-attacher", "sync va-1", "whenIdle"]);
  stop.abort();
  await running;
  assert.equal(order.filter((o) => o === "afterSync").length, 0);
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
  assert.ok(await controller.stepVolumeAttachment());
  clock.advance(IDLE_AFTER_MS);
  assert.equal(idle, 0, "va-2 is still queued: not idle");
  assert.ok(await controller.stepVolumeAttachment());
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
    assert.ok(await controller.stepVolumeAttachment());
    clock.advance(10);
  }
  assert.ok(armed <= 2, `${armed} idle timers armed for one burst of 50 keys`);
  clock.advance(IDLE_AFTER_MS);
  assert.equal(idle, 1, "the burst ended once");
  vaQueue.shutDown();
  pvQueue.shutDown();
});

Deno.test("AttachController does not queue an attached VA that appears, only those with work", async () => {
  const clock = new FakeClock(0);
  const vaInformer = new SyncingInformer<VolumeAttachment>();
  const pvInformer = new SyncingInformer<PersistentVolume>();
  const vaQueue = testQueue(clock, "va");
  const synced: string[] = [];
  const handler: Handler = {
    syncVolumeAttachment(va: VolumeAttachment): Promise<SyncOutcome> {
      synced.push(va.metadata.name);
      return Promise.resolve("done");
    },
    syncPersistentVolume: () => Promise.resolve("done"),
  };
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    vaQueue,
    pvQueue: testQueue(clock, "pv"),
    handler,
    memory: new AttachmentMemory({ backoff: vaQueue }),
    log: nullLogger,
    clock,
  }, { driverName: DRIVER, workers: 1, reconcileSyncMs: 0 });
  const va = (name: string, attached: boolean, deleting = false): VolumeAttachment => ({
    metadata: {
      name,
      resourceVersion: "1",
      ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: `pv-${name}` } },
    status: { attached },
  });
  // The initial list of a new leader: one attached (nothing to do), one to attach, one attached
  // and being deleted (to detach).
  const list = [va("attached", true), va("new", false), va("deleting", true, true)];
  for (const v of list) {
    vaInformer.set(v);
    vaInformer.emitAdd(v);
  }
  assert.equal(vaQueue.len(), 2);
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  vaInformer.sync();
  pvInformer.sync();
  for (let i = 0; i < 20 && synced.length < 2; i++) await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(synced.sort(), ["deleting", "new"]);
  // A later change of the attached VA is queued as before.
  const changed = { ...va("attached", true), metadata: { name: "attached", resourceVersion: "2" } };
  vaInformer.set(changed);
  vaInformer.emitUpdate(list[0]!, changed);
  for (let i = 0; i < 20 && synced.length < 3; i++) await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(synced.sort(), ["attached", "deleting", "new"]);
  stop.abort();
  await running;
});

/**
 * A controller with a reconciler (noting its passes in `order`) whose informers hold one VA to
 * attach at the sync; the caches sync and it runs.
 */
function reconciling(
  syncVolumeAttachment: Handler["syncVolumeAttachment"],
  order: string[],
) {
  const { clock, ...parts } = reconcilingController(syncVolumeAttachment, order);
  const va: VolumeAttachment = {
    metadata: { name: "va-1", resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv-1" } },
  };
  return { clock, ...runOver(va, parts) };
}

/** A controller with a reconciler whose passes, and idle calls, are noted in `order`. */
function reconcilingController(
  syncVolumeAttachment: Handler["syncVolumeAttachment"],
  order: string[],
  whenIdle?: () => void,
) {
  const clock = new FakeClock(0);
  const vaInformer = new SyncingInformer<VolumeAttachment>();
  const pvInformer = new SyncingInformer<PersistentVolume>();
  const vaQueue = testQueue(clock, "va");
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    vaQueue,
    pvQueue: testQueue(clock, "pv"),
    handler: { syncVolumeAttachment, syncPersistentVolume: () => Promise.resolve("done") },
    memory: new AttachmentMemory({ backoff: vaQueue }),
    reconciler: {
      reconcile(): Promise<void> {
        order.push("reconcile");
        return Promise.resolve();
      },
    },
    log: nullLogger,
    clock,
    whenIdle,
  }, { driverName: DRIVER, workers: 2, reconcileSyncMs: 60_000 });
  return { clock, vaInformer, pvInformer, controller };
}

/** Runs `controller` over caches that hold `va` (queued), synced at once. */
function runOver(
  va: VolumeAttachment,
  parts: {
    vaInformer: SyncingInformer<VolumeAttachment>;
    pvInformer: SyncingInformer<PersistentVolume>;
    controller: AttachController;
  },
): { stop: AbortController; running: Promise<void> } {
  parts.vaInformer.set(va);
  parts.vaInformer.emitAdd(va);
  const stop = new AbortController();
  const running = parts.controller.run(stop.signal);
  parts.vaInformer.sync();
  parts.pvInformer.sync();
  return { stop, running };
}

Deno.test("AttachController runs its first reconcile pass once the VAs queued at the sync are synced", async () => {
  const order: string[] = [];
  const attach = Promise.withResolvers<void>();
  const { stop, running } = reconciling(async (va) => {
    order.push(`attaching ${va.metadata.name}`);
    await attach.promise;
    order.push(`attached ${va.metadata.name}`);
    return "done";
  }, order);
  await until(() => order.length > 0);
  for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(order, ["attaching va-1"], "no ListVolumes pass beside the attach");
  attach.resolve();
  await until(() => order.includes("reconcile"));
  assert.deepEqual(order, ["attaching va-1", "attached va-1", "reconcile"]);
  stop.abort();
  await running;
});

Deno.test("AttachController's first reconcile pass waits at most one period for the queue", async () => {
  const order: string[] = [];
  const never = Promise.withResolvers<SyncOutcome>();
  const { clock, stop, running } = reconciling(() => never.promise, order);
  for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 0));
  assert.equal(order.length, 0);
  clock.advance(60_000);
  await until(() => order.length > 0);
  assert.deepEqual(order, ["reconcile"], "a sync that never ends does not hold it back longer");
  stop.abort();
  never.resolve("done");
  await running;
});

Deno.test("AttachController calls whenIdle after each ListVolumes pass once the queues are empty", async () => {
  const order: string[] = [];
  const { clock, vaInformer, pvInformer, controller } = reconcilingController(
    () => Promise.resolve("done"),
    order,
    () => order.push("whenIdle"),
  );
  // Nothing to attach: no key is ever processed, only the passes run.
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  vaInformer.sync();
  pvInformer.sync();
  await until(() => order.includes("reconcile"));
  assert.deepEqual(order, ["reconcile"]);
  clock.advance(IDLE_AFTER_MS - 1);
  assert.deepEqual(order, ["reconcile"], "not before IDLE_AFTER_MS");
  clock.advance(1);
  assert.deepEqual(order, ["reconcile", "whenIdle"], "the pass's garbage is collected");
  clock.advance(60_000 - IDLE_AFTER_MS);
  await until(() => order.length > 2);
  clock.advance(IDLE_AFTER_MS);
  assert.deepEqual(order, ["reconcile", "whenIdle", "reconcile", "whenIdle"], "after every pass");
  stop.abort();
  await running;
});
