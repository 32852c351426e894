import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
} from "./rate_limiters.ts";
import type { RateLimiter } from "./types.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;

Deno.test("ItemExponentialFailureRateLimiter doubles from 1s and caps at 5m", () => {
  const limiter = new ItemExponentialFailureRateLimiter({ baseMs: SECOND, maxMs: 5 * MINUTE });
  const expected = [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300].map((s) => s * SECOND);
  for (const [i, delay] of expected.entries()) {
    assert.equal(limiter.when("va-1"), delay, `delay after failure ${i + 1}`);
    assert.equal(limiter.numRequeues("va-1"), i + 1, `requeues after failure ${i + 1}`);
  }
});

Deno.test("ItemExponentialFailureRateLimiter.forget resets the key to the base delay", () => {
  const limiter = new ItemExponentialFailureRateLimiter({ baseMs: SECOND, maxMs: 5 * MINUTE });
  limiter.when("va-1");
  limiter.when("va-1");
  assert.equal(limiter.when("va-1"), 4 * SECOND);
  limiter.forget("va-1");
  assert.equal(limiter.numRequeues("va-1"), 0);
  assert.equal(limiter.when("va-1"), SECOND);
  assert.equal(limiter.when("va-1"), 2 * SECOND);
});

Deno.test("ItemExponentialFailureRateLimiter tracks keys separately", () => {
  const limiter = new ItemExponentialFailureRateLimiter({ baseMs: SECOND, maxMs: 5 * MINUTE });
  limiter.when("a");
  limiter.when("a");
  assert.equal(limiter.when("b"), SECOND);
  assert.equal(limiter.numRequeues("a"), 2);
  assert.equal(limiter.numRequeues("b"), 1);
  assert.equal(limiter.numRequeues("never"), 0);
});

Deno.test("ItemExponentialFailureRateLimiter does not overflow after very many failures", () => {
  const limiter = new ItemExponentialFailureRateLimiter({ baseMs: 5, maxMs: 1_000_000 });
  for (let i = 0; i < 2000; i++) {
    const delay = limiter.when("k");
    assert.ok(Number.isFinite(delay) && delay <= 1_000_000, `delay ${delay} at failure ${i + 1}`);
  }
  assert.equal(limiter.when("k"), 1_000_000);
  assert.equal(limiter.numRequeues("k"), 2001);
});

Deno.test("ItemExponentialFailureRateLimiter rejects negative delays", () => {
  assert.throws(() => new ItemExponentialFailureRateLimiter({ baseMs: -1, maxMs: 10 }), RangeError);
  assert.throws(() => new ItemExponentialFailureRateLimiter({ baseMs: 1, maxMs: NaN }), RangeError);
});

Deno.test("BucketRateLimiter lets the burst through, then spaces retries at qps", () => {
  const clock = new FakeClock(0);
  const limiter = new BucketRateLimiter({ clock }, { qps: 10, burst: 3 });
  assert.equal(limiter.when("a"), 0);
  assert.equal(limiter.when("b"), 0);
  assert.equal(limiter.when("a"), 0);
  assert.equal(limiter.when("c"), 100);
  assert.equal(limiter.when("d"), 200);
  clock.advance(200);
  assert.equal(
    limiter.when("e"),
    100,
    "the two reserved tokens refilled; the next one is 100 ms off",
  );
  clock.advance(10_000);
  assert.equal(limiter.when("f"), 0, "the bucket refilled");
  assert.equal(limiter.numRequeues("a"), 0);
  limiter.forget("a");
});

Deno.test("MaxOfRateLimiter returns the longest delay and forgets in every limiter", () => {
  const fast = new ItemExponentialFailureRateLimiter({ baseMs: 10, maxMs: 1000 });
  const slow = new ItemExponentialFailureRateLimiter({ baseMs: 100, maxMs: 150 });
  const limiter = new MaxOfRateLimiter(fast, slow);
  assert.equal(limiter.when("k"), 100);
  assert.equal(limiter.when("k"), 150);
  assert.equal(limiter.when("k"), 150);
  assert.equal(limiter.when("k"), 150);
  assert.equal(limiter.when("k"), 160);
  assert.equal(limiter.numRequeues("k"), 5);
  limiter.forget("k");
  assert.equal(fast.numRequeues("k"), 0);
  assert.equal(slow.numRequeues("k"), 0);
  assert.equal(limiter.when("k"), 100);
});

Deno.test("MaxOfRateLimiter needs a limiter", () => {
  assert.throws(() => new MaxOfRateLimiter(), RangeError);
});

Deno.test("defaultControllerRateLimiter: 5 ms exponential per key, 10 qps burst 100 overall", () => {
  const clock = new FakeClock(0);
  const limiter: RateLimiter = defaultControllerRateLimiter({ clock });
  assert.equal(limiter.when("one"), 5);
  assert.equal(limiter.when("one"), 10);
  assert.equal(limiter.when("one"), 20);
  limiter.forget("one");
  assert.equal(limiter.numRequeues("one"), 0);
  for (let i = 3; i < 100; i++) limiter.when(`k${i}`);
  assert.equal(limiter.when("first-over-burst"), 100, "bucket: 101st retry waits 100 ms");
  assert.equal(limiter.when("second-over-burst"), 200);
});
