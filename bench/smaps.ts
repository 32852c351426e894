/**
 * Where a process's anonymous memory is, mapping by mapping: `/proc/<pid>/smaps` (Linux,
 * `Documentation/filesystems/proc.rst`) parsed and each mapping put in a class by its shape, so
 * that two readings (at rest, at a peak) show which kind of memory grew.
 *
 * The classes, from how the allocators of a `deno` process map memory:
 *
 * | class | how it is recognised | whose |
 * | --- | --- | --- |
 * | `file` | a path (the executable, libraries, `DENO_DIR` caches) | the kernel's page cache |
 * | `malloc main arena` | `[heap]` (the `brk` area) | glibc `malloc` of the main thread |
 * | `malloc thread arena` | anonymous, inside a 64 MiB-aligned run of 64 MiB (`HEAP_MAX_SIZE` of glibc `malloc/arena.c` on 64-bit) | glibc `malloc` of other threads (tokio workers, V8 workers) |
 * | `v8 code` | anonymous and executable | V8's code space |
 * | `v8 pages` | anonymous, below 2^46, start and size multiples of 256 KiB (V8's page size) | the V8 heap's regular pages |
 * | `v8 large objects` | anonymous, below 2^46, start a multiple of 256 KiB, any size | the V8 heap's large object pages (one object over 128 KiB each: big arrays, hash tables, strings) |
 * | `thread stack` | anonymous, right above a guard page of its own (`---p`, one page) | tokio and V8 threads (glibc `allocate_stack`) |
 * | `[stack]` | the main thread's stack | |
 * | `other anonymous` | anything else: `malloc` chunks of 128 KiB and more (`mmap`ed by glibc, their size a page multiple of the request plus 16 bytes), Rust's own `mmap`s | |
 *
 * The classes are heuristics over shapes. V8 maps its heap at random addresses it picks below
 * 2^46 (`GetRandomMmapAddr`, V8 `src/base/platform/platform-posix.cc`: the hint is masked with
 * `0x3FFFFFFFF000` on x86-64), aligned to its 256 KiB page; glibc and Rust map without a hint,
 * which Linux places top-down from below the main stack (0x7f… on x86-64).
 *
 * @module
 */

/** One mapping of `/proc/<pid>/smaps`, sizes in bytes. */
export interface Mapping {
  start: number;
  end: number;
  /** `rw-p`, `r-xp`, … */
  perms: string;
  /** The path or pseudo-path (`[heap]`), "" for an anonymous mapping. */
  path: string;
  rssBytes: number;
  anonymousBytes: number;
}

/** What a mapping is; see the module doc. */
export type MappingClass =
  | "file"
  | "malloc main arena"
  | "malloc thread arena"
  | "v8 code"
  | "v8 pages"
  | "v8 large objects"
  | "thread stack"
  | "[stack]"
  | "other anonymous";

const HEADER = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$/;

/**
 * Parses a `/proc/<pid>/smaps` text. Addresses above 2^53 do not occur in user space on x86-64
 * (47 bits) and arm64 (48 bits).
 *
 * @throws {SyntaxError} when a field line comes before any mapping header.
 */
export function parseSmaps(text: string): Mapping[] {
  const out: Mapping[] = [];
  let current: Mapping | undefined;
  for (const line of text.split("\n")) {
    const header = HEADER.exec(line);
    if (header !== null) {
      current = {
        start: parseInt(header[1]!, 16),
        end: parseInt(header[2]!, 16),
        perms: header[3]!,
        path: header[4]!.trim(),
        rssBytes: 0,
        anonymousBytes: 0,
      };
      out.push(current);
      continue;
    }
    const field = /^(Rss|Anonymous):\s+(\d+) kB/.exec(line);
    if (field === null) continue;
    if (current === undefined) {
      throw new SyntaxError("Cannot parse smaps: a field before a mapping");
    }
    if (field[1] === "Rss") current.rssBytes = Number(field[2]) * 1024;
    else current.anonymousBytes = Number(field[2]) * 1024;
  }
  return out;
}

const KIB = 1024;
const ARENA = 64 * KIB * KIB;
const V8_PAGE = 256 * KIB;
const GUARD = 4 * KIB;
/** The top of V8's random mapping hints on x86-64 (see the module doc). */
const V8_HINT_TOP = 2 ** 46;

/** The class of each mapping of `maps` (in address order, as smaps lists them). */
export function classify(maps: readonly Mapping[]): MappingClass[] {
  // A glibc thread arena is 64 MiB at a 64 MiB-aligned address: its used part read-write, the
  // rest inaccessible (`---p`), as one mapping or two.
  const classes: MappingClass[] = [];
  const arena = new Set<number>();
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]!;
    if (m.path !== "" || m.start % ARENA !== 0) continue;
    if (m.end - m.start === ARENA) arena.add(i);
    const next = maps[i + 1];
    if (
      next !== undefined && next.path === "" && next.start === m.end &&
      next.perms === "---p" && next.end === m.start + ARENA
    ) {
      arena.add(i);
      arena.add(i + 1);
    }
  }
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]!;
    const size = m.end - m.start;
    const before = maps[i - 1];
    let c: MappingClass;
    if (m.path === "[heap]") c = "malloc main arena";
    else if (m.path === "[stack]") c = "[stack]";
    else if (m.path !== "") c = "file";
    else if (arena.has(i)) c = "malloc thread arena";
    else if (m.perms.includes("x")) c = "v8 code";
    else if (m.start < V8_HINT_TOP && m.start % V8_PAGE === 0) {
      c = size % V8_PAGE === 0 ? "v8 pages" : "v8 large objects";
    } else if (
      before !== undefined && before.path === "" && before.perms === "---p" &&
      before.end === m.start && before.end - before.start === GUARD
    ) c = "thread stack";
    else c = "other anonymous";
    classes.push(c);
  }
  return classes;
}

/** Resident bytes per class. */
export type ClassTotals = Map<MappingClass, number>;

/** The resident bytes of `maps` summed by class. */
export function totalsByClass(maps: readonly Mapping[]): ClassTotals {
  const classes = classify(maps);
  const totals: ClassTotals = new Map();
  maps.forEach((m, i) => {
    const c = classes[i]!;
    totals.set(c, (totals.get(c) ?? 0) + m.rssBytes);
  });
  return totals;
}

/** One anonymous mapping that is not V8's nor an arena's, with its class, for a listing. */
export interface LargeMapping extends Mapping {
  class: MappingClass;
}

/**
 * The `top` largest resident mappings of the classes whose owner the class does not tell
 * (`other anonymous`, `malloc thread arena`, `malloc main arena`), largest first.
 */
export function largestUnexplained(maps: readonly Mapping[], top: number): LargeMapping[] {
  const classes = classify(maps);
  return maps
    .map((m, i) => ({ ...m, class: classes[i]! }))
    .filter((m) =>
      m.class === "other anonymous" || m.class === "malloc thread arena" ||
      m.class === "malloc main arena"
    )
    .sort((a, b) => b.rssBytes - a.rssBytes)
    .slice(0, top);
}
