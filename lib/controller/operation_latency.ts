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
  /** The uid of the VA it was started for: a VA re-created under the same name starts anew. */
  uid: string;
  /** Monotonic ms of our first sight. */
  seenAt: number;
  /** How much later than our first sight the API timestamp is, ms (0 when it is earlier). */
  timestampAfterSeenMs: number;
}

/**
 * Tracks, per VolumeAttachment (by name, checked against its uid), when its attach and its
 * detach started, and records the duration when the attacher finishes them. Each operation is
 * recorded at most once per VA. Part of the per-VolumeAttachment memory
 * ({@link import("./attachment_memory.ts").AttachmentMemory}), which forgets a VA here too.
 */
export class OperationLatency {
  #clock: Clock;
  #sink: OperationLatencySink;
  /** Attaches under way, by VA name. */
  #attaches = new Map<string, Start>();
  /** Detaches under way, by VA name. */
  #detaches = new Map<string, Start>();
  /** Detaches whose VA is gone, by uid, oldest first; see {@link GONE_DETACHES_KEPT}. */
  #goneDetaches = new Map<string, Start>();

  constructor(deps: OperationLatencyDeps) {
    this.#clock = deps.clock;
    this.#sink = deps.sink;
  }

  /** Notes a VA seen in an informer event: starts timing an attach or a detach it waits for. */
  seen(va: VolumeAttachment): void {
    const uid = va.metadata.uid;
    if (!uid) return;
    const name = va.metadata.name;
    if (va.metadata.deletionTimestamp) {
      this.#attaches.delete(name);
      if (this.#detaches.get(name)?.uid !== uid) {
        this.#detaches.set(name, this.#start(uid, va.metadata.deletionTimestamp));
      }
      return;
    }
    if (va.status?.attached || this.#attaches.get(name)?.uid === uid) return;
    this.#attaches.set(name, this.#start(uid, va.metadata.creationTimestamp));
  }

  /** Records the attach of `va` as finished (our `attached: true` write succeeded). */
  attached(va: VolumeAttachment): void {
    const name = va.metadata.name;
    const start = this.#attaches.get(name);
    if (start === undefined || start.uid !== va.metadata.uid) return;
    this.#attaches.delete(name);
    this.#sink.observeAttachDuration(this.#seconds(start));
  }

  /** Records the detach of `va` as finished (our finalizer is removed). */
  detached(va: VolumeAttachment): void {
    const uid = va.metadata.uid;
    if (!uid) return;
    const name = va.metadata.name;
    let start = this.#detaches.get(name);
    if (start?.uid === uid) {
      this.#detaches.delete(name);
    } else {
      start = this.#goneDetaches.get(uid);
      if (start === undefined) return;
      this.#goneDetaches.delete(uid);
    }
    this.#sink.observeDetachDuration(this.#seconds(start));
  }

  /**
   * Forgets the VA `name`, which is gone. A detach under way is kept a little longer (bounded):
   * the delete event can arrive before the answer to the finalizer removal that let the VA go,
   * and {@link detached} then still records it.
   */
  forget(name: string): void {
    this.#attaches.delete(name);
    const detach = this.#detaches.get(name);
    if (detach === undefined) return;
    this.#detaches.delete(name);
    this.#goneDetaches.set(detach.uid, detach);
    if (this.#goneDetaches.size > GONE_DETACHES_KEPT) {
      const oldest = this.#goneDetaches.keys().next().value;
      if (oldest !== undefined) this.#goneDetaches.delete(oldest);
    }
  }

  #start(uid: string, timestamp: string | undefined): Start {
    const parsed = timestamp === undefined ? NaN : Date.parse(timestamp);
    const after = Number.isFinite(parsed) ? parsed - this.#clock.wallNow() : 0;
    return { uid, seenAt: this.#clock.now(), timestampAfterSeenMs: Math.max(0, after) };
  }

  #seconds(start: Start): number {
    return Math.max(0, this.#clock.now() - start.seenAt - start.timestampAfterSeenMs) / 1000;
  }
}
