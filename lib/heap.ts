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
 * Between those collections the heap is not only what is live: each full collection of a burst
 * frees objects all over the old generation's pages, and a page stays committed while one object
 * on it lives. V8 moves objects off such pages (compaction) but by default at most 4 MiB per
 * collection (`--compaction-max-evacuated-bytes-mb`); over an attach burst of 20 000 VAs that left
 * 64 MiB committed for 26 MiB used, and the collection at its end compacted the rest at once.
 * The shipped `--compaction-max-evacuated-bytes-mb=16` lets each collection of the burst move up
 * to 16 MiB, which keeps the pages nearer what is live (bench/README.md, "The delete burst at
 * N=20 000").
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
