/**
 * Summarises a V8 sampling heap profile (`HeapProfiler.startSampling` / `stopSampling` of the
 * Chrome DevTools protocol): which functions allocate how many bytes. Taken with
 * `includeObjectsCollectedByMajorGC` and `includeObjectsCollectedByMinorGC`, the profile counts
 * every allocation sampled, garbage included (V8 `src/profiler/sampling-heap-profiler.cc`: one
 * sample per `samplingInterval` bytes on average, each standing for that many bytes), which is
 * what the garbage collector's work grows with. `deno task bench -- --footprint --alloc` takes
 * one over the attach phase and prints it per attach.
 *
 * @module
 */

import { moduleOf } from "./cpu_profile.ts";

/** One node of a sampling heap profile's call tree. */
export interface SamplingHeapProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  /** Bytes allocated by this function itself (sampled). */
  selfSize: number;
  children: SamplingHeapProfileNode[];
}

/** The parts of a sampling heap profile that are read. */
export interface SamplingHeapProfile {
  head: SamplingHeapProfileNode;
}

/** Bytes per key, largest first. */
export type ByteBreakdown = [key: string, bytes: number][];

/** A summary of a sampling heap profile. */
export interface AllocationSummary {
  totalBytes: number;
  /** Self bytes by `function (module:line)`. */
  selfByFunction: ByteBreakdown;
  /** Self bytes by module (`./cpu_profile.ts` `moduleOf`). */
  selfByModule: ByteBreakdown;
  /**
   * Self bytes by the innermost frame of our own code on the stack (a repository file, not
   * `ext:` or `node:`), so that what the runtime allocates for a call of ours is charged to it.
   */
  byOwnCaller: ByteBreakdown;
}

function label(frame: SamplingHeapProfileNode["callFrame"]): string {
  const name = frame.functionName || "(anonymous)";
  if (frame.url === "") return name;
  return `${name} (${moduleOf(frame.url)}:${frame.lineNumber + 1})`;
}

function own(url: string): boolean {
  return url !== "" && !url.startsWith("ext:") && !url.startsWith("node:");
}

function add(map: Map<string, number>, key: string, bytes: number): void {
  map.set(key, (map.get(key) ?? 0) + bytes);
}

function sorted(map: Map<string, number>): ByteBreakdown {
  return [...map].sort((a, b) => b[1] - a[1]);
}

/** Sums `profile` by function, by module and by the innermost function of our own. */
export function summarizeAllocations(profile: SamplingHeapProfile): AllocationSummary {
  const byFunction = new Map<string, number>();
  const byModule = new Map<string, number>();
  const byOwn = new Map<string, number>();
  let total = 0;
  const stack: [SamplingHeapProfileNode, string | undefined][] = [[profile.head, undefined]];
  while (stack.length > 0) {
    const [node, caller] = stack.pop()!;
    const frame = node.callFrame;
    const ownCaller = own(frame.url) ? label(frame) : caller;
    if (node.selfSize > 0) {
      total += node.selfSize;
      add(byFunction, label(frame), node.selfSize);
      add(byModule, frame.url === "" ? label(frame) : moduleOf(frame.url), node.selfSize);
      add(byOwn, ownCaller ?? label(frame), node.selfSize);
    }
    for (const child of node.children) stack.push([child, ownCaller]);
  }
  return {
    totalBytes: total,
    selfByFunction: sorted(byFunction),
    selfByModule: sorted(byModule),
    byOwnCaller: sorted(byOwn),
  };
}

/** A breakdown as text lines: bytes per `per` (e.g. per attach) and the share of the total. */
export function renderBreakdown(
  title: string,
  rows: ByteBreakdown,
  total: number,
  per: number,
  top: number,
): string {
  const lines = [title];
  for (const [key, bytes] of rows.slice(0, top)) {
    lines.push(
      `${(bytes / per).toFixed(0).padStart(9)} B ${
        (100 * bytes / total).toFixed(1).padStart(5)
      } %  ${key}`,
    );
  }
  return lines.join("\n");
}
