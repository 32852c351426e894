/**
 * The ListVolumes reconciler's own checks: a pass whose lease fence closed queues nothing, even
 * when the driver's answer shows a difference, and a VA whose cached copy is older than this
 * attacher's own write of it is left alone.
 */

import assert from "node:assert/strict";
import type { CsiClient, ListedVolume } from "../csi/api.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { ListVolumesReconciler } from "./reconciler.ts";

const DRIVER = "csi.example.com";

/** A driver whose ListVolumes shows `vol1` published on `node-1`; `during` runs in the call. */
function lister(during: () => void): CsiClient & { lists: number } {
  const csi = {
    lists: 0,
    listVolumes() {
      csi.lists++;
      during();
      const entries: ListedVolume[] = [{ volumeId: "vol1", publishedNodeIds: ["node-1"] }];
      return Promise.resolve({ entries, nextToken: "" });
    },
  };
  return csi as unknown as CsiClient & { lists: number };
}

function setUp(csi: CsiClient, fence: { open: boolean }) {
  const va: VolumeAttachment = {
    metadata: { name: "va1", uid: "u1", resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv1" } },
    status: { attached: false },
  };
  const pv: PersistentVolume = {
    metadata: { name: "pv1" },
    spec: { csi: { driver: DRIVER, volumeHandle: "vol1" } },
  };
  const node: CsiNode = {
    metadata: { name: "node1" },
    spec: { drivers: [{ name: DRIVER, nodeID: "node-1" }] },
  };
  const queued: string[] = [];
  const memory = new AttachmentMemory({ backoff: { forget() {} } });
  const vas = new FakeInformer([va]);
  const reconciler = new ListVolumesReconciler({
    csi,
    log: nullLogger,
    stores: {
      volumeAttachments: vas,
      persistentVolumes: new FakeInformer([pv]),
      csiNodes: new FakeInformer([node]),
    },
    memory,
    queue: { add: (key) => queued.push(key), isQueuedOrProcessing: () => false },
    fence: { valid: () => fence.open },
  }, { driverName: DRIVER, timeoutMs: 1000, maxEntries: 0 });
  return { reconciler, queued, memory, vas };
}

Deno.test("ListVolumesReconciler: an open fence queues the VA the driver shows attached", async () => {
  const fence = { open: true };
  const csi = lister(() => {});
  const { reconciler, queued } = setUp(csi, fence);
  await reconciler.reconcile(new AbortController().signal);
  assert.deepEqual(queued, ["va1"]);
});

Deno.test("ListVolumesReconciler: a fence that closes during ListVolumes queues nothing", async () => {
  const fence = { open: true };
  const csi = lister(() => fence.open = false);
  const { reconciler, queued } = setUp(csi, fence);
  await reconciler.reconcile(new AbortController().signal);
  assert.equal(csi.lists, 1);
  assert.deepEqual(queued, []);
});

Deno.test("ListVolumesReconciler: a closed fence does not even ask the driver", async () => {
  const fence = { open: false };
  const csi = lister(() => {});
  const { reconciler, queued } = setUp(csi, fence);
  await reconciler.reconcile(new AbortController().signal);
  assert.equal(csi.lists, 0);
  assert.deepEqual(queued, []);
});

Deno.test("ListVolumesReconciler: a VA cached before our own attached write is not forced again", async () => {
  const fence = { open: true };
  const { reconciler, queued, memory } = setUp(lister(() => {}), fence);
  // Our attach wrote `attached: true` at resourceVersion 2; the cache still holds version 1.
  memory.recordOwnWrite("va1", {
    metadata: { name: "va1", uid: "u1", resourceVersion: "2" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv1" } },
    status: { attached: true },
  });
  await reconciler.reconcile(new AbortController().signal);
  assert.deepEqual(queued, [], "the driver shows our own publish, which the cache does not yet");
});

Deno.test("ListVolumesReconciler: a VA re-listed unchanged during the pass is still reconciled", async () => {
  const fence = { open: true };
  let during = () => {};
  const { reconciler, queued, vas } = setUp(lister(() => during()), fence);
  // A re-list replaces the cached object with an equal one: same uid and resourceVersion.
  during = () => vas.set(structuredClone(vas.get("va1")!));
  await reconciler.reconcile(new AbortController().signal);
  assert.deepEqual(queued, ["va1"]);
});

Deno.test("ListVolumesReconciler: a VA written, deleted or created during the pass is left alone", async () => {
  for (
    const change of [
      (vas: FakeInformer<VolumeAttachment>) => {
        const va = structuredClone(vas.get("va1")!);
        va.metadata.resourceVersion = "2";
        vas.set(va);
      },
      (vas: FakeInformer<VolumeAttachment>) => {
        const va = structuredClone(vas.get("va1")!);
        va.metadata.uid = "u2";
        vas.set(va);
      },
      (vas: FakeInformer<VolumeAttachment>) => vas.emitDelete(vas.get("va1")!),
    ]
  ) {
    let during = () => {};
    const { reconciler, queued, vas } = setUp(lister(() => during()), { open: true });
    during = () => change(vas);
    await reconciler.reconcile(new AbortController().signal);
    assert.deepEqual(queued, []);
  }
  // Created during the pass: its own add queues it; the pass does not.
  let during = () => {};
  const { reconciler, queued, vas } = setUp(lister(() => during()), { open: true });
  const created = structuredClone(vas.get("va1")!);
  vas.emitDelete(vas.get("va1")!);
  during = () => vas.set(created);
  await reconciler.reconcile(new AbortController().signal);
  assert.deepEqual(queued, []);
});
