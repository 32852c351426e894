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
 * `globalThis.gc` exists only when V8 runs with `--expose-gc` (the V8 extension of
 * `src/extensions/gc-extension.cc`); the shipped V8 flags (deno.json's `compile` task) have it.
 * Called with `{ type: "major", execution: "sync", flavor: "last-resort" }` it runs V8's
 * `Heap::CollectAllAvailableGarbage`: full mark-compacts with the memory-reducing flag, which
 * compacts and releases the emptied pages; without the flavor, one full mark-compact
 * (`Heap::PreciseCollectAllGarbage`). Without the flag there is no function, and nothing is
 * collected out of turn.
 *
 * While the initial lists are read the old generation is not bounded by the growing factor alone:
 * V8 starts incremental marking at its limit and finishes it only after the mutator has gone on
 * allocating, so with 20 000 PVs and VAs the heap grew from a 16 MiB limit to 50 MiB before that
 * collection ended (`--trace-gc-nvp` of a standby taking over, `bench/README.md`, "The standby's
 * peak at N=20 000"). {@link pacedCollector} collects during the reading instead, at a pace that
 * grows with what has been read.
 *
 * The controller also calls {@link heapReclaimer} when the workers go quiet after a ListVolumes
 * pass, whose answer (at 100 000 volumes, about 21 MiB of heap) outlives young-generation
 * collections and would otherwise stay in the old generation until its next limit.
 *
 * @module
 */

/** The options V8's `gc()` takes (`gc-extension.cc`, `ParseGCOptions`). */
interface GcOptions {
  type: "major";
  execution: "sync";
  flavor?: "last-resort";
}

/**
 * A collection is skipped unless the committed heap grew since the last one by at least this
 * share of what it was then (or {@link MIN_GROWTH_BYTES}, whichever is more): a memory-reducing
 * collection costs time in proportion to the live heap (about 270 ms per full mark-compact with
 * 84 MiB live, 100 000 pairs cached, `--trace-gc`), so a burst or a ListVolumes pass whose garbage
 * fits in what the heap already holds is not worth one.
 */
export const GROWTH_WORTH_COLLECTING = 1 / 16;

/** The least growth of the committed heap worth a collection, bytes. */
export const MIN_GROWTH_BYTES = 2 * 1024 * 1024;

/**
 * Another collection follows while the committed heap is more than this share above what is
 * used (and more than {@link MIN_SLACK_BYTES}), and the last one returned at least
 * {@link ROUND_RETURNS} of it. One `CollectAllAvailableGarbage` (two or more mark-compacts)
 * evacuates a bounded amount of live objects per mark-compact (V8 `mark-compact.cc`,
 * `CollectEvacuationCandidates`: `kMaxEvacuatedBytesForReduceMemory`), so after a burst that left
 * live objects spread thinly over many pages, the first one frees the garbage and a later one
 * empties the pages: at 100 000 cached pairs (`--trace-gc`) one left the heap at 120 MiB committed
 * for 84 MiB used; two, at 86.
 */
export const SLACK_LEFT = 1 / 16;

/** Committed bytes above the used ones that never call for another collection. */
export const MIN_SLACK_BYTES = 4 * 1024 * 1024;

/** The least share of the committed heap a collection must return for another to follow. */
export const ROUND_RETURNS = 1 / 32;

/** At most this many collections one after another. */
export const MAX_ROUNDS = 4;

/** The V8 heap's size: what it holds from the system, and what of that objects use, bytes. */
export interface HeapSizes {
  committed: number;
  used: number;
}

/** Where {@link heapReclaimer} finds `gc` and the size of the V8 heap. */
export interface HeapScope {
  gc?: unknown;
  /** The heap's size; `Deno.memoryUsage()`'s `heapTotal` and `heapUsed` by default. */
  heapSizes?: () => HeapSizes;
}

/** `scope.gc` when V8 exposes it (`--expose-gc`), else undefined. */
function exposedGc(scope: { gc?: unknown }): ((options: GcOptions) => void) | undefined {
  const gc = scope.gc;
  return typeof gc === "function" ? (gc as (options: GcOptions) => void) : undefined;
}

function denoHeapSizes(): HeapSizes {
  const m = Deno.memoryUsage();
  return { committed: m.heapTotal, used: m.heapUsed };
}

/**
 * A function that runs full, memory-reducing garbage collections when the heap grew enough since
 * the last ({@link GROWTH_WORTH_COLLECTING}), repeated while the heap holds much more than it uses
 * and they keep returning memory ({@link SLACK_LEFT}, {@link MAX_ROUNDS}); undefined when the
 * runtime does not expose `gc`. The first call always collects.
 *
 * @param scope where `gc` is looked up; `globalThis` in the attacher, a stand-in in tests.
 */
export function heapReclaimer(
  scope: HeapScope = globalThis as HeapScope,
): (() => void) | undefined {
  const gc = exposedGc(scope);
  if (gc === undefined) return undefined;
  const sizes = scope.heapSizes ?? denoHeapSizes;
  const options: GcOptions = { type: "major", execution: "sync", flavor: "last-resort" };
  let after: number | undefined;
  return () => {
    let before = sizes().committed;
    if (
      after !== undefined &&
      before - after < Math.max(MIN_GROWTH_BYTES, after * GROWTH_WORTH_COLLECTING)
    ) {
      return;
    }
    for (let round = 1;; round++) {
      gc(options);
      const now = sizes();
      after = now.committed;
      const slack = now.committed - now.used;
      if (
        round >= MAX_ROUNDS || slack <= Math.max(MIN_SLACK_BYTES, after * SLACK_LEFT) ||
        before - after < after * ROUND_RETURNS
      ) {
        return;
      }
      before = after;
    }
  };
}

/**
 * A function that runs one full (not memory-reducing) garbage collection, or undefined when the
 * runtime does not expose one: cheaper than {@link heapReclaimer}'s, for collecting while a burst
 * is still under way.
 *
 * @param scope where `gc` is looked up; `globalThis` in the attacher, a stand-in in tests.
 */
export function heapCollector(
  scope: { gc?: unknown } = globalThis as { gc?: unknown },
): (() => void) | undefined {
  const gc = exposedGc(scope);
  if (gc === undefined) return undefined;
  const options: GcOptions = { type: "major", execution: "sync" };
  return () => {
    gc(options);
  };
}

/** Options of {@link pacedCollector}. */
export interface PacedCollectorOptions {
  /** Objects read before the first collection. @default 10000 */
  first?: number;
  /**
   * Each later collection comes once the objects read in all have grown by this factor (and by
   * at least `first`) since the previous one, so the collections' cost stays proportional to
   * what is read, as V8's own growing factor keeps it. @default 1.5
   */
  growth?: number;
}

/**
 * A function to call once per object a list delivers; it runs `collect` after the first
 * `first` objects, then whenever the count has grown by `growth` (and by at least `first`)
 * since the last collection: 10 000, 20 000, 30 000, 45 000, 67 500, … With 20 000 VAs, 20 000
 * PVs and 5000 CSINodes that is 4 collections, each of a heap holding little more than what is
 * cached by then; with 100 000 of each, 9.
 */
export function pacedCollector(
  collect: () => void,
  opts: PacedCollectorOptions = {},
): () => void {
  const first = opts.first ?? 10_000;
  const growth = opts.growth ?? 1.5;
  if (!(first >= 1) || !(growth >= 1)) {
    throw new RangeError(
      `paced collector needs first >= 1 and growth >= 1, got ${first}, ${growth}`,
    );
  }
  let read = 0;
  let next = first;
  return () => {
    if (++read < next) return;
    collect();
    next = Math.max(read + first, Math.floor(read * growth));
  };
}
