/**
 * Returning the garbage of a burst to the system at once, instead of when V8 next decides to.
 *
 * The initial watch lists parse every PersistentVolume and VolumeAttachment whole before the
 * informers keep the fields the attacher reads, so right after the caches sync most of the V8 heap
 * is garbage (with 20 000 PVs: 42 MiB used, 17 MiB live, measured over the inspector with
 * `deno task bench -- --footprint --sizes=20000`). V8 collects it only when the old space reaches
 * its next limit, and keeps the pages it frees for a while; until then it is resident memory.
 *
 * The same holds at the end of a burst of attaches or detaches: with the shipped
 * `--heap-growing-percent=50` (instead of `--optimize-for-size`, whose memory-reducing collections
 * cost a third more CPU per attach at N=20 000) the heap is left at up to 1.5 times what was live
 * at the last collection, so the controller collects once when its queues stay empty
 * (`controller.ts`, `whenIdle`).
 *
 * Between those collections the heap is not only what is live: over an attach burst of 20 000 VAs
 * each full collection left 26-35 MiB used in 50-70 MiB committed, old-generation pages that stay
 * committed while one object on them lives; by default V8 moves at most 4 MiB of objects off such
 * pages per collection (`--compaction-max-evacuated-bytes-mb`). With 16 (shipped), six runs at
 * N=20 000 peaked at 126-130 MiB against 127-133 for six without it; the committed heap that
 * `--trace-gc` printed in one run of each was about the same, so what the limit changes is not settled
 * (bench/README.md, "The delete burst at N=20 000").
 *
 * `globalThis.gc` exists only when V8 runs with `--expose-gc` (the V8 extension of
 * `src/extensions/gc-extension.cc`); the shipped V8 flags (deno.json's `compile` task) have it.
 * Called with `{ type: "major", execution: "sync", flavor: "last-resort" }` it runs V8's
 * `Heap::CollectAllAvailableGarbage`: full mark-compacts with the memory-reducing flag, which
 * compacts and releases the emptied pages. Without the flag there is no function, and nothing is
 * collected out of turn.
 *
 * @module
 */

/** The options V8's `gc()` takes (`gc-extension.cc`, `ParseGCOptions`). */
interface GcOptions {
  type: "major";
  execution: "sync";
  flavor: "last-resort";
}

/**
 * A function that runs a full, memory-reducing garbage collection, or undefined when the runtime
 * does not expose one.
 *
 * @param scope where `gc` is looked up; `globalThis` in the attacher, a stand-in in tests.
 */
export function heapReclaimer(
  scope: { gc?: unknown } = globalThis as { gc?: unknown },
): (() => void) | undefined {
  const gc = scope.gc;
  if (typeof gc !== "function") return undefined;
  const options: GcOptions = { type: "major", execution: "sync", flavor: "last-resort" };
  return () => {
    gc(options);
  };
}
