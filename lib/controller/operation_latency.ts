/**
 * End-to-end attach and detach latency, as a Pod waits for it (beyond the Go attacher, whose
 * `csi_sidecar_operations_seconds` times one gRPC call; asked in
 * https://github.com/kubernetes-csi/external-attacher/issues/291):
 *
 * - attach: from the VA's `creationTimestamp`, or the time this attacher first saw the VA if
 *   that is later (e.g. it was created while no attacher ran), to our `attached: true` write;
 * - detach: from the VA's `deletionTimestamp`, or the time we first saw it deleted if later, to
 *   the removal of our finalizer.
 *
 * The API timestamps are wall-clock times of the API server (whole seconds), so they are only
 * compared with the wall clock at the moment we first see the VA; everything after that is
 * measured on the monotonic clock.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import type { VolumeAttachment } from "../kube/types.ts";

/** Where the durations go (the attacher's histograms). */
export interface OperationLatencySink {
  observeAttachDuration(seconds: number): void;
  observeDetachDuration(seconds: number): void;
}

/** Dependencies of {@link OperationLatency}. */
export interface OperationLatencyDeps {
  /**
   * The clock: durations on its monotonic `now()`, API timestamps compared with its `wallNow()`.
   */
  clock: Clock;
  sink: OperationLatencySink;
}

/**
 * Detaches kept after their VA's delete event, for the answer to our finalizer removal that may
 * come after that event (the watch and the PATCH travel on different streams). Bounded: a VA that
 * someone else let go leaves an entry that the newer ones push out.
 */
const GONE_DETACHES_KEPT = 64;

/** When an operation's wait started: an API timestamp or our first sight, whichever is later. */
interface Start {
  /** Monotonic ms of our first sight. */
  seenAt: number;
  /** How much later than our first sight the API timestamp is, ms (0 when it is earlier). */
  timestampAfterSeenMs: number;
}

/**
 * Tracks, per VolumeAttachment (by uid), when its attach and its detach started, and records the
 * duration when the attacher finishes them. Each operation is recorded at most once per VA.
 */
export class OperationLatency {
  #clock: Clock;
  #wallNow: () => number;
  #sink: OperationLatencySink;
  /** Attaches under way, by VA uid. */
  #attaches = new Map<string, Start>();
  /** Detaches under way, by VA uid. */
  #detaches = new Map<string, Start>();
  /** Detaches whose VA is gone, oldest first; see {@link GONE_DETACHES_KEPT}. */
  #goneDetaches = new Map<string, Start>();

  constructor(deps: OperationLatencyDeps) {
    this.#clock = deps.clock;
    this.#wallNow = () => deps.clock.wallNow();
    this.#sink = deps.sink;
  }

  /** Notes a VA seen in an informer event: starts timing an attach or a detach it waits for. */
  seen(va: VolumeAttachment): void {
    const uid = va.metadata.uid;
    if (!uid) return;
    if (va.metadata.deletionTimestamp) {
      this.#attaches.delete(uid);
      if (!this.#detaches.has(uid)) {
        this.#detaches.set(uid, this.#start(va.metadata.deletionTimestamp));
      }
      return;
    }
    if (va.status?.attached || this.#attaches.has(uid)) return;
    this.#attaches.set(uid, this.#start(va.metadata.creationTimestamp));
  }

  /** Records the attach of `va` as finished (our `attached: true` write succeeded). */
  attached(va: VolumeAttachment): void {
    const uid = va.metadata.uid;
    const start = uid ? this.#attaches.get(uid) : undefined;
    if (start === undefined) return;
    this.#attaches.delete(uid!);
    this.#sink.observeAttachDuration(this.#seconds(start));
  }

  /** Records the detach of `va` as finished (our finalizer is removed). */
  detached(va: VolumeAttachment): void {
    const uid = va.metadata.uid;
    if (!uid) return;
    const start = this.#detaches.get(uid) ?? this.#goneDetaches.get(uid);
    if (start === undefined) return;
    this.#detaches.delete(uid);
    this.#goneDetaches.delete(uid);
    this.#sink.observeDetachDuration(this.#seconds(start));
  }

  /**
   * Forgets a VA that is gone. A detach under way is kept a little longer (bounded): the delete
   * event can arrive before the answer to the finalizer removal that let the VA go, and
   * {@link detached} then still records it.
   */
  forget(va: VolumeAttachment): void {
    const uid = va.metadata.uid;
    if (!uid) return;
    this.#attaches.delete(uid);
    const detach = this.#detaches.get(uid);
    if (detach === undefined) return;
    this.#detaches.delete(uid);
    this.#goneDetaches.set(uid, detach);
    if (this.#goneDetaches.size > GONE_DETACHES_KEPT) {
      const oldest = this.#goneDetaches.keys().next().value;
      if (oldest !== undefined) this.#goneDetaches.delete(oldest);
    }
  }

  /** Number of operations being timed, gone VAs' detaches not counted (for tests). */
  get size(): number {
    return this.#attaches.size + this.#detaches.size;
  }

  #start(timestamp: string | undefined): Start {
    const parsed = timestamp === undefined ? NaN : Date.parse(timestamp);
    const after = Number.isFinite(parsed) ? parsed - this.#wallNow() : 0;
    return { seenAt: this.#clock.now(), timestampAfterSeenMs: Math.max(0, after) };
  }

  #seconds(start: Start): number {
    return Math.max(0, this.#clock.now() - start.seenAt - start.timestampAfterSeenMs) / 1000;
  }
}
