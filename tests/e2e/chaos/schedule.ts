/**
 * The fault schedule of a cluster chaos run, drawn from its seed: when each fault happens, of
 * which kind, against which replica and for how long. The same seed and length give the same
 * schedule; what the real processes do in between is not replayable to the millisecond.
 *
 * @module
 */

import { Prng } from "../../chaos/prng.ts";

/**
 * The kinds of fault. Of a replica: `pause` (SIGSTOP, then SIGCONT), `kill` (SIGKILL),
 * `partition` (its fault proxy holds every byte both ways, as a network partition does, until it
 * heals), `reset` (its proxy resets its connections and refuses new ones for a while),
 * `half-open` (its open connections go silent for good, new ones work), `pause-in-publish` (the
 * leader paused past its lease while a ControllerPublishVolume it sent is still running at a slow
 * driver). Of the servers: `apiserver-restart`, `slow-apiserver` (every answer to every replica
 * late by `delayMs`), `etcd-restart`, `driver-restart`, `driver-hang` (acting calls held until the
 * fault ends or their deadline), `driver-fail` (acting calls answered `code`).
 */
export type FaultKind =
  | "pause"
  | "kill"
  | "partition"
  | "reset"
  | "half-open"
  | "pause-in-publish"
  | "apiserver-restart"
  | "slow-apiserver"
  | "etcd-restart"
  | "driver-restart"
  | "driver-hang"
  | "driver-fail";

/** Every {@link FaultKind}, in the order the report lists them. */
export const FAULT_KINDS: readonly FaultKind[] = [
  "pause",
  "kill",
  "partition",
  "reset",
  "half-open",
  "pause-in-publish",
  "apiserver-restart",
  "slow-apiserver",
  "etcd-restart",
  "driver-restart",
  "driver-hang",
  "driver-fail",
];

/** The kinds aimed at one replica (the rest hit a server every replica shares). */
export const REPLICA_KINDS: ReadonlySet<FaultKind> = new Set([
  "pause",
  "kill",
  "partition",
  "reset",
  "half-open",
]);

/** The gRPC codes a `driver-fail` answers with, as drivers answer when a backend struggles. */
export const DRIVER_FAIL_CODES = ["Unavailable", "Internal", "Aborted", "ResourceExhausted"];

/** Whom a replica fault hits: the Lease holder when it fires, or a fixed replica. */
export type FaultTarget = "leader" | number;

/** One fault. */
export interface Fault {
  /** ms after the start of the fault phase. */
  at: number;
  kind: FaultKind;
  /** For the {@link REPLICA_KINDS}. */
  target?: FaultTarget;
  /**
   * How long a replica stays stopped (pauses), cut off (partition, reset) or a server down
   * (restarts) or faulty (slow-apiserver, driver-hang, driver-fail), ms; 0 for kill and half-open.
   */
  durationMs: number;
  /** `slow-apiserver`: the delay of each answer; `pause-in-publish`: the driver's delay, ms. */
  delayMs?: number;
  /** `driver-fail`: the gRPC code name. */
  code?: string;
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
/** Down time of kube-apiserver and etcd (on top of their own stop and start) and of the driver. */
const APISERVER_DOWN_MAX_MS = 3_000;
const ETCD_DOWN_MAX_MS = 3_000;
const DRIVER_DOWN_MAX_MS = 2_000;
/** A partition lasts 2-15 s (the lease is 6 s: long ones take it away), a reset 0.5-5 s. */
export const PARTITION_MIN_MS = 2_000;
export const PARTITION_MAX_MS = 15_000;
const RESET_MAX_MS = 5_000;
/** A slow API server: 5-20 s of answers 0.5-5 s late. */
export const SLOW_MIN_DELAY_MS = 500;
export const SLOW_MAX_DELAY_MS = 5_000;
const SLOW_MAX_MS = 20_000;
/** A hanging or failing driver: 2-10 s. */
const DRIVER_FAULT_MAX_MS = 10_000;
/**
 * A pause in a publish: the driver serves ControllerPublishVolume 4-10 s late; the leader is paused
 * 8-15 s, longer than its 6 s lease, so another replica takes over while the call runs.
 */
export const IN_PUBLISH_PAUSE_MIN_MS = 8_000;
const IN_PUBLISH_PAUSE_MAX_MS = 15_000;
const IN_PUBLISH_DELAY_MIN_MS = 4_000;
const IN_PUBLISH_DELAY_MAX_MS = 10_000;
/** Nothing starts in the last seconds of the phase: the drain follows. */
const QUIET_END_MS = 5_000;

const WEIGHTS: readonly (readonly [FaultKind, number])[] = [
  ["pause", 5],
  ["kill", 2],
  ["partition", 2],
  ["reset", 1],
  ["half-open", 1],
  ["pause-in-publish", 1.5],
  ["apiserver-restart", 1.5],
  ["slow-apiserver", 1.5],
  ["etcd-restart", 1],
  ["driver-restart", 1.5],
  ["driver-hang", 1.5],
  ["driver-fail", 1.5],
];

/**
 * The schedule for `seed`: faults at exponential gaps, kinds by weight (pauses most often),
 * with each kind at least once when the phase holds as many faults as there are kinds (the first
 * ones are one of each, in an order drawn from the seed). A replica fault hits the leader with
 * probability 0.6.
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
    if (REPLICA_KINDS.has(kind)) {
      fault.target = prng.chance(0.6) ? "leader" : prng.int(options.replicas);
    }
    switch (kind) {
      case "pause":
        fault.durationMs = prng.between(PAUSE_MIN_MS, PAUSE_MAX_MS);
        break;
      case "partition":
        fault.durationMs = prng.between(PARTITION_MIN_MS, PARTITION_MAX_MS);
        break;
      case "reset":
        fault.durationMs = prng.between(500, RESET_MAX_MS);
        break;
      case "pause-in-publish":
        fault.durationMs = prng.between(IN_PUBLISH_PAUSE_MIN_MS, IN_PUBLISH_PAUSE_MAX_MS);
        fault.delayMs = prng.between(IN_PUBLISH_DELAY_MIN_MS, IN_PUBLISH_DELAY_MAX_MS);
        break;
      case "apiserver-restart":
        fault.durationMs = prng.between(0, APISERVER_DOWN_MAX_MS);
        break;
      case "slow-apiserver":
        fault.durationMs = prng.between(5_000, SLOW_MAX_MS);
        fault.delayMs = prng.between(SLOW_MIN_DELAY_MS, SLOW_MAX_DELAY_MS);
        break;
      case "etcd-restart":
        fault.durationMs = prng.between(0, ETCD_DOWN_MAX_MS);
        break;
      case "driver-restart":
        fault.durationMs = prng.between(0, DRIVER_DOWN_MAX_MS);
        break;
      case "driver-hang":
        fault.durationMs = prng.between(2_000, DRIVER_FAULT_MAX_MS);
        break;
      case "driver-fail":
        fault.durationMs = prng.between(2_000, DRIVER_FAULT_MAX_MS);
        fault.code = prng.pick(DRIVER_FAIL_CODES);
        break;
      case "kill":
      case "half-open":
        break;
    }
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
  let length: string;
  switch (fault.kind) {
    case "kill":
    case "half-open":
      length = "";
      break;
    case "pause":
    case "partition":
    case "reset":
    case "driver-hang":
      length = ` ${s(fault.durationMs)}`;
      break;
    case "pause-in-publish":
      length = ` ${s(fault.durationMs)}, publish ${s(fault.delayMs ?? 0)} late`;
      break;
    case "slow-apiserver":
      length = ` ${s(fault.durationMs)}, answers ${s(fault.delayMs ?? 0)} late`;
      break;
    case "driver-fail":
      length = ` ${s(fault.durationMs)} with ${fault.code}`;
      break;
    default:
      length = ` down ${s(fault.durationMs)}`;
  }
  return `+${s(fault.at)} ${fault.kind}${target}${length}`;
}

/** How many faults of each kind. */
export function countKinds(faults: readonly { kind: FaultKind }[]): Record<FaultKind, number> {
  const out = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  for (const f of faults) out[f.kind]++;
  return out;
}
