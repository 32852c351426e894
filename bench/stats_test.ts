import assert from "node:assert/strict";
import { median, percentile, perOperation, summarize, total } from "./stats.ts";

Deno.test("percentile() uses the nearest rank", () => {
  const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentile(sorted, 50), 50);
  assert.equal(percentile(sorted, 95), 95);
  assert.equal(percentile(sorted, 99), 99);
  assert.equal(percentile(sorted, 100), 100);
  assert.equal(percentile(sorted, 0), 1);
  assert.equal(percentile([7], 99), 7);
  assert.ok(Number.isNaN(percentile([], 50)));
  assert.throws(() => percentile(sorted, 101), RangeError);
});

Deno.test("summarize() sorts a copy and reports count, mean and percentiles", () => {
  const samples = [5, 1, 4, 2, 3];
  const s = summarize(samples);
  assert.deepEqual(samples, [5, 1, 4, 2, 3]);
  assert.deepEqual(s, { count: 5, mean: 3, p50: 3, p90: 5, p95: 5, p99: 5, max: 5 });
  assert.equal(summarize([]).count, 0);
  assert.ok(Number.isNaN(summarize([]).p50));
});

Deno.test("median() skips NaN and averages the middle pair", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median([NaN, 5, NaN]), 5);
  assert.ok(Number.isNaN(median([NaN])));
});

Deno.test("perOperation() divides every count and total() sums them", () => {
  assert.deepEqual(perOperation({ a: 30, b: 10 }, 10), { a: 3, b: 1 });
  assert.deepEqual(perOperation({ a: 30 }, 0), {});
  assert.equal(total({ a: 30, b: 10 }), 40);
});
