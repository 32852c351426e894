import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import { OperationLatency } from "./operation_latency.ts";

/** Wall clock 2026-01-01T00:00:10Z; the monotonic clock starts elsewhere on purpose. */
const WALL = Date.parse("2026-01-01T00:00:10Z");

function setup() {
  const clock = new FakeClock(5_000);
  clock.stepWall(WALL - clock.wallNow());
  const attaches: number[] = [];
  const detaches: number[] = [];
  const latency = new OperationLatency({
    clock,
    sink: {
      observeAttachDuration: (s) => attaches.push(s),
      observeDetachDuration: (s) => detaches.push(s),
    },
  });
  const step = (ms: number) => clock.advance(ms);
  return { latency, attaches, detaches, step };
}

function va(fields: { created?: string; deleted?: string; attached?: boolean }): VolumeAttachment {
  return {
    metadata: {
      name: "va",
      uid: "uid-1",
      creationTimestamp: fields.created,
      deletionTimestamp: fields.deleted,
    },
    spec: { attacher: "d", nodeName: "n", source: { persistentVolumeName: "p" } },
    status: { attached: fields.attached ?? false },
  };
}

Deno.test("OperationLatency times an attach from when it was first seen to the attached write", () => {
  const { latency, attaches, step } = setup();
  const created = va({ created: "2026-01-01T00:00:09Z" }); // created before we saw it
  latency.seen(created);
  step(1500);
  latency.seen(created); // later events do not move the start
  step(1000);
  latency.attached(created);
  assert.deepEqual(attaches, [2.5]);
  latency.attached(created);
  assert.deepEqual(attaches, [2.5], "one observation per VA: nothing is left timing it");
});

Deno.test("OperationLatency starts at the creationTimestamp when it is later than our first sight", () => {
  const { latency, attaches, step } = setup();
  // The API server's clock runs 2 s ahead of ours.
  const created = va({ created: "2026-01-01T00:00:12Z" });
  latency.seen(created);
  step(3000);
  latency.attached(created);
  assert.deepEqual(attaches, [1]);
});

Deno.test("OperationLatency times a detach from the deletion to the finalizer removal", () => {
  const { latency, attaches, detaches, step } = setup();
  const attachedVa = va({ created: "2026-01-01T00:00:00Z", attached: true });
  latency.seen(attachedVa);
  latency.attached(attachedVa);
  assert.deepEqual(attaches, [], "an attached VA waits for nothing");
  const deleting = va({ created: "2026-01-01T00:00:00Z", deleted: "2026-01-01T00:00:10Z" });
  latency.seen(deleting);
  step(4250);
  latency.detached(deleting);
  assert.deepEqual(detaches, [4.25]);
  assert.deepEqual(attaches, []);
});

Deno.test("OperationLatency drops a VA deleted before its attach, and one that is gone", () => {
  const { latency, attaches, detaches } = setup();
  latency.seen(va({ created: "2026-01-01T00:00:10Z" }));
  latency.forget("va");
  latency.attached(va({}));
  assert.deepEqual(attaches, [], "the attach it waited for was abandoned");
  latency.detached(va({}));
  assert.deepEqual(detaches, []);
});

Deno.test("OperationLatency records a detach whose delete event came before the finalizer removal's answer", () => {
  const { latency, detaches, step } = setup();
  const deleting = (uid: string) => ({
    ...va({ deleted: "2026-01-01T00:00:10Z" }),
    metadata: { name: uid, uid, deletionTimestamp: "2026-01-01T00:00:10Z" },
  });
  latency.seen(deleting("uid-1"));
  step(2000);
  // The watch delivers the VA's deletion (our finalizer was its last) before the PATCH answer.
  latency.forget("uid-1");
  latency.detached(deleting("uid-1"));
  assert.deepEqual(detaches, [2]);
  latency.detached(deleting("uid-1"));
  assert.deepEqual(detaches, [2], "once");
  // Gone VAs whose detach nobody finishes are kept only up to a bound: the oldest go first.
  for (let i = 0; i < 100; i++) {
    latency.seen(deleting(`gone-${i}`));
    latency.forget(`gone-${i}`);
  }
  latency.detached(deleting("gone-0"));
  assert.deepEqual(detaches, [2], "pushed out by newer ones");
  latency.detached(deleting("gone-99"));
  assert.equal(detaches.length, 2);
});

Deno.test("OperationLatency starts anew for a VA re-created under the same name", () => {
  const { latency, attaches, detaches, step } = setup();
  const first = va({ created: "2026-01-01T00:00:10Z" });
  latency.seen(first);
  step(5000);
  // Deleted and created again under the same name before the attach finished.
  latency.forget("va");
  const second = { ...first, metadata: { ...first.metadata, uid: "uid-2" } };
  latency.seen(second);
  step(1000);
  latency.attached(first);
  assert.deepEqual(attaches, [], "the first VA's attach was abandoned");
  latency.attached(second);
  assert.deepEqual(attaches, [1], "timed from the second VA's first sight");
  const deleting = { ...second, metadata: { ...second.metadata, deletionTimestamp: "x" } };
  latency.seen(deleting);
  step(2000);
  latency.detached({ ...deleting, metadata: { ...deleting.metadata, uid: "uid-1" } });
  assert.deepEqual(detaches, [], "another uid does not finish this detach");
  latency.detached(deleting);
  assert.deepEqual(detaches, [2]);
});
