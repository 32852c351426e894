import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { DelayingWorkQueue } from "./delaying_queue.ts";
import { WorkQueue } from "./queue.ts";
import { takeAllReady } from "../../testkit/harness/ready_work.ts";

function drain(q: DelayingWorkQueue): Promise<string[]> {
  return takeAllReady(q);
}

function newQueue(): { clock: FakeClock; q: DelayingWorkQueue } {
  const clock = new FakeClock(0);
  return { clock, q: new DelayingWorkQueue({ clock }, { name: "" }) };
}

Deno.test("DelayingWorkQueue.addAfter adds the key once its delay has passed", async () => {
  const { clock, q } = newQueue();
  q.addAfter("a", 1000);
  assert.equal(q.len(), 0);
  assert.equal(clock.pendingTimers(), 1);
  clock.advance(999);
  assert.equal(q.len(), 0);
  clock.advance(1);
  assert.equal(q.len(), 1);
  assert.equal(clock.pendingTimers(), 0);
  assert.deepEqual(await drain(q), ["a"]);
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("DelayingWorkQueue: a key waiting for its delay is not in the queue below until it is due", () => {
  const clock = new FakeClock(0);
  const below = new WorkQueue({ clock }, { name: "" });
  const q = new DelayingWorkQueue({ clock, queue: below }, { name: "" });
  q.addAfter("a", 1000);
  assert.equal(below.has("a"), false);
  clock.advance(1000);
  assert.equal(below.has("a"), true);
  assert.equal(below.len(), 1);
});

Deno.test("DelayingWorkQueue.addAfter with a delay <= 0 adds at once", async () => {
  const { clock, q } = newQueue();
  q.addAfter("a", 0);
  q.addAfter("b", -5);
  assert.deepEqual(await drain(q), ["a", "b"]);
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("DelayingWorkQueue adds waiting keys in order of due time, ties first-come first", async () => {
  const { clock, q } = newQueue();
  q.addAfter("late", 300);
  q.addAfter("early", 100);
  q.addAfter("mid-1", 200);
  q.addAfter("mid-2", 200);
  clock.advance(150);
  assert.deepEqual(await drain(q), ["early"]);
  clock.advance(1000);
  assert.deepEqual(await drain(q), ["mid-1", "mid-2", "late"]);
});

Deno.test("DelayingWorkQueue keeps the earliest due time when a waiting key is added again", async () => {
  const { clock, q } = newQueue();
  q.addAfter("a", 1000);
  q.addAfter("a", 100);
  assert.equal(clock.pendingTimers(), 1);
  clock.advance(100);
  assert.deepEqual(await drain(q), ["a"], "the sooner add moves the key earlier");
  assert.equal(clock.pendingTimers(), 0);
  clock.advance(2000);
  assert.deepEqual(await drain(q), [], "the key is not added a second time");

  q.addAfter("b", 100);
  q.addAfter("b", 1000);
  clock.advance(100);
  assert.deepEqual(await drain(q), ["b"], "a later add does not delay the key");
  clock.advance(2000);
  assert.deepEqual(await drain(q), []);
});

Deno.test("DelayingWorkQueue moving a key earlier reorders it among other waiting keys", async () => {
  const { clock, q } = newQueue();
  for (let i = 0; i < 10; i++) q.addAfter(`k${i}`, 1000 + i * 100);
  q.addAfter("k7", 50);
  clock.advance(50);
  assert.deepEqual(await drain(q), ["k7"]);
  clock.advance(10_000);
  assert.deepEqual(await drain(q), ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k8", "k9"]);
});

Deno.test("DelayingWorkQueue a due key folds into the same key already ready", async () => {
  const { clock, q } = newQueue();
  q.addAfter("a", 100);
  q.add("a");
  q.add("b");
  clock.advance(100);
  assert.deepEqual(await drain(q), ["a", "b"]);
});

Deno.test("DelayingWorkQueue arms one timer, for the earliest waiting key", async () => {
  const { clock, q } = newQueue();
  q.addAfter("a", 500);
  q.addAfter("b", 300);
  q.addAfter("c", 900);
  assert.equal(clock.pendingTimers(), 1);
  assert.equal(clock.nextTimerAt(), 300);
  clock.advance(300);
  assert.equal(clock.nextTimerAt(), 500);
  clock.advance(600);
  assert.equal(clock.pendingTimers(), 0);
  assert.deepEqual(await drain(q), ["b", "a", "c"]);
});

Deno.test("DelayingWorkQueue splits delays longer than a runtime timer can take", async () => {
  const { clock, q } = newQueue();
  const long = 40 * 24 * 3600 * 1000;
  q.addAfter("a", long);
  assert.equal(clock.nextTimerAt(), 2 ** 31 - 1);
  clock.advance(2 ** 31 - 1);
  assert.equal(q.len(), 0);
  clock.advance(long - (2 ** 31 - 1));
  assert.deepEqual(await drain(q), ["a"]);
});

Deno.test("DelayingWorkQueue.shutDown cancels the timer, drops waiting keys, ignores addAfter", async () => {
  const { clock, q } = newQueue();
  q.addAfter("a", 100);
  q.addAfter("b", 200);
  const waiter = q.get();
  q.shutDown();
  assert.equal(clock.pendingTimers(), 0);
  q.addAfter("c", 10);
  q.addAfter("d", 0);
  assert.equal(clock.pendingTimers(), 0);
  clock.advance(1000);
  assert.equal(await waiter, undefined);
  assert.equal(q.len(), 0);
});

Deno.test("DelayingWorkQueue hands a due key to a waiting get()", async () => {
  const { clock, q } = newQueue();
  const waiter = q.get();
  q.addAfter("a", 250);
  clock.advance(250);
  assert.equal(await waiter, "a");
  q.done("a");
  q.shutDown();
});

Deno.test("DelayingWorkQueue.addAfter rejects a NaN delay", () => {
  const { q } = newQueue();
  assert.throws(() => q.addAfter("a", NaN), RangeError);
});
