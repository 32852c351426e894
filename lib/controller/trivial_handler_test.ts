/**
 * The trivial handler (`trivial_handler.ts`): one status write marks a VA attached, as Go's
 * `markAsAttached(va, nil)` (external-attacher `pkg/controller/util.go`), with the VA's uid; the
 * lease fence stops it before the write and at the connection; a failed write is retried.
 */

import assert from "node:assert/strict";
import { FencedError, SOLE_REPLICA } from "../lease_fence.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { FakeHandlerKube, testFence } from "../../testkit/harness/handler_fixtures.ts";
import { TrivialHandler } from "./trivial_handler.ts";

const STATUS = "patch volumeattachments/status va1";

function va(status?: VolumeAttachment["status"]): VolumeAttachment {
  return {
    metadata: { name: "va1", uid: "uid-va1", resourceVersion: "1" },
    spec: {
      attacher: "csi.example.com",
      nodeName: "node1",
      source: { persistentVolumeName: "pv1" },
    },
    status,
  };
}

function sync(handler: TrivialHandler, attachment: VolumeAttachment) {
  return handler.syncVolumeAttachment(attachment, new AbortController().signal);
}

Deno.test("trivial handler: the status write carries the uid of the VA", async () => {
  const kube = new FakeHandlerKube();
  const handler = new TrivialHandler({ kube, log: nullLogger, fence: SOLE_REPLICA });
  assert.equal(await sync(handler, va()), "done");
  assert.deepEqual(kube.calls.map((c) => [c.what, c.patch]), [[
    STATUS,
    { type: "merge", body: { status: { attached: true }, metadata: { uid: "uid-va1" } } },
  ]]);
});

Deno.test("trivial handler: attachError and attachmentMetadata are nulled only when the VA carries them", async () => {
  const kube = new FakeHandlerKube();
  const handler = new TrivialHandler({ kube, log: nullLogger, fence: SOLE_REPLICA });
  assert.equal(await sync(handler, va({ attached: false })), "done");
  assert.equal(
    await sync(handler, va({ attached: false, attachError: { message: "old error" } })),
    "done",
  );
  assert.equal(
    await sync(handler, va({ attached: false, attachmentMetadata: { devicePath: "/dev/old" } })),
    "done",
  );
  assert.deepEqual(kube.calls.map((c) => (c.patch?.body as { status: unknown }).status), [
    { attached: true },
    { attached: true, attachError: null },
    { attached: true, attachmentMetadata: null },
  ]);
});

Deno.test("trivial handler: an attached VA -> done, nothing written", async () => {
  const kube = new FakeHandlerKube();
  const handler = new TrivialHandler({ kube, log: nullLogger, fence: SOLE_REPLICA });
  assert.equal(await sync(handler, va({ attached: true })), "done");
  assert.deepEqual(kube.calls, []);
});

Deno.test("trivial handler: a closed fence -> stopped, nothing written", async () => {
  const kube = new FakeHandlerKube();
  const fence = testFence();
  fence.open = false;
  const handler = new TrivialHandler({ kube, log: nullLogger, fence });
  assert.equal(await sync(handler, va()), "stopped");
  assert.deepEqual(kube.calls, []);
});

Deno.test("trivial handler: a write the fence refuses at the connection -> stopped", async () => {
  const kube = new FakeHandlerKube();
  kube.fail.set(STATUS, new FencedError());
  const log = new FakeLogger();
  const handler = new TrivialHandler({ kube, log, fence: SOLE_REPLICA });
  assert.equal(await sync(handler, va()), "stopped");
  assert.equal(log.lines.filter((l) => l.err !== undefined).length, 0);
});

Deno.test("trivial handler: a failed write -> retry, logged", async () => {
  const kube = new FakeHandlerKube();
  kube.fail.set(STATUS, new Error("apiserver unavailable"));
  const log = new FakeLogger();
  const handler = new TrivialHandler({ kube, log, fence: SOLE_REPLICA });
  assert.equal(await sync(handler, va()), "retry");
  assert.deepEqual(log.lines.filter((l) => l.err !== undefined).map((l) => l.msg), [
    "Failed to mark as attached",
  ]);
});

Deno.test("trivial handler: PersistentVolumes -> nothing to do", async () => {
  const kube = new FakeHandlerKube();
  const handler = new TrivialHandler({ kube, log: nullLogger, fence: SOLE_REPLICA });
  assert.equal(
    await handler.syncPersistentVolume({ metadata: { name: "pv1" }, spec: {} }),
    "done",
  );
  assert.deepEqual(kube.calls, []);
});
