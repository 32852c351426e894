/**
 * Summarises a V8 CPU profile (`deno run --cpu-prof`): where the time went, by function (self
 * time), by module or package (self time), and the functions with the most inclusive time.
 *
 * Usage: `deno run --allow-read bench/cpu_profile.ts <file.cpuprofile> [top=25] [fromMs=0]`;
 * `fromMs` skips the first milliseconds of the profile (the start: module loading, the first
 * list and watch), so that only the steady state is summarised. To profile the
 * attacher during a benchmark run:
 * `deno task bench -- --fake --sizes=1000 --skip-throttled
 *  --attacher-cmd "deno run -A --cpu-prof --cpu-prof-dir=/tmp/prof main.ts"`
 * (the profile is written when the attacher exits at the end of the run).
 *
 * @module
 */

/** The parts of a `.cpuprofile` that are read. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  samples: number[];
  timeDeltas: number[];
}

/** Time in milliseconds per key, largest first. */
export type Breakdown = [key: string, ms: number][];

/** A summary of a profile. */
export interface ProfileSummary {
  /** Sampled time, ms, including idle. */
  totalMs: number;
  /** `(idle)` samples, ms. */
  idleMs: number;
  /** Self time by `function (file:line)`. */
  selfByFunction: Breakdown;
  /** Self time by module: the npm package, `node:` or `ext:` module, or the repository file. */
  selfByModule: Breakdown;
  /** Inclusive time (self plus callees) by `function (file:line)`. */
  inclusiveByFunction: Breakdown;
}

/** The module a script URL belongs to: `npm:<package>`, `ext:<module>`, or the file name. */
export function moduleOf(url: string): string {
  if (url === "") return "(native)";
  const npm = url.match(/\/npm\/registry\.npmjs\.org\/((?:@[^/]+\/)?[^/]+)\//);
  if (npm) return `npm:${npm[1]}`;
  if (url.startsWith("ext:") || url.startsWith("node:")) {
    return url.split("/").slice(0, 2).join("/");
  }
  const file = url.match(/\/work\/[^/]+\/(.+)$/) ?? url.match(/([^/]+\/[^/]+)$/);
  return file ? (file[1] as string) : url;
}

function label(frame: CpuProfile["nodes"][number]["callFrame"]): string {
  const name = frame.functionName || "(anonymous)";
  if (frame.url === "") return name;
  return `${name} (${moduleOf(frame.url)}:${frame.lineNumber + 1})`;
}

function sorted(map: Map<string, number>): Breakdown {
  return [...map].sort((a, b) => b[1] - a[1]);
}

/**
 * Summarises `profile`, skipping samples taken in its first `fromMs` milliseconds. Sample times
 * are µs in the profile and ms in the summary.
 */
export function summarizeProfile(profile: CpuProfile, fromMs = 0): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  let totalUs = 0;
  let atUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i] as number;
    atUs += profile.timeDeltas[i] ?? 0;
    if (atUs < fromMs * 1000) continue;
    // timeDeltas[i] is the time before sample i; attribute the next delta to it instead.
    const us = profile.timeDeltas[i + 1] ?? 0;
    self.set(id, (self.get(id) ?? 0) + us);
    totalUs += us;
  }
  const selfByFunction = new Map<string, number>();
  const selfByModule = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let idleUs = 0;
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (node === undefined) continue;
    const key = label(node.callFrame);
    if (node.callFrame.functionName === "(idle)") idleUs += us;
    selfByFunction.set(key, (selfByFunction.get(key) ?? 0) + us / 1000);
    const mod = node.callFrame.url === "" ? key : moduleOf(node.callFrame.url);
    selfByModule.set(mod, (selfByModule.get(mod) ?? 0) + us / 1000);
    // Inclusive: every distinct function on the stack gets the sample once.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (frame === undefined) break;
      const k = label(frame);
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + us / 1000);
    }
  }
  return {
    totalMs: totalUs / 1000,
    idleMs: idleUs / 1000,
    selfByFunction: sorted(selfByFunction),
    selfByModule: sorted(selfByModule),
    inclusiveByFunction: sorted(inclusive),
  };
}

function printBreakdown(title: string, rows: Breakdown, busyMs: number, top: number): void {
  console.log(`\n${title}`);
  for (const [key, ms] of rows.slice(0, top)) {
    console.log(
      `${ms.toFixed(0).padStart(8)} ms ${(100 * ms / busyMs).toFixed(1).padStart(5)} %  ${key}`,
    );
  }
}

if (import.meta.main) {
  const [file, topText, fromText] = Deno.args;
  if (file === undefined) {
    console.error("usage: cpu_profile.ts <file.cpuprofile> [top] [fromMs]");
    Deno.exit(2);
  }
  const top = Number(topText ?? "25");
  const profile = JSON.parse(await Deno.readTextFile(file)) as CpuProfile;
  const s = summarizeProfile(profile, Number(fromText ?? "0"));
  const busy = s.totalMs - s.idleMs;
  console.log(
    `sampled ${s.totalMs.toFixed(0)} ms, idle ${s.idleMs.toFixed(0)} ms, busy ${
      busy.toFixed(0)
    } ms`,
  );
  printBreakdown("self time by module", s.selfByModule.filter(([k]) => k !== "(idle)"), busy, top);
  printBreakdown(
    "self time by function",
    s.selfByFunction.filter(([k]) => k !== "(idle)"),
    busy,
    top,
  );
  printBreakdown(
    "inclusive time by function",
    s.inclusiveByFunction.filter(([k]) => k !== "(idle)" && k !== "(root)"),
    busy,
    top,
  );
}
