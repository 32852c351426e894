import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { ApiError, EVENTS, type KubeApi } from "../kube/api.ts";
import { KubeClient } from "../kube/client.ts";
import { connectionFromKubeconfigs } from "../kube/config.ts";
import { nullLogger } from "../observe/logger.ts";
import type { CoreEvent } from "./correlator.ts";
import type { ObjectReference } from "../kube/types.ts";
import { EventRecorder } from "./recorder.ts";

const VA: ObjectReference = {
  kind: "VolumeAttachment",
  apiVersion: "storage.k8s.io/v1",
  name: "va1",
  uid: "uid-1",
};

async function setUp() {
  const server = await MemoryApiServer.start();
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const clock = new FakeClock();
  const kube = new KubeClient({ connection }, {});
  const recorder = new EventRecorder(
    { kube, clock, log: nullLogger },
    { component: "csi-attacher", host: "replica-1" },
  );
  const stop = new AbortController();
  const running = recorder.run(stop.signal);
  return {
    server,
    clock,
    recorder,
    eventRequests: () => server.requests.filter((r) => r.resource === "events"),
    events: () => server.list<CoreEvent>(EVENTS, "default").items,
    async [Symbol.asyncDispose]() {
      stop.abort();
      await running;
      await server[Symbol.asyncDispose]();
    },
  };
}

Deno.test("EventRecorder posts a VolumeAttachment failing 100 times as one Event whose count grows, at a bounded rate", async () => {
  await using t = await setUp();
  for (let i = 0; i < 100; i++) {
    t.recorder.record(VA, "Warning", "AttachFailed", "rpc error: code = Internal desc = boom");
    await t.recorder.idle();
    t.clock.advance(1000);
  }
  let events = t.events();
  assert.equal(events.length, 1);
  const [event] = events;
  assert.equal(event!.metadata.namespace, "default");
  assert.deepEqual(event!.involvedObject, VA);
  assert.equal(event!.type, "Warning");
  assert.equal(event!.reason, "AttachFailed");
  assert.equal(event!.message, "rpc error: code = Internal desc = boom");
  assert.deepEqual(event!.source, { component: "csi-attacher", host: "replica-1" });
  // 25 requests (the per-object burst): one create, then patches of the same Event.
  assert.equal(event!.count, 25);
  assert.deepEqual(
    t.eventRequests().map((r) => `${r.verb} ${r.name}`),
    [
      "create ",
      ...Array.from({ length: 24 }, () => `patch ${event!.metadata.name}`),
    ],
  );

  // Five minutes later one more gets through, with every occurrence counted.
  t.clock.advance(300_000);
  t.recorder.record(VA, "Warning", "AttachFailed", "rpc error: code = Internal desc = boom");
  await t.recorder.idle();
  events = t.events();
  assert.equal(events.length, 1);
  assert.equal(events[0]!.count, 101);
  assert.equal(t.eventRequests().length, 26);
});

Deno.test("EventRecorder creates the Event again when the one it would patch is gone", async () => {
  await using t = await setUp();
  t.recorder.record(VA, "Warning", "DetachFailed", "boom");
  await t.recorder.idle();
  const [first] = t.events();
  t.server.delete(EVENTS, first!.metadata.name, "default");
  t.clock.advance(1000);
  t.recorder.record(VA, "Warning", "DetachFailed", "boom");
  await t.recorder.idle();
  const events = t.events();
  assert.equal(events.length, 1);
  assert.deepEqual(t.eventRequests().map((r) => r.verb), ["create", "patch", "create"]);
  // The re-created Event keeps the count of the occurrences seen.
  assert.equal(events[0]!.count, 2);
});

Deno.test("EventRecorder.record() returns at once and drops Events beyond its queue while the API server does not answer", async () => {
  const started: string[] = [];
  let answer: (() => void) | undefined;
  const slow = {
    create(_res: unknown, obj: CoreEvent) {
      started.push(obj.reason);
      return new Promise((resolve) => answer = () => resolve(obj));
    },
  } as unknown as KubeApi;
  const clock = new FakeClock();
  const recorder = new EventRecorder(
    { kube: slow, clock, log: nullLogger },
    { component: "csi-attacher", maxQueued: 2 },
  );
  const stop = new AbortController();
  const running = recorder.run(stop.signal);
  try {
    recorder.record({ ...VA, name: "va-A" }, "Warning", "A", "boom");
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.deepEqual(started, ["A"]); // being posted, and the server does not answer
    for (const reason of ["B", "C", "D"]) {
      recorder.record({ ...VA, name: `va-${reason}` }, "Warning", reason, "boom");
    }
    // "B" and "C" wait in the queue; "D" found it full and was dropped.
    for (let i = 0; i < 3 && answer; i++) {
      const release = answer;
      answer = undefined;
      release();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    await recorder.idle();
    assert.deepEqual(started, ["A", "B", "C"]);
  } finally {
    stop.abort();
    await running;
  }
});

/** A KubeApi whose `create` answers with the scripted errors first, then succeeds. */
function scriptedCreate(errors: Error[]): { kube: KubeApi; calls: () => number } {
  let calls = 0;
  const kube = {
    create(_res: unknown, obj: CoreEvent) {
      calls++;
      const err = errors.shift();
      return err ? Promise.reject(err) : Promise.resolve({ ...obj });
    },
  } as unknown as KubeApi;
  return { kube, calls: () => calls };
}

async function untilTimerPending(clock: FakeClock): Promise<void> {
  for (let i = 0; i < 100 && clock.pendingTimers() === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  assert.ok(clock.pendingTimers() > 0, "the recorder sleeps before its retry");
}

Deno.test("EventRecorder retries an Event while the API server cannot be reached", async () => {
  const unreachable = () => new ApiError(0, "", "connect ECONNREFUSED");
  const { kube, calls } = scriptedCreate([unreachable(), unreachable()]);
  const clock = new FakeClock();
  const recorder = new EventRecorder(
    { kube, clock, log: nullLogger },
    { component: "csi-attacher", retrySleepMs: 10_000 },
  );
  const stop = new AbortController();
  const running = recorder.run(stop.signal);
  try {
    recorder.record(VA, "Warning", "AttachFailed", "boom");
    for (let retry = 1; retry <= 2; retry++) {
      await untilTimerPending(clock);
      assert.equal(calls(), retry);
      clock.advanceToNextTimer();
    }
    await recorder.idle();
    assert.equal(calls(), 3);
  } finally {
    stop.abort();
    await running;
  }
});

Deno.test("EventRecorder does not retry an Event the API server refused", async () => {
  const { kube, calls } = scriptedCreate([new ApiError(422, "Invalid", "event is invalid")]);
  const clock = new FakeClock();
  const recorder = new EventRecorder(
    { kube, clock, log: nullLogger },
    { component: "csi-attacher" },
  );
  const stop = new AbortController();
  const running = recorder.run(stop.signal);
  try {
    recorder.record(VA, "Warning", "AttachFailed", "boom");
    await recorder.idle();
    assert.equal(calls(), 1);
    assert.equal(clock.pendingTimers(), 0);
  } finally {
    stop.abort();
    await running;
  }
});
