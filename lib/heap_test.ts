import assert from "node:assert/strict";
import {
  GROWTH_WORTH_COLLECTING,
  heapCollector,
  heapReclaimer,
  MAX_ROUNDS,
  MIN_GROWTH_BYTES,
  pacedCollector,
} from "./heap.ts";

const MIB = 1024 * 1024;

/**
 * A stand-in heap of 84 MiB live objects: `gc` notes its options and sets the committed size to
 * the next of `sizes`.
 */
function fakeHeap(committed: number, ...sizes: number[]) {
  const calls: unknown[] = [];
  const heap = {
    committed,
    used: 84 * MIB,
    gc: (options: unknown) => {
      calls.push(options);
      heap.committed = sizes.shift() ?? heap.committed;
    },
    heapSizes: () => ({ committed: heap.committed, used: heap.used }),
  };
  return { heap, calls };
}

Deno.test("heapReclaimer runs V8's memory-reducing full collection when gc is exposed", () => {
  const { heap, calls } = fakeHeap(100 * MIB, 86 * MIB);
  const reclaim = heapReclaimer(heap);
  assert.ok(reclaim !== undefined);
  reclaim();
  assert.deepEqual(calls, [{ type: "major", execution: "sync", flavor: "last-resort" }]);
});

Deno.test("heapReclaimer collects again while the heap holds much more than it uses", () => {
  // After the attach burst at 100 000 pairs (--trace-gc): the first collection frees the garbage
  // and leaves live objects spread over many pages, the second empties them.
  const { heap, calls } = fakeHeap(227 * MIB, 120 * MIB, 86 * MIB, 85 * MIB);
  heapReclaimer(heap)!();
  assert.equal(calls.length, 2, "86 MiB committed for 84 used: close enough");
  // A collection that returns nothing more is the last, whatever is left.
  const stuck = fakeHeap(227 * MIB, 150 * MIB, 149 * MIB, 100 * MIB);
  heapReclaimer(stuck.heap)!();
  assert.equal(stuck.calls.length, 2);
  const endless = fakeHeap(1000 * MIB, 800 * MIB, 600 * MIB, 400 * MIB, 200 * MIB, 100 * MIB);
  heapReclaimer(endless.heap)!();
  assert.equal(endless.calls.length, MAX_ROUNDS);
});

Deno.test("heapReclaimer skips a collection when the heap grew little since the last", () => {
  const { heap, calls } = fakeHeap(200 * MIB, 100 * MIB, 100 * MIB);
  const reclaim = heapReclaimer(heap)!;
  reclaim();
  assert.equal(calls.length, 2, "the first call collects: the garbage, then nothing more");
  assert.equal(heap.committed, 100 * MIB);
  // A small burst or ListVolumes pass: its garbage fits in what the heap holds.
  heap.committed = 100 * MIB + Math.max(MIN_GROWTH_BYTES, 100 * MIB * GROWTH_WORTH_COLLECTING) -
    1;
  reclaim();
  assert.equal(calls.length, 2, "growth below the threshold: no collection");
  // The threshold is against the size after the last collection: skipped calls do not move it.
  heap.committed = 107 * MIB;
  reclaim();
  assert.equal(calls.length, 3, "6.25 % more than after the last collection");
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
