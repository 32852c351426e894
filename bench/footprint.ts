/**
 * `deno task bench -- --footprint`: where one attacher's memory is at each point of a run,
 * against the in-memory API server and example driver, or with `--cluster` the e2e cluster
 * (kube-apiserver, etcd and the CSI mock driver, as `deno task bench` without `--fake`).
 *
 * The run is the benchmark's (`run.ts`) without the timing: N PVs seeded, the canary attached
 * (the point "started"), all N VolumeAttachments created and attached, `--rest` ms of rest
 * ("rest"), all N deleted and detached ("detached"); during the attach and the detach phase
`/proc` is sampled every {@link PEAK_SAMPLE_MS} ms and the sample with the largest RSS is shown
too ("attach peak", "detach peak": which pages grew). At each point it reads `VmRSS`, `VmHWM` and
 * `/proc/<pid>/smaps_rollup` (anonymous and file-backed pages); for a `deno run` command line it
 * adds `--inspect=127.0.0.1:<free port>` and reads the V8 heap over the inspector: its size
 * before and after a full garbage collection and, with `--snapshot`, a heap snapshot summed by
 * constructor (the largest groups, and what grew between "started" and "rest" per
 * VolumeAttachment + PV pair). The inspector itself costs a few MiB of RSS (its server thread
 * and session), so RSS figures here sit above the benchmark's; compare points of one run, or
 * runs with `--no-inspect`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { attacherArgs, AttacherProcess } from "./attacher_process.ts";
import type { BenchEnvironment } from "./environment.ts";
import { FakeEnvironment } from "./fake_environment.ts";
import { freePort, Inspector } from "./inspector.ts";
import {
  renderBreakdown,
  type SamplingHeapProfile,
  summarizeAllocations,
} from "./alloc_profile.ts";
import {
  type HeapSummary,
  parseSmapsRollup,
  type SmapsRollup,
  summarizeHeapSnapshot,
} from "./memory_breakdown.ts";
import { parseStat, parseStatusMemory } from "./proc_stats.ts";
import {
  type ClassTotals,
  largestUnexplained,
  type Mapping,
  type MappingClass,
  parseSmaps,
  totalsByClass,
} from "./smaps.ts";
import { buildShippedForm } from "./shipped_form.ts";
import type { WaitTarget } from "./timeline.ts";
import { formatNumber, formatTable } from "./table.ts";

/** Usage text of the mode. */
export const FOOTPRINT_USAGE = `deno task bench -- --footprint [options]

One attacher against the in-memory API server and example driver (or, with --cluster, the e2e
cluster: kube-apiserver, etcd and the CSI mock driver): RSS, peak RSS, anonymous and
file-backed pages (smaps_rollup) and, for a 'deno run' command, the V8 heap over the inspector,
after start, at rest with N attached, after the detaches, and at the largest RSS sampled in the
attach and the detach phase (every 20 ms; heap and external memory of the sample with the largest
RSS from Deno.memoryUsage() over the inspector).

  --sizes=N             N VolumeAttachments and PVs (default 5000; one size)
  --attacher-cmd='CMD'  the attacher (default: ours as shipped, see --help)
  --snapshot            take a heap snapshot at each point and print the largest groups
  --snapshot-dir=DIR    also write the snapshots there (.heapsnapshot, for DevTools)
  --no-inspect          no inspector: RSS and smaps_rollup only, as the benchmark sees them
  --smaps               also read /proc/<pid>/smaps at each point and peak: resident memory by
                        kind of mapping (malloc arenas, V8 pages, thread stacks, ...; bench/smaps.ts)
                        and the largest mappings no class explains
  --alloc               a sampling heap profile of the attach phase (garbage included), printed
                        as bytes allocated per attach by function (needs the inspector)
  --rest=3000           ms at rest before the "rest" point
  --nodes=50            nodes the VolumeAttachments are spread over
  --cluster             the e2e cluster instead of the in-memory fakes (as the benchmark
                        without --fake; exits 1 when the cluster cannot be prepared)
  --top=20              groups of each snapshot to print
`;

const MIB = 1024 * 1024;

/** Mean bytes between two samples of `--alloc` (V8's default is 32 KiB). */
const ALLOC_SAMPLING_BYTES = 4096;

/** How often the peak of each phase is sampled (`VmRSS` and `smaps_rollup`), ms. */
const PEAK_SAMPLE_MS = 20;

/** The figures of one point of the run. */
export interface FootprintPoint {
  point: string;
  /** CPU seconds (user + system) since the process started, at 100 ticks a second. */
  cpuSeconds: number;
  rssBytes: number;
  peakRssBytes: number;
  smaps: SmapsRollup;
  /** V8 heap before any forced collection; undefined without the inspector. */
  heap?: { usedBytes: number; totalBytes: number };
  /** V8 heap after two full collections. */
  heapAfterGc?: { usedBytes: number; totalBytes: number };
  snapshot?: HeapSummary;
  /**
   * `Deno.memoryUsage().external` (ArrayBuffer backing stores and other memory V8 is told of
   * outside its heap), read over the inspector at the peaks.
   */
  externalBytes?: number;
  /** With `--smaps`: every mapping (`/proc/<pid>/smaps`). */
  maps?: Mapping[];
}

/**
 * Adds `Deno.memoryUsage()` of the inspected process to a peak sample (its heap and external
 * memory when its RSS was highest). The reading comes a moment after the `/proc` sample.
 */
async function addMemoryUsage(inspector: Inspector, p: FootprintPoint): Promise<void> {
  try {
    const r = await inspector.call("Runtime.evaluate", {
      expression: "JSON.stringify(Deno.memoryUsage())",
      returnByValue: true,
    });
    const usage = JSON.parse(String((r.result as { value?: unknown }).value)) as {
      heapTotal: number;
      heapUsed: number;
      external: number;
    };
    p.heap = { usedBytes: usage.heapUsed, totalBytes: usage.heapTotal };
    p.externalBytes = usage.external;
  } catch {
    // the process is busy or gone: the sample keeps its /proc figures
  }
}

/**
 * `commandLine` with `--inspect=127.0.0.1:<port>` after the `run` of a `deno run` command, also
 * one under `env NAME=VALUE …` (the shipped form); undefined for any other command (the Go
 * attacher).
 */
export function withInspector(commandLine: string, port: number): string | undefined {
  const words = commandLine.split(/\s+/).filter((w) => w !== "");
  let program = 0;
  if (words[0] === "env") {
    program = 1;
    while (words[program]?.includes("=")) program++;
  }
  const run = words.indexOf("run", program);
  if (run <= program || !/(^|\/)deno'?$/.test(words[program] ?? "")) return undefined;
  words.splice(run + 1, 0, `--inspect=127.0.0.1:${port}`);
  return words.join(" ");
}

function readPoint(pid: number, point: string, smaps = false): FootprintPoint {
  const maps = smaps ? parseSmaps(Deno.readTextFileSync(`/proc/${pid}/smaps`)) : undefined;
  const status = parseStatusMemory(Deno.readTextFileSync(`/proc/${pid}/status`));
  const stat = parseStat(Deno.readTextFileSync(`/proc/${pid}/stat`));
  return {
    point,
    cpuSeconds: (stat.utime + stat.stime) / 100,
    rssBytes: status.rssBytes,
    peakRssBytes: status.peakRssBytes,
    smaps: parseSmapsRollup(Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`)),
    ...(maps !== undefined && { maps }),
  };
}

/** The order of the classes in {@link renderMappings}. */
const CLASS_ORDER: readonly MappingClass[] = [
  "file",
  "v8 pages",
  "v8 large objects",
  "v8 code",
  "malloc main arena",
  "malloc thread arena",
  "thread stack",
  "[stack]",
  "other anonymous",
];

/**
 * Resident MiB by kind of mapping (`./smaps.ts`), one column per point that has its mappings,
 * then the largest mappings no class explains at the last such point.
 */
export function renderMappings(points: readonly FootprintPoint[], top = 12): string {
  const withMaps = points.filter((p) => p.maps !== undefined);
  if (withMaps.length === 0) return "";
  const totals: ClassTotals[] = withMaps.map((p) => totalsByClass(p.maps!));
  const rows = CLASS_ORDER.map((c) => [
    c,
    ...totals.map((t) => formatNumber((t.get(c) ?? 0) / MIB, 1)),
  ]);
  let out = formatTable(["resident MiB", ...withMaps.map((p) => p.point)], rows);
  for (const p of withMaps.filter((p) => p.point.endsWith("peak"))) {
    const large = largestUnexplained(p.maps!, top);
    out += `\n\nlargest mappings of no class at "${p.point}":\n\n` + formatTable(
      ["address", "size KiB", "perms", "class", "resident KiB"],
      large.map((m) => [
        m.start.toString(16),
        formatNumber((m.end - m.start) / 1024, 0),
        m.perms,
        m.class,
        formatNumber(m.rssBytes / 1024, 0),
      ]),
    );
  }
  return out;
}

async function waitFor(env: BenchEnvironment, proc: AttacherProcess, target: WaitTarget) {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const answer = await env.wait(target, 2000);
    if (answer.done) return;
    if (proc.exited !== undefined) throw new Error(`the attacher exited waiting for ${target}`);
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${target}`);
  }
}

/** The points as a table: one column per point. */
export function renderPoints(points: readonly FootprintPoint[]): string {
  const mib = (v: number | undefined) => v === undefined ? "–" : formatNumber(v / MIB, 1);
  const row = (figure: string, f: (p: FootprintPoint) => number | undefined) => [
    figure,
    ...points.map((p) => mib(f(p))),
  ];
  return formatTable(["MiB", ...points.map((p) => p.point)], [
    [
      "CPU s since start (not MiB)",
      ...points.map((p) => formatNumber(p.cpuSeconds, 2)),
    ],
    row("VmRSS", (p) => p.rssBytes),
    row("VmHWM (peak so far)", (p) => p.peakRssBytes),
    row("anonymous pages", (p) => p.smaps.anonymousBytes),
    row("file-backed pages", (p) => p.smaps.fileBytes),
    row("V8 heap committed", (p) => p.heap?.totalBytes),
    row("V8 heap used", (p) => p.heap?.usedBytes),
    row("V8 heap used after full GC", (p) => p.heapAfterGc?.usedBytes),
    row("V8 heap committed after full GC", (p) => p.heapAfterGc?.totalBytes),
    row(
      "anonymous − V8 committed (malloc, stacks)",
      (p) => p.heap === undefined ? undefined : p.smaps.anonymousBytes - p.heap.totalBytes,
    ),
    row("external (ArrayBuffers)", (p) => p.externalBytes),
    row("snapshot self sizes", (p) => p.snapshot?.totalBytes),
  ]);
}

/** The largest groups of a snapshot and, with `base`, their growth per object. */
export function renderSnapshot(
  summary: HeapSummary,
  top: number,
  base?: { summary: HeapSummary; perObjects: number },
): string {
  const before = new Map(base?.summary.groups.map((g) => [g.key, g]) ?? []);
  const header = ["group", "count", "self KiB"];
  if (base !== undefined) header.push("Δ bytes / pair");
  const rows = summary.groups.slice(0, top).map((g) => {
    const cells = [g.key, String(g.count), formatNumber(g.selfBytes / 1024, 0)];
    if (base !== undefined) {
      const was = before.get(g.key)?.selfBytes ?? 0;
      cells.push(formatNumber((g.selfBytes - was) / base.perObjects, 0));
    }
    return cells;
  });
  return formatTable(header, rows);
}

/**
 * The run's environment: the in-memory fakes, or with `cluster` the e2e cluster (undefined, said
 * on stderr, when it cannot be prepared).
 */
async function startEnvironment(
  cluster: boolean,
  params: { count: number; nodes: number; prefix: string },
): Promise<BenchEnvironment | undefined> {
  if (!cluster) return await FakeEnvironment.start({ ...params, driver: "example.csi.k8s.io" });
  const { openClusterEnvironment } = await import("./cluster_environment.ts");
  const opened = await openClusterEnvironment({
    log: (line) => console.error(line),
    env: (name) => Deno.env.get(name),
  });
  if (opened === undefined) {
    console.error("The e2e cluster is not available.");
    return undefined;
  }
  return await opened.factory(params);
}

/** Runs the mode; resolves with the exit code. */
export async function runFootprint(args: string[], repo: string): Promise<number> {
  const parsed = parseArgs({
    // `deno task bench -- --footprint …` passes the "--" on.
    args: args.filter((a) => a !== "--footprint" && a !== "--"),
    options: {
      sizes: { type: "string", default: "5000" },
      "attacher-cmd": { type: "string" },
      snapshot: { type: "boolean", default: false },
      "snapshot-dir": { type: "string" },
      "no-inspect": { type: "boolean", default: false },
      smaps: { type: "boolean", default: false },
      alloc: { type: "boolean", default: false },
      rest: { type: "string", default: "3000" },
      nodes: { type: "string", default: "50" },
      top: { type: "string", default: "20" },
      fake: { type: "boolean", default: true },
      cluster: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  const o = parsed.values;
  if (o.help) {
    console.log(FOOTPRINT_USAGE);
    return 0;
  }
  const count = Number(o.sizes);
  const restMs = Number(o.rest);
  const top = Number(o.top);
  const nodes = Number(o.nodes);
  if (
    !Number.isInteger(count) || count < 1 || !(restMs >= 0) || !(top >= 1) ||
    !Number.isInteger(nodes) || nodes < 1
  ) {
    console.error(FOOTPRINT_USAGE);
    return 2;
  }
  let shippedDir: string | undefined;
  let command = o["attacher-cmd"];
  if (command === undefined) {
    shippedDir = await Deno.makeTempDir({ prefix: "csi-attacher-footprint-" });
    command = (await buildShippedForm(repo, shippedDir, Deno.env.get("DENORT_BIN"))).commandLine;
  }
  const port = freePort();
  const inspected = o["no-inspect"] ? undefined : withInspector(command, port);
  const env = await startEnvironment(o.cluster, { count, nodes, prefix: "fp-" });
  if (env === undefined) return 1;
  const logFile = await Deno.makeTempFile({ prefix: "csi-attacher-footprint-", suffix: ".log" });
  const points: FootprintPoint[] = [];
  let proc: AttacherProcess | undefined;
  let inspector: Inspector | undefined;
  let allocations: SamplingHeapProfile | undefined;
  try {
    await env.createCanary();
    const flags = attacherArgs({
      kubeconfig: env.kubeconfigPath,
      csiAddress: env.csiAddress,
      workerThreads: 10,
      kubeApiQps: 10_000,
      kubeApiBurst: 10_000,
      verbosity: 1,
    });
    proc = AttacherProcess.start(inspected ?? command, flags, logFile);
    console.log(`# ${inspected ?? command}`);
    if (inspected !== undefined) inspector = await Inspector.connect(port);
    const measure = async (point: string) => {
      const p = readPoint((proc as AttacherProcess).pid, point, o.smaps);
      if (inspector !== undefined) {
        p.heap = await inspector.heapUsage();
        if (o.snapshot) {
          const text = await inspector.heapSnapshot();
          if (o["snapshot-dir"] !== undefined) {
            await Deno.mkdir(o["snapshot-dir"], { recursive: true });
            await Deno.writeTextFile(`${o["snapshot-dir"]}/${point}.heapsnapshot`, text);
          }
          p.snapshot = summarizeHeapSnapshot(JSON.parse(text));
        }
        await inspector.collectGarbage();
        p.heapAfterGc = await inspector.heapUsage();
      }
      points.push(p);
    };
    await waitFor(env, proc, "canary");
    await measure("started");
    const pid = proc.pid;
    const peaks = {
      attach: undefined as FootprintPoint | undefined,
      detach: undefined as FootprintPoint | undefined,
    };
    let phase: "attach" | "detach" = "attach";
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        let p: FootprintPoint;
        try {
          p = readPoint(pid, `${phase} peak`);
        } catch {
          return; // exited: the wait below reports it
        }
        if (p.rssBytes > (peaks[phase]?.rssBytes ?? 0)) {
          if (o.smaps) {
            try {
              p.maps = parseSmaps(Deno.readTextFileSync(`/proc/${pid}/smaps`));
            } catch {
              return;
            }
          }
          if (inspector !== undefined) await addMemoryUsage(inspector, p);
          peaks[phase] = p;
        }
        await new Promise((r) => setTimeout(r, PEAK_SAMPLE_MS));
      }
    })();
    try {
      if (o.alloc && inspector !== undefined) {
        await inspector.call("HeapProfiler.startSampling", {
          samplingInterval: ALLOC_SAMPLING_BYTES,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
      }
      await env.startAttach();
      await waitFor(env, proc, "attached");
      if (o.alloc && inspector !== undefined) {
        const r = await inspector.call("HeapProfiler.stopSampling");
        allocations = r.profile as SamplingHeapProfile;
      }
      await new Promise((r) => setTimeout(r, restMs));
      await measure("rest");
      phase = "detach";
      await env.startDetach();
      await waitFor(env, proc, "gone");
    } finally {
      sampling = false;
      await sampler;
    }
    await measure("detached");
    for (const peak of [peaks.attach, peaks.detach]) if (peak !== undefined) points.push(peak);
  } finally {
    inspector?.close();
    await proc?.stop();
    await env.close();
    if (shippedDir !== undefined) await Deno.remove(shippedDir, { recursive: true });
  }
  console.log(`\n### N=${count}: memory at each point\n\n${renderPoints(points)}`);
  if (o.smaps) console.log(`\n### resident memory by kind of mapping\n\n${renderMappings(points)}`);
  if (allocations !== undefined) {
    const a = summarizeAllocations(allocations);
    console.log(
      `\n### allocated during the attach phase, per attach (sampled, garbage included)\n`,
    );
    console.log(`total ${(a.totalBytes / count).toFixed(0)} B per attach\n`);
    console.log(renderBreakdown("by module", a.selfByModule, a.totalBytes, count, top));
    console.log(renderBreakdown("\nby function", a.selfByFunction, a.totalBytes, count, top));
    console.log(
      renderBreakdown(
        "\nby the innermost function of ours",
        a.byOwnCaller,
        a.totalBytes,
        count,
        top,
      ),
    );
  }
  const [started, rest, detached] = points;
  if (started?.snapshot !== undefined && rest?.snapshot !== undefined) {
    console.log(`\n### heap snapshot after start (N PVs cached)\n`);
    console.log(renderSnapshot(started.snapshot, top));
    console.log(`\n### heap snapshot at rest (N VAs attached), growth over "started" per VA\n`);
    console.log(
      renderSnapshot(rest.snapshot, top, { summary: started.snapshot, perObjects: count }),
    );
  }
  if (detached?.snapshot !== undefined) {
    console.log(`\n### heap snapshot after the detaches\n`);
    console.log(renderSnapshot(detached.snapshot, top));
  }
  console.log(`\nattacher log: ${logFile}`);
  return 0;
}
