/**
 * Durations follow the monotonic clock: a wall clock stepped back an hour (NTP, an operator)
 * neither stops the token buckets nor postpones the delaying queue's retries.
 */

import assert from "node:assert/strict";
import { realClock } from "./clock.ts";
import { FakeClock } from "../testkit/fakes/fake_clock.ts";
import { TokenBucket } from "./workqueue/token_bucket.ts";
import { DelayingWorkQueue } from "./workqueue/delaying_queue.ts";
import { takeReady } from "../testkit/harness/ready_work.ts";

const HOUR_MS = 3_600_000;

Deno.test("realClock.now() is the monotonic clock and wallNow() the wall clock", () => {
  const mono = performance.now();
  const wall = Date.now();
  assert.ok(Math.abs(realClock.now() - mono) < 1000, "now() reads performance.now()");
  assert.ok(Math.abs(realClock.wallNow() - wall) < 1000, "wallNow() reads Date.now()");
});

Deno.test("FakeClock.stepWall() moves the wall clock alone and fires no timer", () => {
  const clock = new FakeClock(1_000_000);
  let fired = 0;
  clock.setTimer(10, () => fired++);
  clock.stepWall(-HOUR_MS);
  assert.equal(clock.now(), 1_000_000);
  assert.equal(clock.wallNow(), 1_000_000 - HOUR_MS);
  assert.equal(fired, 0);
  clock.advance(10);
  assert.equal(fired, 1);
  assert.equal(clock.wallNow(), 1_000_010 - HOUR_MS);
});

Deno.test("TokenBucket keeps refilling after the wall clock steps back an hour", async () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ clock }, { qps: 5, burst: 1 });
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false);
  clock.stepWall(-HOUR_MS);
  clock.advance(200);
  assert.equal(bucket.tryTake(), true, "one token after 1/qps of monotonic time");
  // A waiter is served after 1/qps too, not after the step.
  let served = false;
  const taken = bucket.take().then(() => served = true);
  clock.stepWall(-HOUR_MS);
  clock.advance(199);
  await Promise.resolve();
  assert.equal(served, false);
  clock.advance(1);
  await taken;
  assert.equal(served, true);
});

Deno.test("DelayingWorkQueue does not postpone a retry when the wall clock steps back", async () => {
  const clock = new FakeClock();
  const queue = new DelayingWorkQueue({ clock }, { name: "va" });
  queue.addAfter("va-1", 1000);
  clock.stepWall(-HOUR_MS);
  queue.addAfter("va-2", 1000);
  clock.advance(1000);
  assert.equal(await takeReady(queue), "va-1");
  assert.equal(await takeReady(queue), "va-2");
  queue.shutDown();
});
