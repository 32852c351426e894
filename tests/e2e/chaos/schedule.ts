/**
 * The fault schedule of a cluster chaos run, drawn from its seed: when each fault happens, of
 * which kind, against which replica and for how long. The same seed and length give the same
 * schedule; what the real processes do in between is not replayable to the millisecond.
 *
 * @module
 */

import { Prng } from "../../chaos/prng.ts";

/** The kinds of fault. */
export type FaultKind = "pause" | "kill" | "apiserver-restart" | "driver-restart";

/** Every {@link FaultKind}, in the order the report lists them. */
export const FAULT_KINDS: readonly FaultKind[] = [
  "pause",
  "kill",
  "apiserver-restart",
  "driver-restart",
];

/** Whom a replica fault hits: the Lease holder when it fires, or a fixed replica. */
export type FaultTarget = "leader" | number;

/** One fault. */
export interface Fault {
  /** ms after the start of the fault phase. */
  at: number;
  kind: FaultKind;
  /** For `pause` and `kill`. */
  target?: FaultTarget;
  /** How long a replica stays stopped (pause) or a server stays down (restarts), ms. */
  durationMs: number;
}

/** What a schedule is drawn for. */
export interface ScheduleOptions {
  /** Length of the fault phase, ms. */
  phaseMs: number;
  /** Number of attacher replicas. */
  replicas: number;
  /** Mean time between two faults, ms (exponential gaps, at least 1 s). */
  meanGapMs?: number;
}

/** Pause lengths: 1-20 s. */
export const PAUSE_MIN_MS = 1_000;
export const PAUSE_MAX_MS = 20_000;
/** Down time of kube-apiserver (on top of its own stop and start) and of the driver. */
const APISERVER_DOWN_MAX_MS = 3_000;
const DRIVER_DOWN_MAX_MS = 2_000;
/** Nothing starts in the last seconds of the phase: the drain follows. */
const QUIET_END_MS = 5_000;

const WEIGHTS: readonly (readonly [FaultKind, number])[] = [
  ["pause", 5],
  ["kill", 2],
  ["apiserver-restart", 1.5],
  ["driver-restart", 1.5],
];

/**
 * The schedule for `seed`: faults at exponential gaps, kinds by weight (pauses most often),
 * with each kind at least once when the phase holds four faults (the first four are one of each,
 * in an order drawn from the seed). A replica fault hits the leader with probability 0.6.
 *
 * @throws {RangeError} for a non-integer seed or a phase shorter than 10 s.
 */
export function drawSchedule(seed: number, options: ScheduleOptions): Fault[] {
  if (options.phaseMs < 10_000) throw new RangeError("Cannot draw a fault phase under 10 s");
  const prng = new Prng(seed);
  const meanGap = options.meanGapMs ?? 8_000;
  const firsts = [...FAULT_KINDS];
  for (let i = firsts.length - 1; i > 0; i--) {
    const j = prng.int(i + 1);
    [firsts[i], firsts[j]] = [firsts[j]!, firsts[i]!];
  }
  const out: Fault[] = [];
  let at = 0;
  for (;;) {
    at += Math.max(1_000, Math.round(-Math.log(1 - prng.next()) * meanGap));
    if (at > options.phaseMs - QUIET_END_MS) break;
    const kind = firsts.shift() ?? prng.weighted(WEIGHTS);
    const fault: Fault = { at, kind, durationMs: 0 };
    if (kind === "pause" || kind === "kill") {
      fault.target = prng.chance(0.6) ? "leader" : prng.int(options.replicas);
    }
    if (kind === "pause") fault.durationMs = prng.between(PAUSE_MIN_MS, PAUSE_MAX_MS);
    if (kind === "apiserver-restart") fault.durationMs = prng.between(0, APISERVER_DOWN_MAX_MS);
    if (kind === "driver-restart") fault.durationMs = prng.between(0, DRIVER_DOWN_MAX_MS);
    out.push(fault);
  }
  return out;
}

/** One line for the report, e.g. `+12.3 s pause leader 14.2 s`. */
export function describeFault(fault: Fault): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const target = fault.target === undefined
    ? ""
    : ` ${fault.target === "leader" ? "leader" : `replica ${fault.target}`}`;
  const length = fault.kind === "kill"
    ? ""
    : fault.kind === "pause"
    ? ` ${s(fault.durationMs)}`
    : ` down ${s(fault.durationMs)}`;
  return `+${s(fault.at)} ${fault.kind}${target}${length}`;
}

/** How many faults of each kind. */
export function countKinds(faults: readonly { kind: FaultKind }[]): Record<FaultKind, number> {
  const out = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  for (const f of faults) out[f.kind]++;
  return out;
}
