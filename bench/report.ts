/**
 * Turning runs into figures: the medians per attacher and scenario, and the text table.
 *
 * @module
 */

import type { PhaseFigures, RunResult, Scenario } from "./run.ts";
import type { ContextSwitches } from "./proc_stats.ts";
import { median, total } from "./stats.ts";
import { formatNumber, formatRatio, formatTable } from "./table.ts";

/** One row of the table: a figure's median for each attacher. */
export interface FigureRow {
  figure: string;
  /** Medians, one per attacher, in the attachers' order. */
  values: number[];
  /** Decimals to print. */
  digits: number;
}

const MIB = 1024 * 1024;

type Extract = (run: RunResult) => number;

function perObject(scenario: Scenario, f: (run: RunResult) => number | undefined): Extract {
  return (run) => {
    const v = f(run);
    return v === undefined ? NaN : v / scenario.count;
  };
}

/** Keys seen in any run's counts for `pick`, sorted. */
function keysOf(runs: RunResult[], pick: (run: RunResult) => Record<string, number> | undefined) {
  const keys = new Set<string>();
  for (const run of runs) for (const k of Object.keys(pick(run) ?? {})) keys.add(k);
  return [...keys].sort();
}

/**
 * The figures of one scenario: for each attacher the median over its successful runs (runs that
 * failed contribute nothing; a figure no run produced is NaN).
 */
export function figureRows(scenario: Scenario, runsByAttacher: RunResult[][]): FigureRow[] {
  const okRuns = runsByAttacher.map((runs) => runs.filter((r) => r.ok));
  const all = okRuns.flat();
  const rows: FigureRow[] = [];
  const add = (figure: string, digits: number, f: Extract) => {
    rows.push({ figure, digits, values: okRuns.map((runs) => median(runs.map(f))) });
  };
  add("start → first attach (s)", 2, (r) => r.startupSeconds);
  if (scenario.unpublishDelayMs !== undefined) {
    add("flood: new attach latency (s)", 2, (r) => r.floodAttachLatencySeconds);
  }
  if (scenario.pods) {
    add("Pod → volumesAttached p50 (s)", 2, (r) => r.pods?.attachLatency.p50 ?? NaN);
    add("Pod → volumesAttached p99 (s)", 2, (r) => r.pods?.attachLatency.p99 ?? NaN);
    add("all Pods' volumes attached (s)", 2, (r) => r.pods?.allAttachedSeconds ?? NaN);
    add("Pod deleted → off volumesAttached p50 (s)", 2, (r) => r.pods?.detachLatency.p50 ?? NaN);
    add("Pod deleted → off volumesAttached p99 (s)", 2, (r) => r.pods?.detachLatency.p99 ?? NaN);
    add("all off volumesAttached (s)", 2, (r) => r.pods?.allDetachedSeconds ?? NaN);
  }
  add("all attached (s)", 2, (r) => r.attachSeconds);
  add("attaches / s", 1, (r) => r.attachesPerSecond);
  add("attaches / s, 10 → 90 % attached", 1, (r) => r.steadyAttachesPerSecond);
  add("attach latency p50 (s)", 2, (r) => r.attachLatency.p50);
  add("attach latency p95 (s)", 2, (r) => r.attachLatency.p95);
  add("attach latency p99 (s)", 2, (r) => r.attachLatency.p99);
  add("all detached (s)", 2, (r) => r.detachSeconds);
  add("detaches / s", 1, (r) => r.detachesPerSecond);
  add("detach latency p50 (s)", 2, (r) => r.detachLatency.p50);
  add("detach latency p95 (s)", 2, (r) => r.detachLatency.p95);
  add("detach latency p99 (s)", 2, (r) => r.detachLatency.p99);
  for (const phase of ["attach", "detach"] as const) {
    const requests = (r: RunResult) => r.phases[phase]?.requests.byKey;
    add(
      `API requests / ${phase}`,
      2,
      perObject(scenario, (r) => {
        const c = requests(r);
        return c === undefined ? undefined : total(c);
      }),
    );
    for (const key of keysOf(all, requests)) {
      add(`  ${key}`, 2, perObject(scenario, (r) => requests(r)?.[key] ?? 0));
    }
  }
  add("API requests at rest (total)", 0, (r) => {
    const c = r.phases.rest?.requests.byKey;
    return c === undefined ? NaN : total(c);
  });
  for (const phase of ["attach", "detach"] as const) {
    const calls = (r: RunResult) => r.phases[phase]?.csiCalls;
    add(
      `CSI calls / ${phase}`,
      2,
      perObject(scenario, (r) => {
        const c = calls(r);
        return c === undefined ? undefined : total(c);
      }),
    );
    for (const key of keysOf(all, calls)) {
      add(`  ${key}`, 2, perObject(scenario, (r) => calls(r)?.[key] ?? 0));
    }
  }
  add("CPU s, start (to first attach)", 2, (r) => r.phases.startup?.cpuSeconds ?? NaN);
  add("CPU s, attach phase", 2, (r) => r.phases.attach?.cpuSeconds ?? NaN);
  add("CPU ms / attach", 2, perObject(scenario, (r) => msOf(r.phases.attach?.cpuSeconds)));
  add("CPU s, detach phase", 2, (r) => r.phases.detach?.cpuSeconds ?? NaN);
  add("CPU ms / detach", 2, perObject(scenario, (r) => msOf(r.phases.detach?.cpuSeconds)));
  add("CPU s, whole run", 2, (r) => r.cpuSecondsTotal);
  // How often the attacher went to sleep and was woken, and was preempted: on a busy machine each
  // wake-up costs CPU of its own (the scheduler, cold caches), whatever the work it brings.
  const switches = (phase: PhaseFigures | undefined, kind: keyof ContextSwitches) =>
    phase?.switches?.[kind];
  add("wake-ups / attach", 2, perObject(scenario, (r) => switches(r.phases.attach, "voluntary")));
  add("wake-ups / detach", 2, perObject(scenario, (r) => switches(r.phases.detach, "voluntary")));
  add(
    "preemptions / attach",
    2,
    perObject(scenario, (r) => switches(r.phases.attach, "involuntary")),
  );
  add("RSS after start (MiB)", 1, (r) => r.startupRssBytes / MIB);
  add("RSS at rest, all attached (MiB)", 1, (r) => r.restRssBytes / MIB);
  add("peak RSS (MiB)", 1, (r) => r.peakRssBytes / MIB);
  add(
    "API server CPU s, attach phase",
    2,
    (r) => r.phases.attach?.helperCpuSeconds.apiServer ?? NaN,
  );
  // What serving this attacher costs the control plane: kube-apiserver and, on the cluster,
  // etcd (the in-memory server has no etcd), read from their /proc over the same phase.
  const serverMs = (phase: PhaseFigures | undefined): number | undefined => {
    if (phase === undefined) return undefined;
    const { apiServer, etcd } = phase.helperCpuSeconds;
    if (apiServer === undefined) return undefined;
    return (apiServer + (etcd ?? 0)) * 1000;
  };
  add(
    "API server + etcd CPU ms / attach",
    2,
    perObject(scenario, (r) => serverMs(r.phases.attach)),
  );
  add(
    "API server + etcd CPU ms / detach",
    2,
    perObject(scenario, (r) => serverMs(r.phases.detach)),
  );
  return rows;
}

function msOf(seconds: number | undefined): number | undefined {
  return seconds === undefined ? undefined : seconds * 1000;
}

/**
 * The table of one scenario: a column per attacher and, with two attachers, their ratio
 * (second / first).
 */
export function renderScenario(labels: readonly string[], rows: readonly FigureRow[]): string {
  const header = ["figure", ...labels];
  if (labels.length === 2) header.push(`${labels[1]?.split(":")[0]} / ${labels[0]?.split(":")[0]}`);
  const body = rows.map((row) => {
    const cells = [row.figure, ...row.values.map((v) => formatNumber(v, row.digits))];
    if (labels.length === 2) cells.push(formatRatio(row.values[0] ?? NaN, row.values[1] ?? NaN));
    return cells;
  });
  return formatTable(header, body);
}

/** The scenarios of a benchmark run with their runs, per attacher (as `main.ts` keeps them). */
export interface ScenarioRuns {
  scenario: Scenario;
  runs: RunResult[][];
}

/**
 * Memory per cached object: the slope of the median RSS between the two largest N of the
 * unthrottled attach/detach scenarios of one run (no detach flood, no Pods), for each attacher.
 * The run seeds N PersistentVolumes before the start and creates N VolumeAttachments after it,
 * so the RSS after start grows with the PVs and the RSS at rest with VA + PV pairs. Empty when
 * fewer than two such sizes ran.
 */
export function perObjectRows(
  scenarios: readonly ScenarioRuns[],
  unthrottledQps: number,
): FigureRow[] {
  const sized = scenarios
    .filter(({ scenario }) =>
      scenario.qps >= unthrottledQps && scenario.unpublishDelayMs === undefined &&
      !scenario.pods
    )
    .sort((a, b) => a.scenario.count - b.scenario.count);
  const small = sized.at(-2);
  const large = sized.at(-1);
  if (small === undefined || large === undefined) return [];
  const dn = large.scenario.count - small.scenario.count;
  if (dn <= 0) return [];
  const slope = (f: (r: RunResult) => number): number[] =>
    large.runs.map((runs, i) => {
      const ok = (rs: RunResult[] | undefined) => (rs ?? []).filter((r) => r.ok).map(f);
      return (median(ok(runs)) - median(ok(small.runs[i]))) / dn / 1024;
    });
  const span = `N=${small.scenario.count} → ${large.scenario.count}`;
  return [
    {
      figure: `RSS at rest per VA + PV pair (KiB), ${span}`,
      digits: 2,
      values: slope((r) => r.restRssBytes),
    },
    {
      figure: `RSS after start per PV (KiB), ${span}`,
      digits: 2,
      values: slope((r) => r.startupRssBytes),
    },
    {
      figure: `peak RSS per VA + PV pair (KiB), ${span}`,
      digits: 2,
      values: slope((r) => r.peakRssBytes),
    },
  ];
}
