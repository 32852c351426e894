import assert from "node:assert/strict";
import { ItemExponentialFailureRateLimiter } from "./rate_limiters.ts";

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
