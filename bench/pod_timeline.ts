/**
 * What a user waits for in the `--pods` benchmark: from a Pod's creation until its volume is
 * listed in its Node's `status.volumesAttached` (written by kube-controller-manager's attach/detach
 * controller once the VolumeAttachment is attached), and from the Pod's deletion until the volume
 * leaves that list again. Fed with the benchmark's own create and delete times and with the Nodes'
 * lists as a watch sees them.
 *
 * @module
 */

import { type LatencySummary, summarize } from "./stats.ts";
import { nowMs } from "./timeline.ts";

/** Phase times (epoch ms, NaN when not reached) and per-Pod latencies (ms). */
export interface PodTimelineReport {
  /** When the first measured Pod was created (just before its request). */
  createStartedAt: number;
  /** When the last measured volume appeared in its Node's list. */
  lastAttachedAt: number;
  /** When the first measured Pod was deleted (just before its request). */
  deleteStartedAt: number;
  /** When the last measured volume left its Node's list. */
  lastDetachedAt: number;
  attached: number;
  detached: number;
  /** Pod created → volume in `status.volumesAttached`. */
  attachLatencyMs: LatencySummary;
  /** Pod deleted → volume out of `status.volumesAttached`. */
  detachLatencyMs: LatencySummary;
}

/** Per-Pod times of one run. The constructor does no I/O. */
export class PodTimeline {
  readonly #count: number;
  readonly #indexOf: (volumeName: string) => number | undefined;
  readonly #now: () => number;
  readonly #createdAt: Float64Array;
  readonly #attachedAt: Float64Array;
  readonly #deletedAt: Float64Array;
  readonly #detachedAt: Float64Array;
  /** The measured indexes each Node lists now. */
  readonly #listed = new Map<string, Set<number>>();
  #attached = 0;
  #detached = 0;
  #lastAttachedAt = NaN;
  #lastDetachedAt = NaN;

  /**
   * `indexOf` maps a name of `status.volumesAttached` to the measured index (0 … count-1) of its
   * Pod, or undefined for volumes not measured. `now` defaults to {@link nowMs}.
   */
  constructor(
    deps: { now?: () => number },
    options: { count: number; indexOf: (volumeName: string) => number | undefined },
  ) {
    this.#count = options.count;
    this.#indexOf = options.indexOf;
    this.#now = deps.now ?? nowMs;
    this.#createdAt = new Float64Array(options.count).fill(NaN);
    this.#attachedAt = new Float64Array(options.count).fill(NaN);
    this.#deletedAt = new Float64Array(options.count).fill(NaN);
    this.#detachedAt = new Float64Array(options.count).fill(NaN);
  }

  /** The Pod of `index` is about to be created. */
  podCreating(index: number): void {
    if (Number.isNaN(this.#createdAt[index] as number)) this.#createdAt[index] = this.#now();
  }

  /** The Pod of `index` is about to be deleted. */
  podDeleting(index: number): void {
    if (Number.isNaN(this.#deletedAt[index] as number)) this.#deletedAt[index] = this.#now();
  }

  /**
   * Records a Node's `status.volumesAttached` names (`undefined` or empty: none; a deleted Node
   * lists none). A measured volume counts as attached the first time its Node lists it after its
   * Pod was created, and as detached the first time it is missing after its Pod was deleted.
   */
  observeNode(node: string, names: readonly string[] | undefined): void {
    const now = this.#now();
    const listed = new Set<number>();
    for (const name of names ?? []) {
      const index = this.#indexOf(name);
      if (index !== undefined && index >= 0 && index < this.#count) listed.add(index);
    }
    for (const index of listed) {
      if (
        Number.isFinite(this.#createdAt[index] as number) &&
        Number.isNaN(this.#attachedAt[index] as number)
      ) {
        this.#attachedAt[index] = now;
        if (++this.#attached === this.#count) this.#lastAttachedAt = now;
      }
    }
    for (const index of this.#listed.get(node) ?? []) {
      if (listed.has(index)) continue;
      if (
        Number.isFinite(this.#deletedAt[index] as number) &&
        Number.isFinite(this.#attachedAt[index] as number) &&
        Number.isNaN(this.#detachedAt[index] as number)
      ) {
        this.#detachedAt[index] = now;
        if (++this.#detached === this.#count) this.#lastDetachedAt = now;
      }
    }
    this.#listed.set(node, listed);
  }

  /** Whether every measured volume is listed (`attached`) or gone again (`gone`), and when. */
  state(target: "attached" | "gone"): { done: boolean; count: number; at: number } {
    return target === "attached"
      ? { done: this.#attached === this.#count, count: this.#attached, at: this.#lastAttachedAt }
      : { done: this.#detached === this.#count, count: this.#detached, at: this.#lastDetachedAt };
  }

  /** The phase times and latency summaries so far. */
  report(): PodTimelineReport {
    const attach: number[] = [];
    const detach: number[] = [];
    let createStartedAt = NaN;
    let deleteStartedAt = NaN;
    for (let i = 0; i < this.#count; i++) {
      const created = this.#createdAt[i] as number;
      const deleted = this.#deletedAt[i] as number;
      const a = (this.#attachedAt[i] as number) - created;
      const d = (this.#detachedAt[i] as number) - deleted;
      if (Number.isFinite(a)) attach.push(a);
      if (Number.isFinite(d)) detach.push(d);
      if (Number.isFinite(created) && !(created >= createStartedAt)) createStartedAt = created;
      if (Number.isFinite(deleted) && !(deleted >= deleteStartedAt)) deleteStartedAt = deleted;
    }
    return {
      createStartedAt,
      lastAttachedAt: this.#lastAttachedAt,
      deleteStartedAt,
      lastDetachedAt: this.#lastDetachedAt,
      attached: this.#attached,
      detached: this.#detached,
      attachLatencyMs: summarize(attach),
      detachLatencyMs: summarize(detach),
    };
  }
}
