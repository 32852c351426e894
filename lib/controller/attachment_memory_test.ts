import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { OperationLatency } from "./operation_latency.ts";

function va(name: string, uid: string, resourceVersion: string): VolumeAttachment {
  return {
    metadata: { name, uid, resourceVersion },
    spec: { attacher: "d", nodeName: "n", source: { persistentVolumeName: "p" } },
  };
}

function setUp() {
  const clock = new FakeClock(0);
  const attaches: number[] = [];
  const latency = new OperationLatency({
    clock,
    sink: { observeAttachDuration: (s) => attaches.push(s), observeDetachDuration: () => {} },
  });
  const backoffForgotten: string[] = [];
  const memory = new AttachmentMemory({
    backoff: { forget: (name) => backoffForgotten.push(name) },
    latency,
  });
  return { clock, memory, attaches, backoffForgotten };
}

/** Puts one of every kind of mark on `name`. */
function remember(memory: AttachmentMemory, name: string): void {
  memory.markOutOfSync(name);
  memory.recordOwnWrite(name, va(name, `uid-${name}`, "10"));
  memory.rememberUnrecordedPublish(name, {
    uid: `uid-${name}`,
    publishContext: { a: "b" },
    request: "[]",
  });
  memory.recordFailure(name, "attach");
  memory.seen(va(name, `uid-${name}`, "9"));
}

Deno.test("AttachmentMemory.forget() drops every mark, the latency timer and the backoff of one VA", () => {
  const { clock, memory, attaches, backoffForgotten } = setUp();
  remember(memory, "va-1");
  remember(memory, "va-2");
  memory.forget("va-1");
  clock.advance(1000);

  assert.deepEqual(backoffForgotten, ["va-1"]);
  assert.equal(memory.takeOutOfSync("va-1"), false);
  assert.equal(memory.isOlderThanOwnWrite(va("va-1", "uid-va-1", "9")), false);
  assert.equal(memory.takeUnrecordedPublish("va-1"), undefined);
  assert.equal(memory.takeFailure("va-1"), undefined);
  memory.attached(va("va-1", "uid-va-1", "11"));
  assert.deepEqual(attaches, [], "the attach timer of va-1 is gone");

  // The other VA keeps everything.
  assert.equal(memory.takeOutOfSync("va-2"), true);
  assert.equal(memory.isOlderThanOwnWrite(va("va-2", "uid-va-2", "9")), true);
  assert.equal(memory.takeUnrecordedPublish("va-2")?.request, "[]");
  assert.equal(memory.takeFailure("va-2"), "attach");
  memory.attached(va("va-2", "uid-va-2", "11"));
  assert.deepEqual(attaches, [1]);
});

Deno.test("AttachmentMemory marks are taken once", () => {
  const { memory } = setUp();
  remember(memory, "va-1");
  assert.equal(memory.takeOutOfSync("va-1"), true);
  assert.equal(memory.takeOutOfSync("va-1"), false);
  assert.deepEqual(memory.takeUnrecordedPublish("va-1"), {
    uid: "uid-va-1",
    publishContext: { a: "b" },
    request: "[]",
  });
  assert.equal(memory.takeUnrecordedPublish("va-1"), undefined);
  assert.equal(memory.takeFailure("va-1"), "attach");
  assert.equal(memory.takeFailure("va-1"), undefined);
});

Deno.test("AttachmentMemory.isOlderThanOwnWrite() orders resourceVersions by the API rule, per uid", () => {
  const { memory } = setUp();
  memory.recordOwnWrite("va-1", va("va-1", "u1", "100"));
  assert.equal(memory.isOlderThanOwnWrite(va("va-1", "u1", "99")), true, "99 < 100, not as text");
  assert.equal(memory.isOlderThanOwnWrite(va("va-1", "u2", "5")), false, "another uid");
  assert.equal(
    memory.isOlderThanOwnWrite(va("va-1", "u1", "5")),
    false,
    "the record ended when a cached VA was not older",
  );
  memory.recordOwnWrite("va-1", va("va-1", "u1", "100"));
  assert.equal(memory.isOlderThanOwnWrite(va("va-1", "u1", "abc")), false, "never stale");
  memory.recordOwnWrite("va-2", va("va-2", "u1", "not-a-number"));
  assert.equal(memory.isOlderThanOwnWrite(va("va-2", "u1", "1")), false, "not remembered");
  memory.recordOwnWrite("va-3", va("va-3", "u1", "9007199254740993"));
  assert.equal(
    memory.isOlderThanOwnWrite(va("va-3", "u1", "9007199254740992")),
    true,
    "beyond 2^53",
  );
  memory.recordOwnWrite("va-4", va("va-4", "u1", "100"));
  assert.equal(
    memory.isOlderThanOwnWrite(va("va-4", "u1", "099")),
    false,
    "leading zero: no order",
  );
});
