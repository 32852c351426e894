/**
 * What attach and detach share (`sync_step.ts`): the step results (a failure placed on its VA, a
 * stop that stays a stop, a refused driver call that is a stop), the source lookups with the Go
 * attacher's texts, the stop checks and the call options.
 */

import assert from "node:assert/strict";
import { FENCE_REFUSED_MESSAGE, FencedError, SOLE_REPLICA } from "../lease_fence.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { testFence } from "../../testkit/harness/handler_fixtures.ts";
import {
  attempt,
  callOptions,
  DONE,
  failed,
  failedBeforeDriver,
  failedDriverCall,
  failure,
  mustStop,
  ok,
  sourcePersistentVolume,
  STOPPED,
  type SyncContext,
} from "./sync_step.ts";

function va(source: VolumeAttachment["spec"]["source"] = { persistentVolumeName: "pv1" }) {
  const attachment: VolumeAttachment = {
    metadata: { name: "va1" },
    spec: { attacher: "csi.example.com", nodeName: "node1", source },
  };
  return attachment;
}

const PV: PersistentVolume = {
  metadata: { name: "pv1" },
  spec: { csi: { driver: "csi.example.com", volumeHandle: "vol1" } },
};

/** A context with only what the checks under test read. */
function context(driverName: string, fence = SOLE_REPLICA): SyncContext {
  return {
    fence,
    opts: {
      driverName,
      timeoutMs: 1500,
      supportsPublishReadOnly: false,
      supportsSingleNodeMultiWriter: false,
      defaultFsType: "ext4",
      attachErrorCodes: false,
    },
  } as Partial<SyncContext> as SyncContext;
}

Deno.test("sync step: ok, failed and DONE are the step results", () => {
  assert.deepEqual(ok(3), { kind: "ok", value: 3 });
  assert.deepEqual(DONE, { kind: "ok", value: undefined });
  assert.deepEqual(failed("e"), { kind: "failed", error: "e" });
  assert.ok(!("record" in failed("e")), "no record unless given");
  const record = { op: "attach" as const, va: va() };
  assert.deepEqual(failed("e", record), { kind: "failed", error: "e", record });
});

Deno.test("sync step: failure places a step's failure on its VA; a stop stays a stop", () => {
  const attachment = va();
  assert.deepEqual(failure("detach", attachment, failed("e")), {
    kind: "failed",
    error: "e",
    record: { op: "detach", va: attachment },
  });
  assert.equal(failure("detach", attachment, STOPPED), STOPPED);
});

Deno.test("sync step: a failure before the driver after the stop signal is a stop", () => {
  const stop = new AbortController();
  const attachment = va();
  assert.equal(failedBeforeDriver("attach", attachment, failed("e"), stop.signal).kind, "failed");
  stop.abort();
  assert.equal(failedBeforeDriver("attach", attachment, failed("e"), stop.signal), STOPPED);
});

Deno.test("sync step: a driver call the fence refused is a stop, logged with the call", () => {
  const log = new FakeLogger();
  assert.equal(failedDriverCall("detach", va(), new FencedError(), log), STOPPED);
  assert.deepEqual(log.lines.map((l) => [l.msg, l.fields.call]), [
    [FENCE_REFUSED_MESSAGE, "ControllerUnpublishVolume"],
  ]);
  const attachment = va();
  const error = new Error("rpc error");
  assert.deepEqual(failedDriverCall("attach", attachment, error, nullLogger), {
    kind: "failed",
    error,
    record: { op: "attach", va: attachment },
  });
});

Deno.test("sync step: attempt turns a throw into a failed step", () => {
  assert.deepEqual(attempt(() => 1), ok(1));
  const error = new Error("bad input");
  assert.deepEqual(
    attempt(() => {
      throw error;
    }),
    failed(error),
  );
});

Deno.test("sync step: the source PV from the cache, or the Go attacher's error", () => {
  const stores = { persistentVolumes: new FakeInformer<PersistentVolume>([PV]) };
  assert.deepEqual(sourcePersistentVolume(stores, va()), ok(PV));
  const message = (source: VolumeAttachment["spec"]["source"]) => {
    const step = sourcePersistentVolume(stores, va(source));
    return step.kind === "failed" ? (step.error as Error).message : step.kind;
  };
  assert.equal(message({ persistentVolumeName: "pv2" }), 'persistentvolume "pv2" not found');
  assert.equal(
    message({}),
    "neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source",
  );
  assert.equal(
    message({ persistentVolumeName: "pv1", inlineVolumeSpec: PV.spec }),
    "both InlineCSIVolumeSource and PersistentVolumeName specified in VA source",
  );
  assert.deepEqual(
    sourcePersistentVolume(stores, va({ inlineVolumeSpec: PV.spec })),
    ok(undefined),
  );
});

Deno.test("sync step: mustStop on the stop signal without asking the fence, or on a closed fence", () => {
  const fence = testFence();
  const stop = new AbortController();
  const log = new FakeLogger();
  assert.equal(mustStop(context("d", fence), stop.signal, log), false);
  assert.equal(fence.asked, 1);
  fence.open = false;
  assert.equal(mustStop(context("d", fence), stop.signal, log), true);
  assert.deepEqual(log.lines.map((l) => l.msg), [FENCE_REFUSED_MESSAGE]);
  stop.abort();
  assert.equal(mustStop(context("d", fence), stop.signal, log), true);
  assert.equal(fence.asked, 2, "the stop signal is enough");
});

Deno.test("sync step: call options carry the migrated label only for a migration driver", () => {
  assert.deepEqual(callOptions(context("csi.example.com"), true), {
    timeoutMs: 1500,
    fence: SOLE_REPLICA,
  });
  assert.deepEqual(callOptions(context("pd.csi.storage.gke.io"), true), {
    timeoutMs: 1500,
    migrated: true,
    fence: SOLE_REPLICA,
  });
});
