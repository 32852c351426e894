import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { createMetrics } from "../observe/metrics.ts";
import { LanedWorkQueue, LaneList } from "./lanes.ts";
import { WorkQueue } from "./queue.ts";
import { ItemExponentialFailureRateLimiter } from "./rate_limiters.ts";
import { takeAllReady, takeReady } from "../../testkit/harness/ready_work.ts";

const rateLimiter = new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 });

/** A two-lane queue whose lane of each key the test sets in `state`. */
function laned(clock = new FakeClock(0)) {
  const state = new Map<string, "attach" | "detach">();
  const metrics = createMetrics({});
  const q = new LanedWorkQueue({
    rateLimiter,
    clock,
    metricsProvider: metrics.queueMetricsProvider,
  }, {
    name: "va",
    lanes: { names: ["attach", "detach"], laneOf: (key) => state.get(key) ?? "attach" },
  });
  return { q, state, metrics, clock };
}

function drain(q: LanedWorkQueue, lane?: string): Promise<string[]> {
  return takeAllReady(q, lane);
}

Deno.test("LanedWorkQueue: each key goes to the lane laneOf names, FIFO per lane", async () => {
  const { q, state } = laned();
  try {
    state.set("d1", "detach");
    state.set("d2", "detach");
    for (const key of ["d1", "a1", "d2", "a2"]) q.add(key);
    assert.equal(q.len(), 4);
    assert.equal(q.len("attach"), 2);
    assert.equal(q.len("detach"), 2);
    assert.deepEqual(await drain(q, "attach"), ["a1", "a2"]);
    assert.deepEqual(await drain(q, "detach"), ["d1", "d2"]);
  } finally {
    q.shutDown();
  }
});

Deno.test("LanedWorkQueue: get() without a lane takes the key that became ready first", async () => {
  const { q, state } = laned();
  try {
    state.set("d1", "detach");
    for (const key of ["d1", "a1", "a2"]) q.add(key);
    assert.deepEqual(await drain(q), ["d1", "a1", "a2"]);
  } finally {
    q.shutDown();
  }
});

Deno.test("LanedWorkQueue: a waiting key whose lane changed moves when it is added again", async () => {
  const { q, state } = laned();
  try {
    q.add("va-1");
    q.add("va-2");
    state.set("va-1", "detach"); // deleted while its attach waited
    q.add("va-1");
    assert.equal(q.len("attach"), 1);
    assert.equal(q.len("detach"), 1);
    assert.deepEqual(await drain(q, "attach"), ["va-2"]);
    assert.deepEqual(await drain(q, "detach"), ["va-1"]);
    assert.equal(
      await takeReady(q),
      undefined,
      "the old lane's entry must not hand the key out again",
    );
  } finally {
    q.shutDown();
  }
});

Deno.test("LanedWorkQueue: a key in processing is not handed to the other lane's workers", async () => {
  const { q, state } = laned();
  try {
    q.add("va-1");
    assert.equal(await takeReady(q, "attach"), "va-1");
    state.set("va-1", "detach");
    q.add("va-1");
    assert.equal(await takeReady(q, "detach"), undefined, "one worker at a time, across lanes");
    assert.equal(q.isQueuedOrProcessing("va-1"), true);
    q.done("va-1");
    assert.equal(q.len("detach"), 1, "done puts it in the lane it belongs in now");
    assert.equal(await takeReady(q, "detach"), "va-1");
    q.done("va-1");
    assert.equal(q.isQueuedOrProcessing("va-1"), false);
  } finally {
    q.shutDown();
  }
});

Deno.test("LanedWorkQueue: get(lane) waits for a key of its own lane only", async () => {
  const { q, state } = laned();
  try {
    const got: string[] = [];
    const detachWorker = q.get("detach").then((k) => got.push(`detach:${k}`));
    q.add("a1");
    await Promise.resolve();
    assert.deepEqual(got, []);
    assert.equal(q.len("attach"), 1, "an attach key is not handed to a detach worker");
    state.set("d1", "detach");
    q.add("d1");
    await detachWorker;
    assert.deepEqual(got, ["detach:d1"]);
    assert.equal(await q.get("attach"), "a1");
  } finally {
    q.shutDown();
  }
});

Deno.test("LanedWorkQueue: shutDown releases the waiters of every lane", async () => {
  const { q } = laned();
  const waits = [q.get("attach"), q.get("detach"), q.get()];
  q.shutDown();
  assert.deepEqual(await Promise.all(waits), [undefined, undefined, undefined]);
});

Deno.test("LanedWorkQueue: an unknown lane is a RangeError; bad lane lists are refused", () => {
  const { q } = laned();
  try {
    assert.throws(() => q.get("resize"), RangeError);
    assert.deepEqual(q.lanes(), ["attach", "detach"]);
  } finally {
    q.shutDown();
  }
  assert.throws(
    () =>
      new LanedWorkQueue({ rateLimiter }, {
        name: "x",
        lanes: { names: ["a", "a"], laneOf: () => "a" },
      }),
    RangeError,
  );
  assert.throws(
    () =>
      new LanedWorkQueue({ rateLimiter }, { name: "x", lanes: { names: [], laneOf: () => "a" } }),
    RangeError,
  );
  assert.deepEqual(new LanedWorkQueue({ rateLimiter }, { name: "" }).lanes(), [""]);
});

Deno.test("LanedWorkQueue: oldestReady names the key waiting longest, a moved one included", async () => {
  const { q, state, clock } = laned();
  try {
    state.set("d-old", "attach");
    q.add("d-old");
    clock.advance(1000);
    state.set("d-new", "detach");
    q.add("d-new");
    clock.advance(1000);
    state.set("d-old", "detach");
    q.add("d-old"); // moves behind d-new, keeps its age
    assert.deepEqual(q.oldestReady("detach"), { key: "d-old", addedAt: 0 });
    assert.equal(q.oldestReady("attach"), undefined);
    assert.equal(await takeReady(q, "detach"), "d-new");
    assert.deepEqual(q.oldestReady("detach"), { key: "d-old", addedAt: 0 });
  } finally {
    q.shutDown();
  }
});

Deno.test("LanedWorkQueue: metrics per lane besides the queue's own, depth follows moves", async () => {
  const { q, state, metrics } = laned();
  try {
    q.add("va-1");
    q.add("va-2");
    state.set("va-1", "detach");
    q.add("va-1");
    const text = await metrics.metricsText();
    assert.match(text, /^workqueue_depth\{name="va"\} 2$/m);
    assert.match(text, /^workqueue_depth\{name="va-attach"\} 1$/m);
    assert.match(text, /^workqueue_depth\{name="va-detach"\} 1$/m);
    assert.match(text, /^workqueue_adds_total\{name="va"\} 2$/m);
    await drain(q, "detach");
    assert.match(await metrics.metricsText(), /^workqueue_depth\{name="va-detach"\} 0$/m);
  } finally {
    q.shutDown();
  }
});

Deno.test("LaneList on its own, as the ready list of a plain WorkQueue: per-lane pops, moves on touch", () => {
  const state = new Map<string, string>();
  const ready: string[] = [];
  const list = new LaneList({ onReady: (lane) => ready.push(lane) }, {
    name: "va",
    lanes: { names: ["attach", "detach"], laneOf: (key) => state.get(key) ?? "attach" },
  });
  const q = new WorkQueue({}, { name: "va", ready: list });
  state.set("d1", "detach");
  q.add("a1");
  q.add("d1");
  q.add("a2");
  assert.deepEqual(ready, ["attach", "detach", "attach"], "told of each key made ready");
  state.set("a1", "detach");
  q.add("a1"); // a waiting key added again: touched, moved
  assert.deepEqual([list.len("attach"), list.len("detach"), q.len()], [1, 2, 3]);
  assert.equal(q.tryGet("detach"), "d1");
  assert.equal(q.tryGet(), "a2", "of any lane: the key ready first (a1 moved behind it)");
  assert.equal(q.tryGet("detach"), "a1");
  assert.equal(q.tryGet(), undefined);
  q.shutDown();
});

Deno.test("LanedWorkQueue: delayed and rate-limited adds go to the lane the key is in when due", async () => {
  const clock = new FakeClock(0);
  const state = new Map<string, "attach" | "detach">();
  const metrics = createMetrics({});
  const q = new LanedWorkQueue({
    clock,
    metricsProvider: metrics.queueMetricsProvider,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 60_000 }),
  }, {
    name: "va",
    lanes: { names: ["attach", "detach"], laneOf: (key) => state.get(key) ?? "attach" },
  });
  try {
    q.add("va-1");
    assert.equal(await takeReady(q, "attach"), "va-1");
    q.addRateLimited("va-1");
    q.done("va-1");
    assert.equal(q.isQueuedOrProcessing("va-1"), false, "waiting for its backoff");
    state.set("va-1", "detach"); // deleted during its backoff
    const detachWorker = q.get("detach");
    clock.advance(1000);
    assert.equal(await detachWorker, "va-1");
    assert.equal(q.numRequeues("va-1"), 1);
    q.forget("va-1");
    assert.equal(q.numRequeues("va-1"), 0);
    q.addAfter("va-1", 500); // added again while processing, after its delay
    clock.advance(500);
    assert.equal(q.len(), 0, "dirty, not ready: it is still processed");
    q.done("va-1");
    assert.equal(q.len("detach"), 1);
    const text = await metrics.metricsText();
    assert.match(text, /^workqueue_retries_total\{name="va"\} 2$/m);
    assert.match(text, /^workqueue_adds_total\{name="va"\} 3$/m);
    assert.match(text, /^workqueue_adds_total\{name="va-detach"\} 2$/m);
  } finally {
    q.shutDown();
  }
  assert.equal(clock.pendingTimers(), 0, "no metrics or delay timer left");
});

Deno.test("LanedWorkQueue.shutDownWithDrain releases the lane waiters and waits for the keys handed out", async () => {
  const { q } = laned();
  q.add("a1");
  const a1 = await q.get("attach");
  const waiting = q.get("detach");
  let drained = false;
  const drain = q.shutDownWithDrain().then(() => drained = true);
  assert.equal(await waiting, undefined);
  await Promise.resolve();
  assert.equal(drained, false);
  q.done(a1!);
  await drain;
  assert.equal(q.shuttingDown(), true);
});
