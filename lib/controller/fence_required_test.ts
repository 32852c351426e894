/**
 * The lease fence is a required dependency of everything that acts for the leader: a handler or
 * reconciler built without one does not type-check (each `@ts-expect-error` below fails the
 * check of this file when the error it expects is gone, i.e. when a fence became optional
 * again), and the fence a term hands out is what each one asks.
 */

import assert from "node:assert/strict";
import { CsiHandler, type CsiHandlerDeps } from "./csi_handler.ts";
import { TrivialHandler } from "./trivial_handler.ts";
import type { ListVolumesReconcilerDeps } from "./reconciler.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import type { LeaderCallbacks } from "../leaderelection/elector.ts";
import type { LeaseFence } from "../lease_fence.ts";
import { nullLogger } from "../observe/logger.ts";
import type { KubeApi } from "../kube/api.ts";
import type { CsiClient } from "../csi/api.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";

const OPTIONS = {
  driverName: "csi.example.com",
  timeoutMs: 1000,
  supportsPublishReadOnly: false,
  supportsSingleNodeMultiWriter: false,
  defaultFsType: "ext4",
  attachErrorCodes: false,
};

/** A KubeApi that fails the test on any call: a closed fence must keep every write away. */
const NO_KUBE = new Proxy({}, {
  get: (_t, name) => () => assert.fail(`unexpected KubeApi.${String(name)}`),
}) as KubeApi;
const NO_CSI = new Proxy({}, {
  get: (_t, name) => () => assert.fail(`unexpected CsiClient.${String(name)}`),
}) as CsiClient;

function stores() {
  return {
    volumeAttachments: new FakeInformer<VolumeAttachment>(),
    persistentVolumes: new FakeInformer<PersistentVolume>(),
    csiNodes: new FakeInformer<CsiNode>(),
  };
}

Deno.test("fence: a handler or reconciler without a fence does not type-check", () => {
  const memory = new AttachmentMemory({ backoff: { forget() {} } });
  const base = { kube: NO_KUBE, csi: NO_CSI, log: nullLogger, stores: stores(), memory };
  // @ts-expect-error the fence is required: no CsiHandler runs unfenced by omission
  const handlerDeps: CsiHandlerDeps = base;
  // @ts-expect-error the fence is required: no TrivialHandler runs unfenced by omission
  new TrivialHandler({ kube: NO_KUBE, log: nullLogger });
  const queue = { add() {}, isQueuedOrProcessing: () => false };
  // @ts-expect-error the fence is required: no reconciler runs unfenced by omission
  const reconcilerDeps: ListVolumesReconcilerDeps = { ...base, queue };
  // The term's work is given its fence: a callback that takes it type-checks, and the elector
  // passes it (lib/leaderelection/elector_test.ts).
  const callbacks: LeaderCallbacks = {
    onStartedLeading: (_signal: AbortSignal, fence: LeaseFence) => void fence.valid(),
    onStoppedLeading: () => {},
  };
  assert.ok(handlerDeps && reconcilerDeps && callbacks);
});

Deno.test("fence: a closed fence given to the trivial handler stops it before its write", async () => {
  let asked = 0;
  const fence: LeaseFence = { valid: () => (asked++, false) };
  const handler = new TrivialHandler({ kube: NO_KUBE, log: nullLogger, fence });
  const va: VolumeAttachment = {
    metadata: { name: "va1" },
    spec: { attacher: OPTIONS.driverName, nodeName: "n1", source: { persistentVolumeName: "pv1" } },
  };
  assert.equal(await handler.syncVolumeAttachment(va, new AbortController().signal), "stopped");
  assert.equal(asked, 1);
  // The CSI handler of the same fence: nothing written for a PV being deleted either.
  const csi = new CsiHandler({
    kube: NO_KUBE,
    csi: NO_CSI,
    log: nullLogger,
    stores: stores(),
    memory: new AttachmentMemory({ backoff: { forget() {} } }),
    fence,
  }, OPTIONS);
  const pv: PersistentVolume = {
    metadata: {
      name: "pv1",
      deletionTimestamp: "2026-01-01T00:00:00Z",
      finalizers: ["external-attacher/csi-example-com"],
    },
    spec: {},
  };
  assert.equal(await csi.syncPersistentVolume(pv), "stopped");
  assert.equal(asked, 2);
});
