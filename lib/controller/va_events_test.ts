/**
 * The Events of the CSI handler (`va_events.ts`): a Warning with the saved error's text when an
 * attach or detach fails, a Normal one when it succeeds after failing (here, or as the VA's saved
 * error tells), nothing otherwise.
 */

import assert from "node:assert/strict";
import type { EventSink } from "../events/recorder.ts";
import type { ObjectReference, VolumeAttachment } from "../kube/types.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { type EventContext, recordFailure, recordRecovery } from "./va_events.ts";

interface Recorded {
  object: ObjectReference;
  type: string;
  reason: string;
  message: string;
}

function context(): EventContext & { recorded: Recorded[] } {
  const recorded: Recorded[] = [];
  const events: EventSink = {
    record: (object, type, reason, message) => recorded.push({ object, type, reason, message }),
  };
  return { memory: new AttachmentMemory({ backoff: { forget() {} } }), events, recorded };
}

function va(status?: VolumeAttachment["status"]): VolumeAttachment {
  return {
    metadata: { name: "va1", uid: "uid-va1", resourceVersion: "7" },
    spec: {
      attacher: "csi.example.com",
      nodeName: "node1",
      source: { persistentVolumeName: "pv1" },
    },
    status,
  };
}

Deno.test("va events: a failed attach -> a Warning on the VA with the error's text", () => {
  const ctx = context();
  recordFailure(ctx, va(), "attach", new Error("rpc error: code = Internal desc = boom"));
  assert.deepEqual(ctx.recorded, [{
    object: {
      kind: "VolumeAttachment",
      apiVersion: "storage.k8s.io/v1",
      name: "va1",
      uid: "uid-va1",
      resourceVersion: "7",
    },
    type: "Warning",
    reason: "AttachFailed",
    message: "rpc error: code = Internal desc = boom",
  }]);
});

Deno.test("va events: an attach that works after failing here -> one Normal Event, then none", () => {
  const ctx = context();
  recordFailure(ctx, va(), "attach", new Error("boom"));
  recordRecovery(ctx, va(), "attach");
  recordRecovery(ctx, va(), "attach");
  assert.deepEqual(ctx.recorded.map((e) => `${e.type} ${e.reason} ${e.message}`), [
    "Warning AttachFailed boom",
    "Normal Attached Volume attached to node node1",
  ]);
});

Deno.test("va events: a detach that works after failing -> a Normal Detached", () => {
  const ctx = context();
  recordFailure(ctx, va(), "detach", new Error("boom"));
  recordRecovery(ctx, va(), "detach");
  assert.deepEqual(ctx.recorded.map((e) => `${e.type} ${e.reason}`), [
    "Warning DetachFailed",
    "Normal Detached",
  ]);
});

Deno.test("va events: an attach that works at once -> no Event", () => {
  const ctx = context();
  recordRecovery(ctx, va({ attached: false }), "attach");
  assert.deepEqual(ctx.recorded, []);
});

Deno.test("va events: an attachError saved by an earlier run -> a Normal Event when the attach works", () => {
  const ctx = context();
  recordRecovery(ctx, va({ attached: false, attachError: { message: "old" } }), "attach");
  assert.deepEqual(ctx.recorded.map((e) => e.reason), ["Attached"]);
});

Deno.test("va events: a failed detach, then a working attach -> no Normal Attached", () => {
  const ctx = context();
  recordFailure(ctx, va(), "detach", new Error("boom"));
  recordRecovery(ctx, va(), "attach");
  assert.deepEqual(ctx.recorded.map((e) => e.reason), ["DetachFailed"]);
});

Deno.test("va events: no Event sink -> the failure is still remembered", () => {
  const ctx: EventContext = {
    memory: new AttachmentMemory({ backoff: { forget() {} } }),
    events: undefined,
  };
  recordFailure(ctx, va(), "attach", new Error("boom"));
  assert.equal(ctx.memory.takeFailure("va1"), "attach");
});
