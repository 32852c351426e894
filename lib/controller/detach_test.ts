/**
 * The detach (`detach.ts`) as the handler runs it: where the stop signal and the lease fence end
 * it, and what its writes carry.
 */

import assert from "node:assert/strict";
import { notFoundError, SECRETS, VOLUME_ATTACHMENTS } from "../kube/api.ts";
import { settle, setUp, testFence, va } from "../../testkit/harness/handler_fixtures.ts";
import type { VolumeAttachment } from "../kube/types.ts";

Deno.test("detach: the stop signal ends a detach waiting for its secret; no unpublish, nothing recorded", async () => {
  const { kube, csi, events, handler } = setUp({ secret: true });
  kube.hold.add(`get ${SECRETS.plural} s1`);
  const stop = new AbortController();
  const syncing = handler.syncVolumeAttachment(va(true), stop.signal);
  await settle();
  assert.deepEqual(kube.calls.map((c) => c.what), [`get ${SECRETS.plural} s1`]);
  stop.abort();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, []);
  assert.equal(kube.calls.length, 1, "the finalizer stays: no write");
  assert.deepEqual(events, []);
});

Deno.test("detach: a fence closed when the unpublish returns keeps the finalizer for the next leader", async () => {
  const fence = testFence();
  const { kube, csi, handler } = setUp({ fence });
  csi.onCall = () => fence.open = false;
  assert.equal(
    await handler.syncVolumeAttachment(va(true), new AbortController().signal),
    "stopped",
  );
  assert.deepEqual(csi.calls, ["unpublish vol1"]);
  assert.deepEqual(kube.calls, [], "the finalizer stays, no status write");
});

Deno.test("detach: the finalizer removal and the status write carry the uid of the VA", async () => {
  const { kube, csi, handler } = setUp();
  assert.equal(await handler.syncVolumeAttachment(va(true), new AbortController().signal), "done");
  assert.deepEqual(csi.calls, ["unpublish vol1"]);
  assert.deepEqual(kube.calls.map((c) => [c.what, c.patch]), [
    ["patch volumeattachments va1", {
      type: "merge",
      body: { metadata: { finalizers: null, uid: "uid-va1" } },
    }],
    ["patch volumeattachments/status va1", {
      type: "merge",
      body: { status: { attached: false }, metadata: { uid: "uid-va1" } },
    }],
  ]);
});

Deno.test("detach: an answer showing the VA deleted with its finalizer ends the detach, no status write", async () => {
  const { kube, csi, events, handler } = setUp();
  const gone = va(true);
  gone.metadata.finalizers = undefined;
  kube.objects.set("volumeattachments/va1", gone);
  assert.equal(await handler.syncVolumeAttachment(va(true), new AbortController().signal), "done");
  assert.deepEqual(csi.calls, ["unpublish vol1"]);
  assert.deepEqual(kube.calls.map((c) => c.what), ["patch volumeattachments va1"]);
  assert.deepEqual(events, []);
});

// The VA still exists after the removal: another finalizer, or a grace period, is left.
for (
  const [left, change] of [
    ["another finalizer", (v: VolumeAttachment) => v.metadata.finalizers = ["example.com/keep"]],
    ["a grace period", (v: VolumeAttachment) => {
      v.metadata.finalizers = undefined;
      v.metadata.deletionGracePeriodSeconds = 30;
    }],
  ] as const
) {
  Deno.test(`detach: an answer with ${left} left still gets the status write`, async () => {
    const { kube, handler } = setUp();
    const answer = va(true);
    change(answer);
    kube.objects.set("volumeattachments/va1", answer);
    assert.equal(
      await handler.syncVolumeAttachment(va(true), new AbortController().signal),
      "done",
    );
    assert.deepEqual(kube.calls.map((c) => c.what), [
      "patch volumeattachments va1",
      "patch volumeattachments/status va1",
    ]);
  });
}

Deno.test("detach: a status write answered NotFound (the VA went with its finalizer) is done", async () => {
  const { kube, events, handler } = setUp();
  kube.fail.set("patch volumeattachments/status va1", notFoundError(VOLUME_ATTACHMENTS, "va1"));
  assert.equal(await handler.syncVolumeAttachment(va(true), new AbortController().signal), "done");
  assert.deepEqual(events, []);
});

Deno.test("detach: a failed status write is recorded as detachError and retried", async () => {
  const { kube, events, handler } = setUp();
  kube.fail.set("patch volumeattachments/status va1", new Error("apiserver unavailable"));
  assert.equal(
    await handler.syncVolumeAttachment(va(true), new AbortController().signal),
    "retry",
  );
  const writes = kube.calls.filter((c) => c.what === "patch volumeattachments/status va1");
  assert.equal(writes.length, 2, "attached: false, then detachError");
  const body = writes[1]!.patch!.body as { status: { detachError: { message: string } } };
  assert.equal(
    body.status.detachError.message,
    "could not mark as detached: apiserver unavailable",
  );
  assert.deepEqual(events, ["Warning DetachFailed"]);
});
