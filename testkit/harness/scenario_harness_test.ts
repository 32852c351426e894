/**
 * Proves that each safety invariant the scenario harness checks does fire: every test runs a
 * deliberately broken handler that breaks exactly one invariant and expects exactly that
 * violation to be reported.
 */

import assert from "node:assert/strict";
import type { Handler, SyncOutcome } from "../../lib/controller/handler.ts";
import { PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { removeFinalizerPatch } from "../../lib/kube/finalizer_patch.ts";
import type { HandlerFactoryDeps } from "./scenario_harness.ts";
import { runScenario } from "./scenario_harness.ts";
import { ANN, csiNode, deleted, FIN, pv, pvRemoveFin, REMOVE_FIN, va } from "./fixtures.ts";

/** A handler whose VA and PV syncs are given as functions; it never retries. */
class BrokenHandler implements Handler {
  #syncVolumeAttachment: (va: VolumeAttachment) => Promise<void>;
  #syncPersistentVolume: (pv: PersistentVolume) => Promise<void>;

  constructor(fns: {
    va?: (va: VolumeAttachment) => Promise<void>;
    pv?: (pv: PersistentVolume) => Promise<void>;
  }) {
    this.#syncVolumeAttachment = fns.va ?? (() => Promise.resolve());
    this.#syncPersistentVolume = fns.pv ?? (() => Promise.resolve());
  }

  async syncVolumeAttachment(va: VolumeAttachment): Promise<SyncOutcome> {
    await this.#syncVolumeAttachment(va);
    return "done";
  }

  async syncPersistentVolume(pv: PersistentVolume): Promise<SyncOutcome> {
    await this.#syncPersistentVolume(pv);
    return "done";
  }
}

const publishRequest = {
  volumeId: "handle1",
  nodeId: "nodeID1",
  volumeCapability: {
    mount: { fsType: "ext4", mountFlags: [] },
    accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
  },
  readonly: false,
  secrets: {},
  volumeContext: {},
};

Deno.test("runScenario() reports a publish before the VA finalizer is stored", async () => {
  await runScenario({
    name: "publish without finalizer",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    handlerFactory: ({ csi, options }: HandlerFactoryDeps) =>
      new BrokenHandler({
        va: async () => {
          await csi.controllerPublishVolume(publishRequest, { timeoutMs: options.timeoutMs });
        },
      }),
    expectedActions: [],
    expectedCsiCalls: [{ method: "ControllerPublishVolume", expect: { volumeId: "handle1" } }],
    expectedViolations: ["ControllerPublishVolume(handle1) before the VA finalizer was stored"],
  });
});

Deno.test("runScenario() reports a VA finalizer removed without a successful unpublish", async () => {
  await runScenario({
    name: "finalizer removed without unpublish",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    handlerFactory: ({ kube }: HandlerFactoryDeps) =>
      new BrokenHandler({
        va: async (obj) => {
          await kube.patch(VOLUME_ATTACHMENTS, obj.metadata.name, {
            type: "merge",
            body: { metadata: { finalizers: null } },
          });
        },
      }),
    expectedActions: [REMOVE_FIN],
    expectedViolations: ["VA pv1-node1 finalizer removed without a successful unpublish"],
  });
});

Deno.test("runScenario() reports a VA finalizer removed after a failed unpublish", async () => {
  await runScenario({
    name: "finalizer removed after failed unpublish",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    handlerFactory: ({ kube, csi, options }: HandlerFactoryDeps) =>
      new BrokenHandler({
        va: async (obj) => {
          await csi.controllerUnpublishVolume(
            { volumeId: "handle1", nodeId: "nodeID1", secrets: {} },
            { timeoutMs: options.timeoutMs },
          ).catch(() => undefined); // the broken part: the failure is ignored
          await kube.patch(VOLUME_ATTACHMENTS, obj.metadata.name, {
            type: "merge",
            body: { metadata: { finalizers: null } },
          });
        },
      }),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [{
      method: "ControllerUnpublishVolume",
      error: { code: 14, message: "driver busy" },
    }],
    // The unpublish is "maybe done" only after a publish; with none seen, the VA counts as
    // published until an unpublish succeeds.
    expectedViolations: ["VA pv1-node1 finalizer removed without a successful unpublish"],
  });
});

Deno.test("runScenario() reports a PV finalizer removed while a VA names the PV", async () => {
  await runScenario({
    name: "PV finalizer removed while in use",
    initialObjects: [va(true, FIN, ANN), csiNode()],
    updatedPV: deleted(pv()),
    handlerFactory: ({ kube }: HandlerFactoryDeps) =>
      new BrokenHandler({
        pv: async (obj) => {
          await kube.patch(PERSISTENT_VOLUMES, obj.metadata.name, {
            type: "json",
            body: removeFinalizerPatch(obj.metadata.finalizers, FIN),
          });
        },
      }),
    expectedActions: [pvRemoveFin(0)],
    expectedViolations: ["PV pv1 finalizer removed while VA pv1-node1 names it"],
  });
});

Deno.test("runScenario() fails a scenario whose handler breaks an invariant", async () => {
  await assert.rejects(
    runScenario({
      name: "unexpected violation",
      initialObjects: [pv(), csiNode()],
      addedVA: deleted(va(true, FIN, ANN)),
      handlerFactory: ({ kube }: HandlerFactoryDeps) =>
        new BrokenHandler({
          va: async (obj) => {
            await kube.patch(VOLUME_ATTACHMENTS, obj.metadata.name, {
              type: "merge",
              body: { metadata: { finalizers: null } },
            });
          },
        }),
      expectedActions: [REMOVE_FIN],
    }),
    /safety invariants violated/,
  );
});
