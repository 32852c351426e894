/**
 * The attach (`attach.ts`) as the handler runs it: where the stop signal and the lease fence end
 * it (before the driver call nothing is recorded; after it the next leader publishes again), that
 * it never writes to the cached VA, and what its writes carry.
 */

import assert from "node:assert/strict";
import { PERSISTENT_VOLUMES } from "../kube/api.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import {
  FIN,
  settle,
  setUp,
  STOP_LINE,
  stopLines,
  testFence,
  va,
} from "../../testkit/harness/handler_fixtures.ts";

Deno.test("attach: the stop signal ends an attach waiting for its VA patch; no publish, nothing recorded", async () => {
  const log = new FakeLogger();
  const { kube, csi, events, handler } = setUp({ log });
  kube.hold.add("patch volumeattachments va1");
  const stop = new AbortController();
  const syncing = handler.syncVolumeAttachment(va(false), stop.signal);
  await settle();
  assert.deepEqual(kube.calls.map((c) => c.what), [
    `patch ${PERSISTENT_VOLUMES.plural} pv1`,
    "patch volumeattachments va1",
  ]);
  stop.abort();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, [], "no ControllerPublishVolume after the stop");
  assert.equal(kube.calls.length, 2, "no attachError written");
  assert.deepEqual(events, [], "no Event");
  assert.deepEqual(stopLines(log), [`${STOP_LINE} (attacher stopping)`]);
});

Deno.test("attach: an attach already in the driver when the stop comes completes and writes attached", async () => {
  const { kube, csi, handler } = setUp();
  csi.holdPublish = true;
  const stop = new AbortController();
  const syncing = handler.syncVolumeAttachment(va(false), stop.signal);
  await settle();
  assert.deepEqual(csi.calls, ["publish vol1"]);
  stop.abort();
  csi.releasePublish();
  assert.equal(await syncing, "done");
  const status = kube.calls.find((c) => c.what === "patch volumeattachments/status va1");
  assert.ok(status, "attached: true is written");
  assert.equal(status.signal?.aborted ?? false, false, "the status write is not cut by the stop");
});

Deno.test("attach: without a stop, a held API answer is waited for and the attach completes", async () => {
  const { kube, csi, handler } = setUp();
  kube.hold.add("patch volumeattachments va1");
  const syncing = handler.syncVolumeAttachment(va(false), new AbortController().signal);
  await settle();
  kube.release();
  assert.equal(await syncing, "done");
  assert.deepEqual(csi.calls, ["publish vol1"]);
});

Deno.test("attach: an attach leaves the VolumeAttachment it was given (the cached one) unchanged", async () => {
  const { kube, handler } = setUp();
  const cached = va(false);
  cached.metadata.finalizers = ["other/finalizer"];
  cached.metadata.annotations = { keep: "me" };
  const before = structuredClone(cached);
  assert.equal(await handler.syncVolumeAttachment(cached, new AbortController().signal), "done");
  assert.ok(kube.calls.some((c) => c.what === "patch volumeattachments va1"), "finalizer patched");
  assert.deepEqual(cached, before);
});

Deno.test("attach: a fence that closes while the VA patch is in flight stops the attach before the publish", async () => {
  const fence = testFence();
  const { kube, csi, events, handler } = setUp({ fence });
  kube.hold.add("patch volumeattachments va1");
  const syncing = handler.syncVolumeAttachment(va(false), new AbortController().signal);
  await settle();
  fence.open = false;
  kube.release();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, [], "no ControllerPublishVolume");
  assert.deepEqual(kube.calls.map((c) => c.what), [
    `patch ${PERSISTENT_VOLUMES.plural} pv1`,
    "patch volumeattachments va1",
  ], "no attachError, no status");
  assert.deepEqual(events, []);
});

Deno.test("attach: the fence goes with the driver call; its no at the write leaves the VA as it is", async () => {
  const fence = testFence();
  const { kube, csi, events, handler } = setUp({ fence });
  // Open for the handler's own question right before the call, closed when the client asks
  // (right before the request's bytes would be written).
  kube.hold.add("patch volumeattachments va1");
  const syncing = handler.syncVolumeAttachment(va(false), new AbortController().signal);
  await settle();
  const askedBefore = fence.asked;
  const valid = fence.valid;
  fence.valid = () => fence.asked++ === askedBefore ? valid() : false;
  kube.release();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, [], "refused by the client: never sent");
  assert.equal(kube.calls.length, 2, "no attachError written");
  assert.deepEqual(events, []);
});

Deno.test("attach: a fence closed when the publish returns leaves attached unwritten for the next leader", async () => {
  const fence = testFence();
  const log = new FakeLogger();
  const { kube, csi, events, handler } = setUp({ fence, log });
  csi.onCall = () => fence.open = false; // a pause while the driver works
  assert.equal(
    await handler.syncVolumeAttachment(va(false), new AbortController().signal),
    "stopped",
  );
  assert.deepEqual(csi.calls, ["publish vol1"]);
  assert.equal(
    kube.calls.find((c) => c.what.startsWith("patch volumeattachments/status")),
    undefined,
  );
  assert.deepEqual(events, []);
  // After the driver call: the line says the fence stopped it, not that the driver was not called.
  assert.deepEqual(stopLines(log), [`${STOP_LINE} (lease fence closed)`]);
});

Deno.test("attach: the VA metadata patch and the status write carry the uid of the VA", async () => {
  const { kube, handler } = setUp();
  assert.equal(await handler.syncVolumeAttachment(va(false), new AbortController().signal), "done");
  const meta = kube.calls.find((c) => c.what === "patch volumeattachments va1");
  assert.deepEqual(meta?.patch, {
    type: "merge",
    body: {
      metadata: {
        annotations: { "csi.alpha.kubernetes.io/node-id": "node-1" },
        finalizers: [FIN],
        uid: "uid-va1",
      },
    },
  });
  const status = kube.calls.find((c) => c.what === "patch volumeattachments/status va1");
  assert.deepEqual(status?.patch, {
    type: "merge",
    body: { status: { attached: true, attachError: null }, metadata: { uid: "uid-va1" } },
  });
});

Deno.test("attach: a failed status write after the publish is retried without an attachError", async () => {
  const log = new FakeLogger();
  const { kube, csi, events, handler } = setUp({ log });
  kube.fail.set("patch volumeattachments/status va1", new Error("apiserver unavailable"));
  assert.equal(
    await handler.syncVolumeAttachment(va(false), new AbortController().signal),
    "retry",
  );
  assert.deepEqual(csi.calls, ["publish vol1"]);
  const statusWrites = kube.calls.filter((c) => c.what === "patch volumeattachments/status va1");
  assert.equal(statusWrites.length, 1, "only attached: true, no attachError after the publish");
  assert.deepEqual(events, [], "no Warning: the driver attached");
  const errors = log.lines.filter((l) => l.err !== undefined);
  assert.deepEqual(errors.map((l) => [l.msg, String(l.err)]), [[
    "Error processing VolumeAttachment, will retry",
    "Error: failed to mark as attached: apiserver unavailable",
  ]]);
});
