import assert from "node:assert/strict";
import { heapReclaimer } from "./heap.ts";

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
