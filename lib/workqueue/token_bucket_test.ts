import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { TokenBucket } from "./token_bucket.ts";

/** Lets pending promise callbacks run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

Deno.test("TokenBucket: 50 takes at qps 5 burst 10 need 8 s (10 at once, then 5 per second)", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 5, burst: 10 });
  const doneAt: number[] = [];
  const takes = Array.from(
    { length: 50 },
    () => bucket.take().then(() => doneAt.push(clock.now())),
  );
  await settle();
  assert.equal(doneAt.length, 10, "the burst is immediate");
  clock.advance(1000);
  await settle();
  assert.equal(doneAt.length, 15, "5 more after 1 s");
  clock.advance(6999);
  await settle();
  assert.equal(doneAt.length, 49, "one still waiting 1 ms before 8 s");
  clock.advance(1);
  await Promise.all(takes);
  assert.equal(doneAt.length, 50);
  assert.equal(Math.max(...doneAt), 8000);
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("TokenBucket serves waiters in call order, one every 1/qps", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 4, burst: 1 });
  const order: Array<[number, number]> = [];
  const takes = [0, 1, 2, 3].map((i) => bucket.take().then(() => order.push([i, clock.now()])));
  await settle();
  while (clock.advanceToNextTimer()) await settle();
  await Promise.all(takes);
  assert.deepEqual(order, [[0, 0], [1, 250], [2, 500], [3, 750]]);
});

Deno.test("TokenBucket.tryTake takes only available tokens and refills up to burst", () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 2, burst: 2 });
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false);
  clock.advance(499);
  assert.equal(bucket.tryTake(), false);
  clock.advance(1);
  assert.equal(bucket.tryTake(), true);
  clock.advance(60_000);
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false, "the bucket holds at most burst tokens");
});

Deno.test("TokenBucket.tryTake does not jump ahead of waiting takers", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 1, burst: 1 });
  assert.equal(bucket.tryTake(), true);
  const waiter = bucket.take();
  clock.advance(1000);
  assert.equal(bucket.tryTake(), false, "the refilled token belongs to the waiter");
  await waiter;
});

Deno.test("TokenBucket.reserve returns the wait for the reserved token", () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 3, burst: 1 });
  assert.equal(bucket.reserve(), 0);
  assert.equal(bucket.reserve(), 334);
  assert.equal(bucket.reserve(), 667);
  clock.advance(1000);
  assert.equal(bucket.reserve(), 0);
});

Deno.test("TokenBucket.take rejects on abort and gives the last reservation back", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 1, burst: 1 });
  await bucket.take();
  const ac = new AbortController();
  const aborted = bucket.take(ac.signal);
  ac.abort(new Error("stop"));
  await assert.rejects(aborted, { message: "stop" });
  assert.equal(clock.pendingTimers(), 0);
  clock.advance(1000);
  assert.equal(bucket.tryTake(), true, "the aborted reservation was given back");
  assert.equal(bucket.tryTake(), false);
});

Deno.test("TokenBucket.take with an aborted signal takes nothing", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 1, burst: 1 });
  const ac = new AbortController();
  ac.abort(new Error("gone"));
  await assert.rejects(bucket.take(ac.signal), { message: "gone" });
  assert.equal(bucket.tryTake(), true);
});

Deno.test("TokenBucket an aborted waiter keeps later waiters' turns", async () => {
  const clock = new FakeClock(0);
  const bucket = new TokenBucket({ clock }, { qps: 1, burst: 1 });
  await bucket.take();
  const ac = new AbortController();
  const first = bucket.take(ac.signal);
  let secondAt: number | undefined;
  const second = bucket.take().then(() => secondAt = clock.now());
  ac.abort(new Error("stop"));
  await assert.rejects(first, { message: "stop" });
  clock.advance(1999);
  await settle();
  assert.equal(secondAt, undefined);
  clock.advance(1);
  await second;
  assert.equal(secondAt, 2000);
  assert.equal(bucket.tryTake(), false, "no extra token appeared");
});

Deno.test("TokenBucket with qps <= 0 or infinite does not limit", async () => {
  const clock = new FakeClock(0);
  for (const qps of [0, -1, Infinity]) {
    const bucket = new TokenBucket({ clock }, { qps, burst: 0 });
    assert.equal(bucket.unlimited, true);
    for (let i = 0; i < 100; i++) await bucket.take();
    assert.equal(bucket.tryTake(), true);
    assert.equal(bucket.reserve(), 0);
  }
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("TokenBucket rejects a bad burst or NaN qps", () => {
  assert.throws(() => new TokenBucket({}, { qps: 5, burst: 0 }), RangeError);
  assert.throws(() => new TokenBucket({}, { qps: 5, burst: 1.5 }), RangeError);
  assert.throws(() => new TokenBucket({}, { qps: NaN, burst: 10 }), RangeError);
});
