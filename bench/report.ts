/**
 * Turning runs into figures: the medians per attacher and scenario, and the text table.
 *
 * @module
 */

import type { RunResult, Scenario } from "./run.ts";
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
  add("RSS after start (MiB)", 1, (r) => r.startupRssBytes / MIB);
  add("RSS at rest, all attached (MiB)", 1, (r) => r.restRssBytes / MIB);
  add("peak RSS (MiB)", 1, (r) => r.peakRssBytes / MIB);
  add(
    "API server CPU s, attach phase",
    2,
    (r) => r.phases.attach?.helperCpuSeconds.apiServer ?? NaN,
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
