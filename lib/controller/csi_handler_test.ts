/**
 * The CSI handler (`csi_handler.ts`): the one conclusion of a sync (done, retry after recording
 * the failure, stopped), for VolumeAttachments and PersistentVolumes alike; a closed lease fence
 * writes nothing; a failed write of `attachError`/`detachError` is retried, the Event still
 * tells the error, one retry line logs both errors.
 */

import assert from "node:assert/strict";
import { FencedError } from "../lease_fence.ts";
import { PERSISTENT_VOLUMES } from "../kube/api.ts";
import type { PersistentVolume } from "../kube/types.ts";
import { createLogger } from "../observe/log.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import {
  FIN,
  pv,
  setUp,
  stopLines,
  testFence,
  va,
} from "../../testkit/harness/handler_fixtures.ts";

/** `pv1` being deleted, with our finalizer. */
function deletedPv(): PersistentVolume {
  return {
    ...pv(false),
    metadata: { name: "pv1", finalizers: [FIN], deletionTimestamp: "2026-01-01T00:00:00Z" },
  };
}

Deno.test("CsiHandler: a closed fence writes nothing at all: not the PV finalizer, not the VA", async () => {
  const fence = testFence();
  fence.open = false;
  const { kube, csi, handler } = setUp({ fence });
  assert.equal(
    await handler.syncVolumeAttachment(va(false), new AbortController().signal),
    "stopped",
  );
  assert.equal(
    await handler.syncVolumeAttachment(va(true), new AbortController().signal),
    "stopped",
  );
  assert.deepEqual(kube.calls, []);
  assert.deepEqual(csi.calls, []);
});

Deno.test("CsiHandler: a closed fence keeps the PV finalizer", async () => {
  const fence = testFence();
  const { kube, handler } = setUp({ fence });
  const deleted: PersistentVolume = {
    ...pv(false),
    metadata: { name: "pv1", finalizers: [FIN], deletionTimestamp: "2026-01-01T00:00:00Z" },
  };
  fence.open = false;
  assert.equal(await handler.syncPersistentVolume(deleted), "stopped");
  assert.equal(kube.calls.length, 0);
  fence.open = true;
  assert.equal(await handler.syncPersistentVolume(deleted), "done");
  assert.deepEqual(kube.calls.map((c) => c.what), [`patch ${PERSISTENT_VOLUMES.plural} pv1`]);
});

for (const op of ["attach", "detach"] as const) {
  Deno.test(`CsiHandler: a failed ${op}Error write retries, records the Event, logs both errors on one line`, async () => {
    const lines: string[] = [];
    const log = createLogger({ verbosity: 0, format: "json", write: (l) => lines.push(l) });
    const { kube, csi, events, handler } = setUp({ log });
    const deleting = op === "detach";
    const attachment = va(deleting);
    // The step's failure: the PV finalizer patch is refused (attach), the PV is not in the
    // cache (detach).
    kube.fail.set(`patch ${PERSISTENT_VOLUMES.plural} pv1`, new Error("forbidden"));
    if (deleting) attachment.spec.source = { persistentVolumeName: "pv2" };
    kube.fail.set("patch volumeattachments/status va1", new Error("apiserver unavailable"));

    assert.equal(
      await handler.syncVolumeAttachment(attachment, new AbortController().signal),
      "retry",
    );
    assert.deepEqual(csi.calls, []);
    assert.equal(kube.calls.at(-1)?.what, "patch volumeattachments/status va1", "the error write");
    assert.deepEqual(events, [`Warning ${deleting ? "DetachFailed" : "AttachFailed"}`]);
    const errors = lines.map((l) => JSON.parse(l)).filter((l) => l.err !== undefined);
    assert.equal(errors.length, 1, `one error line: ${lines.join("")}`);
    assert.equal(errors[0].msg, "Error processing VolumeAttachment, will retry");
    assert.match(
      errors[0].err,
      deleting
        ? /^failed to detach: .*"pv2" not found/
        : /^failed to attach: could not add PersistentVolume finalizer: forbidden$/,
    );
    assert.equal(errors[0].saveError, `failed to save ${op}Error: apiserver unavailable`);
  });
}

Deno.test("CsiHandler: a failed PV finalizer removal is logged and retried", async () => {
  const log = new FakeLogger();
  const { kube, handler } = setUp({ log });
  kube.fail.set(`patch ${PERSISTENT_VOLUMES.plural} pv1`, new Error("forbidden"));
  assert.equal(await handler.syncPersistentVolume(deletedPv()), "retry");
  const errors = log.lines.filter((l) => l.err !== undefined);
  assert.deepEqual(errors.map((l) => [l.msg, String(l.err), l.fields.persistentVolume]), [[
    "Failed to remove PersistentVolume finalizer, will retry",
    "Error: forbidden",
    "pv1",
  ]]);
});

Deno.test("CsiHandler: a PV finalizer removal the fence refuses at the connection stops, and says so", async () => {
  const log = new FakeLogger();
  const { kube, handler } = setUp({ log });
  kube.fail.set(`patch ${PERSISTENT_VOLUMES.plural} pv1`, new FencedError());
  assert.equal(await handler.syncPersistentVolume(deletedPv()), "stopped");
  assert.equal(log.lines.filter((l) => l.err !== undefined).length, 0, "no error line");
  assert.deepEqual(stopLines(log), [
    "Sync stopped before its next write or driver call; the PersistentVolume is left for the next leader (lease fence closed)",
  ]);
});

Deno.test("CsiHandler: a PV still named by a VA keeps its finalizer without a write", async () => {
  const { kube, handler } = setUp({ volumeAttachments: [va(false)] });
  assert.equal(await handler.syncPersistentVolume(deletedPv()), "done");
  assert.deepEqual(kube.calls, []);
});

Deno.test("CsiHandler: the attachError write carries the uid of the VA the sync started from", async () => {
  const { kube, handler } = setUp();
  kube.fail.set(`patch ${PERSISTENT_VOLUMES.plural} pv1`, new Error("forbidden"));
  assert.equal(
    await handler.syncVolumeAttachment(va(false), new AbortController().signal),
    "retry",
  );
  const write = kube.calls.find((c) => c.what === "patch volumeattachments/status va1");
  const body = write?.patch?.body as { metadata?: { uid?: string }; status: unknown };
  assert.equal(body.metadata?.uid, "uid-va1");
  assert.deepEqual(Object.keys(body.status as object), ["attachError"]);
});
