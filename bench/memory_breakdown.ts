/**
 * Where a process's memory is: `/proc/<pid>/smaps_rollup` split into anonymous and file-backed
 * pages, and a V8 heap snapshot summed by constructor.
 *
 * - `smaps_rollup` (Linux ≥ 4.14, `Documentation/filesystems/proc.rst`): `Rss` is the resident
 *   set, `Anonymous` the pages no file backs (the V8 heap, malloc arenas, thread stacks),
 *   `Rss - Anonymous` the pages of mapped files (the `deno` executable's code and read-only
 *   data, shared libraries) and shared memory.
 * - A heap snapshot (`HeapProfiler.takeHeapSnapshot`, the `.heapsnapshot` format of Chrome
 *   DevTools, V8 `src/profiler/heap-snapshot-generator.cc`) is a flat `nodes` array of
 *   `snapshot.meta.node_fields` per node; a node's `name` is an index into `strings`, its `type`
 *   an index into `snapshot.meta.node_types[0]`. Summing `self_size` by (type, name) gives what
 *   DevTools' "Summary" view shows by constructor, without the retained sizes.
 *
 * @module
 */

/** The fields of `smaps_rollup` the breakdown uses, in bytes. */
export interface SmapsRollup {
  rssBytes: number;
  anonymousBytes: number;
  /** `Rss - Anonymous`: pages of mapped files and shared memory. */
  fileBytes: number;
  privateDirtyBytes: number;
  swapBytes: number;
}

/**
 * Parses a `/proc/<pid>/smaps_rollup` text.
 *
 * @throws {SyntaxError} when it has no `Rss:` line.
 */
export function parseSmapsRollup(text: string): SmapsRollup {
  const kb = (key: string): number | undefined => {
    const m = text.match(new RegExp(`^${key}:\\s+(\\d+)\\s+kB`, "m"));
    return m ? Number(m[1]) * 1024 : undefined;
  };
  const rss = kb("Rss");
  if (rss === undefined) throw new SyntaxError("Cannot parse smaps_rollup: no Rss line");
  const anonymous = kb("Anonymous") ?? 0;
  return {
    rssBytes: rss,
    anonymousBytes: anonymous,
    fileBytes: rss - anonymous,
    privateDirtyBytes: kb("Private_Dirty") ?? 0,
    swapBytes: kb("Swap") ?? 0,
  };
}

/** One line of a heap snapshot's summary. */
export interface HeapGroup {
  /** `type:name`, e.g. `object:Map`, `string:(string)`, `code:(compiled code)`. */
  key: string;
  count: number;
  selfBytes: number;
}

/** A heap snapshot summed by (type, name). */
export interface HeapSummary {
  totalBytes: number;
  nodeCount: number;
  /** Largest first. */
  groups: HeapGroup[];
}

/** The parts of a `.heapsnapshot` the summary reads. */
export interface HeapSnapshotJson {
  snapshot: { meta: { node_fields: string[]; node_types: unknown[] } };
  nodes: number[];
  strings: string[];
}

/**
 * Sums a heap snapshot's nodes by type and name. Strings, code, arrays and other non-object
 * nodes are grouped by type alone (their names are their contents), objects by constructor.
 *
 * @throws {SyntaxError} when the snapshot lacks the `type`, `name` or `self_size` field.
 */
export function summarizeHeapSnapshot(snapshot: HeapSnapshotJson): HeapSummary {
  const fields = snapshot.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  if (typeAt < 0 || nameAt < 0 || sizeAt < 0 || width === 0) {
    throw new SyntaxError("Cannot summarise the heap snapshot: missing node fields");
  }
  const types = snapshot.snapshot.meta.node_types[0] as string[];
  const groups = new Map<string, HeapGroup>();
  const nodes = snapshot.nodes;
  let total = 0;
  for (let i = 0; i + width <= nodes.length; i += width) {
    const type = types[nodes[i + typeAt] as number] ?? "?";
    const size = nodes[i + sizeAt] as number;
    const named = type === "object" || type === "closure" || type === "native" ||
      type === "hidden";
    const key = named ? `${type}:${snapshot.strings[nodes[i + nameAt] as number] ?? "?"}` : type;
    let group = groups.get(key);
    if (group === undefined) {
      group = { key, count: 0, selfBytes: 0 };
      groups.set(key, group);
    }
    group.count++;
    group.selfBytes += size;
    total += size;
  }
  return {
    totalBytes: total,
    nodeCount: Math.floor(nodes.length / width),
    groups: [...groups.values()].sort((a, b) => b.selfBytes - a.selfBytes),
  };
}
