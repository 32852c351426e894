/**
 * `deno task bench`: throughput, latency, API requests and CSI calls per attach and detach, CPU
 * and memory of an attacher (ours by default, any command line with `--attacher-cmd`), against
 * the e2e cluster or, with `--fake`, the in-memory API server and example driver. See
 * {@link BENCH_USAGE} and README ("Benchmarks").
 *
 * @module
 */

import {
  BENCH_USAGE,
  type BenchOptions,
  BenchUsageError,
  DETACH_FLOOD_UNPUBLISH_MS,
  parseBenchOptions,
} from "./bench_options.ts";
import type { EnvironmentFactory } from "./environment.ts";
import { FakeEnvironment } from "./fake_environment.ts";
import { panelsOf, renderPicture } from "./picture.ts";
import { ProcReader } from "./proc_stats.ts";
import { type FigureRow, figureRows, perObjectRows, renderScenario } from "./report.ts";
import { type AttacherUnderTest, runOnce, type RunResult, type Scenario } from "./run.ts";
import { buildShippedForm } from "./shipped_form.ts";
import { shortName } from "./short_name.ts";

export { shortName };

const REPO = new URL("../", import.meta.url).pathname;
const DEFAULT_OUT = new URL("./results", import.meta.url).pathname;
const FAKE_DRIVER = "example.csi.k8s.io";

/** Unthrottled client limits. */
const UNTHROTTLED = 10_000;

/** The scenarios the options ask for, in run order. */
export function scenariosFor(options: BenchOptions): Scenario[] {
  const out: Scenario[] = [];
  const base = { nodes: options.nodes, workers: options.workers };
  if (options.detachFlood) {
    return options.sizes.map((count) => ({
      ...base,
      name: `N=${count}, detach flood (unpublish ${DETACH_FLOOD_UNPUBLISH_MS} ms)`,
      count,
      qps: UNTHROTTLED,
      burst: UNTHROTTLED,
      unpublishDelayMs: DETACH_FLOOD_UNPUBLISH_MS,
    }));
  }
  if (options.pods) {
    return options.sizes.map((count) => ({
      ...base,
      name: `N=${count}, Pods through kube-controller-manager, unthrottled`,
      count,
      qps: UNTHROTTLED,
      burst: UNTHROTTLED,
      pods: true,
    }));
  }
  if (!options.skipThrottled) {
    for (const count of options.sizes.filter((n) => n <= 100)) {
      out.push({ ...base, name: `N=${count}, qps 5, burst 10`, count, qps: 5, burst: 10 });
    }
  }
  for (const count of options.sizes) {
    out.push({
      ...base,
      name: `N=${count}, unthrottled`,
      count,
      qps: UNTHROTTLED,
      burst: UNTHROTTLED,
    });
  }
  return out;
}

/** The attachers under test with their table labels (`A: main.ts`, `B: csi-attacher`). */
export function attachersFor(options: BenchOptions, ourCommand: string): AttacherUnderTest[] {
  const commands = options.attacherCommands.length > 0 ? options.attacherCommands : [ourCommand];
  return commands.map((commandLine, i) => ({
    label: `${String.fromCharCode(65 + i)}: ${shortName(commandLine)}`,
    commandLine,
  }));
}

/** JSON with NaN and infinities as null. */
function toJson(value: unknown): string {
  return JSON.stringify(
    value,
    (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v),
    2,
  );
}

/** A file-name part for a scenario name: `N=100000, unthrottled` → `N100000-unthrottled`. */
export function slug(text: string): string {
  return text.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "").replace(/^N-/, "N");
}

function stamp(date: Date): string {
  return date.toISOString().replace(/:/g, "-").replace(/\.\d+Z$/, "Z");
}

async function machineInfo(): Promise<Record<string, unknown>> {
  const read = async (path: string) => {
    try {
      return await Deno.readTextFile(path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return "";
      throw err;
    }
  };
  const cpu = (await read("/proc/cpuinfo")).match(/^model name\s*:\s*(.+)$/m)?.[1] ?? "";
  return {
    cpus: navigator.hardwareConcurrency,
    cpuModel: cpu,
    loadAverage: Deno.loadavg(),
    kernel: Deno.osRelease(),
    deno: Deno.version.deno,
    memoryBytes: Deno.systemMemoryInfo().total,
  };
}

function progress(line: string): void {
  console.error(line);
}

function summaryLine(r: RunResult): string {
  if (!r.ok) return `  FAILED: ${r.error}`;
  const f = (v: number, d = 2) => (Number.isFinite(v) ? v.toFixed(d) : "–");
  const flood = Number.isNaN(r.floodAttachLatencySeconds)
    ? ""
    : `new attach during the flood in ${f(r.floodAttachLatencySeconds)} s, `;
  const pods = r.pods === undefined
    ? ""
    : `Pod → volumesAttached p50 ${f(r.pods.attachLatency.p50)} s, all in ${
      f(r.pods.allAttachedSeconds)
    } s; Pod deleted → off volumesAttached p50 ${f(r.pods.detachLatency.p50)} s, all in ${
      f(r.pods.allDetachedSeconds)
    } s; `;
  return `  ${flood}${pods}attached in ${f(r.attachSeconds)} s (${f(r.attachesPerSecond, 1)}/s; ${
    f(r.steadyAttachesPerSecond, 1)
  }/s from 10 to 90 %), detached in ${f(r.detachSeconds)} s, CPU ${
    f(r.cpuSecondsTotal)
  } s, peak RSS ${f(r.peakRssBytes / 2 ** 20, 0)} MiB`;
}

async function main(args: string[]): Promise<number> {
  if (args.some((a) => a === "--soak" || a.startsWith("--soak="))) {
    const { runSoak } = await import("./soak.ts");
    return await runSoak(args);
  }
  if (args.includes("--takeover")) {
    const { runTakeoverMode } = await import("./takeover.ts");
    const dir = await Deno.makeTempDir({ prefix: "csi-attacher-bench-" });
    try {
      return await runTakeoverMode(args, DEFAULT_OUT, async () => {
        const shipped = await buildShippedForm(REPO, dir, Deno.env.get("DENORT_BIN"));
        progress(`Ours: ${shipped.description}`);
        return shipped.commandLine;
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
  if (args.includes("--footprint")) {
    const { runFootprint } = await import("./footprint.ts");
    return await runFootprint(args, REPO);
  }
  let options: BenchOptions;
  try {
    options = parseBenchOptions(args, DEFAULT_OUT);
  } catch (err) {
    if (err instanceof BenchUsageError) {
      console.error(`${err.message}\n\n${BENCH_USAGE}`);
      return 2;
    }
    throw err;
  }
  if (options.help) {
    console.log(BENCH_USAGE);
    return 0;
  }
  let ourCommand = "";
  let shippedDir: string | undefined;
  if (options.attacherCommands.length === 0) {
    shippedDir = await Deno.makeTempDir({ prefix: "csi-attacher-bench-" });
    const shipped = await buildShippedForm(REPO, shippedDir, Deno.env.get("DENORT_BIN"));
    ourCommand = shipped.commandLine;
    progress(`Ours: ${shipped.description}`);
  }
  try {
    return await runAll(options, attachersFor(options, ourCommand));
  } finally {
    if (shippedDir !== undefined) await Deno.remove(shippedDir, { recursive: true });
  }
}

async function runAll(options: BenchOptions, attachers: AttacherUnderTest[]): Promise<number> {
  const scenarios = scenariosFor(options);

  let environment: EnvironmentFactory;
  let environmentName: string;
  if (options.fake) {
    environment = (p) => FakeEnvironment.start({ ...p, driver: FAKE_DRIVER });
    environmentName = "fake";
  } else {
    const { openClusterEnvironment } = await import("./cluster_environment.ts");
    const cluster = await openClusterEnvironment({
      pods: options.pods,
      log: progress,
      env: (name) => Deno.env.get(name),
    });
    if (cluster === undefined && options.pods) {
      progress("The e2e cluster is not available: --pods needs it.");
      return 1;
    } else if (cluster === undefined) {
      progress("The e2e cluster is not available; running with --fake instead.");
      environment = (p) => FakeEnvironment.start({ ...p, driver: FAKE_DRIVER });
      environmentName = "fake";
    } else {
      environment = cluster.factory;
      environmentName = cluster.description;
    }
  }

  const started = new Date();
  const logDir = `${options.outDir}/logs-${stamp(started)}`;
  await Deno.mkdir(logDir, { recursive: true });
  const machine = await machineInfo();
  const proc = await ProcReader.create();
  progress(
    `Environment: ${environmentName}; attachers: ${
      attachers.map((a) => `${a.label} = ${a.commandLine}`).join("; ")
    }`,
  );

  const results: { scenario: Scenario; runs: RunResult[][]; rows: FigureRow[] }[] = [];
  let prefixCounter = 0;
  for (const scenario of scenarios) {
    const runs: RunResult[][] = attachers.map(() => []);
    for (let run = 1; run <= options.runs; run++) {
      for (const [i, attacher] of attachers.entries()) {
        progress(`[${scenario.name}] run ${run}/${options.runs} ${attacher.label}`);
        const result = await runOnce({ environment, proc, progress }, scenario, attacher, {
          run,
          quietMs: 1000,
          quietMaxMs: 20_000,
          restMs: options.restMs,
          logDir,
          prefix: `b${stamp(started).slice(11, 19).replace(/-/g, "")}r${prefixCounter++}-`,
        });
        progress(summaryLine(result));
        runs[i]?.push(result);
      }
    }
    results.push({ scenario, runs, rows: figureRows(scenario, runs) });
  }

  const labels = attachers.map((a) => a.label);
  const medians = options.runs > 1 ? `, medians of ${options.runs} runs` : "";
  const text: string[] = [];
  for (const { scenario, rows } of results) {
    text.push(
      `### ${scenario.name}, ${scenario.workers} workers, ${scenario.nodes} nodes (${environmentName}${medians})`,
      "",
      renderScenario(labels, rows),
      "",
    );
  }
  const perObject = perObjectRows(results, UNTHROTTLED);
  if (perObject.length > 0) {
    text.push(
      `### Memory per cached object (slope of the medians between the two largest N)`,
      "",
      renderScenario(labels, perObject),
      "",
    );
  }
  text.push(...attachers.map((a) => `${a.label} = \`${a.commandLine}\``));
  console.log(text.join("\n"));

  const file = `${options.outDir}/${stamp(started)}.json`;
  await Deno.writeTextFile(
    file,
    toJson({
      startedAt: started.toISOString(),
      finishedAt: new Date().toISOString(),
      environment: environmentName,
      machine,
      options,
      attachers,
      scenarios: results.map(({ scenario, runs, rows }) => ({
        scenario,
        figures: rows.map((r) =>
          Object.fromEntries([["figure", r.figure], ...labels.map((l, i) => [l, r.values[i]])])
        ),
        runs: runs.flat(),
      })),
      perObject: perObject.map((r) =>
        Object.fromEntries([["figure", r.figure], ...labels.map((l, i) => [l, r.values[i]])])
      ),
    }) + "\n",
  );
  progress(`Wrote ${file}`);
  for (const { scenario, runs } of results) {
    const svg = `${options.outDir}/${stamp(started)}-${slug(scenario.name)}.svg`;
    await Deno.writeTextFile(
      svg,
      renderPicture(
        `${scenario.name}, ${scenario.workers} workers, ${scenario.nodes} nodes (${environmentName}), ${
          started.toISOString().slice(0, 10)
        }`,
        scenario.count,
        panelsOf(labels, runs),
        labels,
      ),
    );
    progress(`Wrote ${svg}`);
  }
  const failed = results.some(({ runs }) => runs.flat().some((r) => !r.ok));
  return failed ? 1 : 0;
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
