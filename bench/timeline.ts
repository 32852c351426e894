/**
 * The timeline of one run, built from the API server's change events of the run's
 * VolumeAttachments: when each was created, attached, marked for deletion and removed.
 *
 * Fed by the in-memory server's synchronous change callback (fake environment) or by a watch
 * (cluster environment); either way the times are when the API server's view changed, not when the
 * attacher thought it was done.
 *
 * @module
 */

import { preciseWallNow } from "../lib/clock.ts";
import type { VolumeAttachment } from "../lib/kube/types.ts";
import { CANARY, type FixtureSpec, FLOOD_PROBE, indexOfVa } from "./fixtures.ts";
import type { PodTimelineReport } from "./pod_timeline.ts";
import { type LatencySummary, summarize } from "./stats.ts";

/** Answer of a wait on the timeline. */
export interface WaitAnswer {
  /** True when the condition holds; false at the timeout. */
  done: boolean;
  /** How many measured VAs are attached (`attached`), gone (`gone`), or 0/1 (`canary`). */
  count: number;
  /** The epoch ms at which the condition became true (the last object's event), or NaN. */
  at: number;
}

/**
 * What a run can wait for: the canary attached, all measured VAs attached, all gone, or the
 * detach flood's probe attached.
 */
export type WaitTarget = "canary" | "attached" | "gone" | "flood";

/** Phase times and per-object latencies. Times are epoch ms; NaN when it did not happen. */
export interface TimelineReport {
  canaryCreatedAt: number;
  canaryAttachedAt: number;
  /** When the detach flood's probe VA was created, and attached. */
  floodCreatedAt: number;
  floodAttachedAt: number;
  /** When the benchmark started creating the measured VAs. */
  attachStartedAt: number;
  /** When the last measured VA was created. */
  attachCreatedAt: number;
  lastAttachedAt: number;
  /** When the benchmark started deleting them. */
  detachStartedAt: number;
  /** When the last one was marked for deletion. */
  detachIssuedAt: number;
  lastGoneAt: number;
  attached: number;
  gone: number;
  /** create → `status.attached: true`, milliseconds. */
  attachLatencyMs: LatencySummary;
  /** deletion requested → removed from storage, milliseconds. */
  detachLatencyMs: LatencySummary;
  /** `--pods`: Pod created → volume in its Node's `status.volumesAttached`, and back. */
  pods?: PodTimelineReport;
  /** How many measured VAs were attached (and not yet gone) over time, for the pictures. */
  attachedSeries: AttachedSeries;
  /**
   * When a tenth and when nine tenths of the measured VAs were first attached (epoch ms; NaN
   * until they were): the attacher's pace once the burst's creation is behind it (see
   * {@link attachPace}).
   */
  attachPace: AttachPace;
}

/** See {@link TimelineReport.attachPace}. */
export interface AttachPace {
  /** Attaches counted between the two times. */
  attaches: number;
  tenthAt: number;
  ninetiethAt: number;
}

/** Counts at `startAt + i * stepMs` (epoch ms) for each `i` of `counts`. */
export interface AttachedSeries {
  startAt: number;
  stepMs: number;
  counts: number[];
}

/** At most this many points in an {@link AttachedSeries}. */
export const SERIES_POINTS = 400;

/**
 * The number of objects attached and not gone at evenly spaced times from `startAt` to `endAt`:
 * `attachedAt[i]` and `goneAt[i]` are one object's times (NaN: it never was).
 */
export function attachedSeries(
  attachedAt: Float64Array,
  goneAt: Float64Array,
  startAt: number,
  endAt: number,
): AttachedSeries {
  if (!Number.isFinite(startAt) || !(endAt > startAt)) return { startAt, stepMs: 0, counts: [] };
  const ups = attachedAt.filter(Number.isFinite).sort();
  const downs = goneAt.filter((t, i) => Number.isFinite(t) && Number.isFinite(attachedAt[i]!))
    .sort();
  const stepMs = Math.max(100, Math.ceil((endAt - startAt) / (SERIES_POINTS - 1)));
  const counts: number[] = [];
  let up = 0;
  let down = 0;
  for (let t = startAt; t < endAt + stepMs; t += stepMs) {
    while (up < ups.length && ups[up]! <= t) up++;
    while (down < downs.length && downs[down]! <= t) down++;
    counts.push(up - down);
  }
  return { startAt, stepMs, counts };
}

/**
 * When the `ceil(n / 10)`-th and the `ceil(9n / 10)`-th of `n` objects were attached
 * (`attachedAt[i]`, NaN: never): NaN when fewer were. Between the two, the pace is the attacher's
 * own; before the first, every attacher waits alike for the API server to create the burst and
 * stream it to its watch.
 */
export function attachPace(attachedAt: Float64Array, n: number): AttachPace {
  const ups = attachedAt.filter(Number.isFinite).sort();
  const first = Math.ceil(n / 10);
  const last = Math.ceil((9 * n) / 10);
  return {
    attaches: last - first,
    tenthAt: first >= 1 && first <= ups.length ? ups[first - 1]! : NaN,
    ninetiethAt: last >= 1 && last <= ups.length ? ups[last - 1]! : NaN,
  };
}

/**
 * Epoch milliseconds with sub-millisecond resolution, on the wall clock the attachers' log lines
 * and the API server's times are on: after a step of the system clock (seen here: about 15 s in the
 * middle of a takeover run) `performance.timeOrigin + performance.now()` stays on the old time
 * and every log time read against it is off by the step.
 */
export function nowMs(): number {
  return preciseWallNow();
}

/** Change types as watches and the in-memory server name them. */
export type ChangeKind = "ADDED" | "MODIFIED" | "DELETED";

/** The state of one run. The constructor does no I/O. */
export class Timeline {
  readonly #spec: FixtureSpec;
  readonly #now: () => number;
  readonly #indexOf: (name: string) => number | undefined;
  #canaryCreatedAt = NaN;
  #canaryAttachedAt = NaN;
  #floodCreatedAt = NaN;
  #floodAttachedAt = NaN;
  #attachStartedAt = NaN;
  #detachStartedAt = NaN;
  #lastAttachedAt = NaN;
  #lastGoneAt = NaN;
  readonly #createdAt: Float64Array;
  readonly #attachedAt: Float64Array;
  readonly #deletedAt: Float64Array;
  readonly #goneAt: Float64Array;
  #created = 0;
  #deleted = 0;
  #attached = 0;
  #gone = 0;
  #waiters: { check: () => boolean }[] = [];

  /**
   * `now` defaults to {@link nowMs}; `indexOf` maps a VolumeAttachment's name to its index
   * ({@link indexOfVa} by default; the attach/detach controller names its VAs itself).
   */
  constructor(
    deps: { now?: () => number },
    options: { spec: FixtureSpec; indexOf?: (name: string) => number | undefined },
  ) {
    this.#spec = options.spec;
    this.#now = deps.now ?? nowMs;
    this.#indexOf = options.indexOf ?? ((name) => indexOfVa(options.spec, name));
    const n = options.spec.count;
    this.#createdAt = new Float64Array(n).fill(NaN);
    this.#attachedAt = new Float64Array(n).fill(NaN);
    this.#deletedAt = new Float64Array(n).fill(NaN);
    this.#goneAt = new Float64Array(n).fill(NaN);
  }

  /** Marks the start of the attach phase (before the first create). */
  attachStarted(): void {
    this.#attachStartedAt = this.#now();
  }

  /** Marks the start of the detach phase (before the first delete). */
  detachStarted(): void {
    this.#detachStartedAt = this.#now();
  }

  /** How many measured VAs are attached. */
  get attached(): number {
    return this.#attached;
  }

  /** How many measured VAs are gone. */
  get gone(): number {
    return this.#gone;
  }

  /**
   * Records a change of a VolumeAttachment; other objects are ignored. The first sighting of a VA
   * is its creation, the first with `deletionTimestamp` its deletion, the first with
   * `status.attached` its attach and DELETED its removal; later repeats change nothing.
   */
  observe(type: ChangeKind, va: VolumeAttachment): void {
    const index = this.#indexOf(va.metadata.name);
    if (index === undefined) return;
    const now = this.#now();
    if (index === CANARY) {
      if (Number.isNaN(this.#canaryCreatedAt)) this.#canaryCreatedAt = now;
      if (va.status?.attached === true && Number.isNaN(this.#canaryAttachedAt)) {
        this.#canaryAttachedAt = now;
      }
      this.#notify();
      return;
    }
    if (index === FLOOD_PROBE) {
      if (Number.isNaN(this.#floodCreatedAt)) this.#floodCreatedAt = now;
      if (va.status?.attached === true && Number.isNaN(this.#floodAttachedAt)) {
        this.#floodAttachedAt = now;
      }
      this.#notify();
      return;
    }
    const first = (times: Float64Array) => {
      if (!Number.isNaN(times[index] as number)) return false;
      times[index] = now;
      return true;
    };
    if (first(this.#createdAt)) this.#created++;
    if (va.metadata.deletionTimestamp !== undefined && first(this.#deletedAt)) this.#deleted++;
    if (type === "DELETED") {
      if (first(this.#deletedAt)) this.#deleted++;
      if (first(this.#goneAt) && ++this.#gone === this.#spec.count) this.#lastGoneAt = now;
    } else if (va.status?.attached === true && first(this.#attachedAt)) {
      if (++this.#attached === this.#spec.count) this.#lastAttachedAt = now;
    }
    this.#notify();
  }

  /** Whether `target` is reached, how far it is, and when it was reached. */
  state(target: WaitTarget): WaitAnswer {
    switch (target) {
      case "canary": {
        const done = Number.isFinite(this.#canaryAttachedAt);
        return { done, count: done ? 1 : 0, at: this.#canaryAttachedAt };
      }
      case "attached":
        return {
          done: this.#attached === this.#spec.count,
          count: this.#attached,
          at: this.#lastAttachedAt,
        };
      case "gone":
        return { done: this.#gone === this.#spec.count, count: this.#gone, at: this.#lastGoneAt };
      case "flood": {
        const done = Number.isFinite(this.#floodAttachedAt);
        return { done, count: done ? 1 : 0, at: this.#floodAttachedAt };
      }
    }
  }

  /** Resolves when `target` is reached or after `timeoutMs` (`done` false). */
  wait(target: WaitTarget, timeoutMs: number): Promise<WaitAnswer> {
    if (this.state(target).done) return Promise.resolve(this.state(target));
    return new Promise((resolve) => {
      const waiter = {
        check: () => {
          if (!this.state(target).done) return false;
          clearTimeout(timer);
          resolve(this.state(target));
          return true;
        },
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        resolve(this.state(target));
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  /** Wakes every waiter with `done` false as it stands (for shutdown). */
  cancelWaits(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w.check();
  }

  /** The phase times and latency summaries so far. */
  report(): TimelineReport {
    const attach: number[] = [];
    const detach: number[] = [];
    let lastCreated = NaN;
    let lastDeleted = NaN;
    for (let i = 0; i < this.#spec.count; i++) {
      const created = this.#createdAt[i] as number;
      const deleted = this.#deletedAt[i] as number;
      const a = (this.#attachedAt[i] as number) - created;
      const d = (this.#goneAt[i] as number) - deleted;
      if (Number.isFinite(a)) attach.push(a);
      if (Number.isFinite(d)) detach.push(d);
      if (created > lastCreated || Number.isNaN(lastCreated)) lastCreated = created;
      if (deleted > lastDeleted || Number.isNaN(lastDeleted)) lastDeleted = deleted;
    }
    return {
      canaryCreatedAt: this.#canaryCreatedAt,
      canaryAttachedAt: this.#canaryAttachedAt,
      floodCreatedAt: this.#floodCreatedAt,
      floodAttachedAt: this.#floodAttachedAt,
      attachStartedAt: this.#attachStartedAt,
      attachCreatedAt: this.#created === this.#spec.count ? lastCreated : NaN,
      lastAttachedAt: this.#lastAttachedAt,
      detachStartedAt: this.#detachStartedAt,
      detachIssuedAt: this.#deleted === this.#spec.count ? lastDeleted : NaN,
      lastGoneAt: this.#lastGoneAt,
      attached: this.#attached,
      gone: this.#gone,
      attachLatencyMs: summarize(attach),
      detachLatencyMs: summarize(detach),
      attachedSeries: attachedSeries(
        this.#attachedAt,
        this.#goneAt,
        this.#attachStartedAt,
        Number.isFinite(this.#lastGoneAt) ? this.#lastGoneAt : this.#now(),
      ),
      attachPace: attachPace(this.#attachedAt, this.#spec.count),
    };
  }

  #notify(): void {
    if (this.#waiters.length === 0) return;
    this.#waiters = this.#waiters.filter((w) => !w.check());
  }
}
