import assert from "node:assert/strict";
import { heapCollector, heapReclaimer, pacedCollector } from "./heap.ts";

Deno.test("heapReclaimer runs V8's memory-reducing full collection when gc is exposed", () => {
  const calls: unknown[] = [];
  const reclaim = heapReclaimer({ gc: (options: unknown) => calls.push(options) });
  assert.ok(reclaim !== undefined);
  reclaim();
  assert.deepEqual(calls, [{ type: "major", execution: "sync", flavor: "last-resort" }]);
});

Deno.test("heapReclaimer is undefined without an exposed gc", () => {
  assert.equal(heapReclaimer({}), undefined);
  assert.equal(heapReclaimer({ gc: "not a function" }), undefined);
});

Deno.test("heapReclaimer's collection returns the garbage of a burst (tests run with --expose-gc)", () => {
  const reclaim = heapReclaimer();
  assert.ok(reclaim !== undefined, "deno task test runs with --v8-flags=--expose-gc");
  let garbage: { name: string; values: number[] }[] | undefined = Array.from(
    { length: 200_000 },
    (_, i) => ({ name: `object-${i}`, values: [i, i + 1] }),
  );
  const before = Deno.memoryUsage().heapUsed;
  assert.equal(garbage.length, 200_000);
  garbage = undefined;
  reclaim();
  const after = Deno.memoryUsage().heapUsed;
  assert.ok(after < before - 10 * 1024 * 1024, `heap used ${before} -> ${after}`);
});

Deno.test("heapCollector runs one full collection, not the memory-reducing ones", () => {
  const calls: unknown[] = [];
  const collect = heapCollector({ gc: (options: unknown) => calls.push(options) });
  assert.ok(collect !== undefined);
  collect();
  assert.deepEqual(calls, [{ type: "major", execution: "sync" }]);
  assert.equal(heapCollector({}), undefined);
});

Deno.test("pacedCollector collects after 10 000 objects, then as the count grows by half", () => {
  const at: number[] = [];
  let read = 0;
  const note = pacedCollector(() => at.push(read));
  for (read = 1; read <= 100_000; read++) note();
  assert.deepEqual(at, [10_000, 20_000, 30_000, 45_000, 67_500]);
});

Deno.test("pacedCollector takes its first count and growth, and refuses a pace that never ends", () => {
  const at: number[] = [];
  let read = 0;
  const note = pacedCollector(() => at.push(read), { first: 3, growth: 2 });
  for (read = 1; read <= 20; read++) note();
  assert.deepEqual(at, [3, 6, 12]);
  assert.throws(() => pacedCollector(() => {}, { first: 0 }), RangeError);
  assert.throws(() => pacedCollector(() => {}, { growth: 0.5 }), RangeError);
});
