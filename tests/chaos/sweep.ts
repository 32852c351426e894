/**
 * Totals of many chaos schedules, and the report of one violation.
 *
 * @module
 */

import type { InherentWindow, ScheduleResult, Violation } from "./simulation.ts";

/** What a sweep ran and found. */
export interface SweepSummary {
  schedules: number;
  steps: number;
  chaosSteps: number;
  quiesceSteps: number;
  /** The most steps one schedule needed to converge once faults stopped. */
  longestQuiesce: number;
  converged: number;
  /** Faults and user actions by kind, summed. */
  counts: Record<string, number>;
  violations: Violation[];
  /** Schedules that stopped at a window the Go attacher has too (not violations). */
  inherent: InherentWindow[];
}

/** Adds up the results of a sweep. */
export function summarize(results: readonly ScheduleResult[]): SweepSummary {
  const counts = new Map<string, number>();
  const summary: SweepSummary = {
    schedules: results.length,
    steps: 0,
    chaosSteps: 0,
    quiesceSteps: 0,
    longestQuiesce: 0,
    converged: 0,
    counts: {},
    violations: [],
    inherent: [],
  };
  for (const r of results) {
    summary.steps += r.steps;
    summary.chaosSteps += r.chaosSteps;
    summary.quiesceSteps += r.quiesceSteps;
    if (r.converged) {
      summary.converged++;
      summary.longestQuiesce = Math.max(summary.longestQuiesce, r.quiesceSteps);
    }
    for (const [kind, n] of Object.entries(r.counts)) counts.set(kind, (counts.get(kind) ?? 0) + n);
    summary.violations.push(...r.violations);
    summary.inherent.push(...r.inherent);
  }
  summary.counts = Object.fromEntries([...counts.entries()].sort(([a], [b]) => a < b ? -1 : 1));
  return summary;
}

/** A violation as printed: invariant, seed, step, and the trace before it. */
export function formatViolation(v: Violation): string {
  return [
    `VIOLATION of invariant ${v.invariant} at step ${v.step} (seed ${v.seed}; replay with ` +
    `\`deno task chaos -- ${v.replay}\`): ${v.message}`,
    "recent steps:",
    ...v.recent.map((line) => `  ${line}`),
  ].join("\n");
}
