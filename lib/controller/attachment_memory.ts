/**
 * Everything the attacher keeps about one VolumeAttachment between its syncs, in one place with
 * one {@link AttachmentMemory.forget}:
 *
 * - **out of sync**: the ListVolumes reconciler found the driver's published state different
 *   from the VA's `status.attached`; the VA's next sync calls the driver even if it looks done
 *   (external-attacher `csi_handler.go` `ReconcileVA` → `forceSync`);
 * - **own writes**: the resourceVersion of this attacher's last write that makes a sync of an
 *   older cached VA pointless (`attached: true` after a publish; the finalizer removal and
 *   `attached: false` after an unpublish), until the cache has it;
 * - **unrecorded publishes**: a ControllerPublishVolume the driver confirmed whose
 *   `attached: true` could not be written, so that the retry records it instead of publishing
 *   again;
 * - **failures**: the operation that last failed, for the Normal Event of the success that
 *   follows;
 * - **latency**: when its attach or detach started ({@link OperationLatency});
 * - **backoff**: its retry backoff in the VolumeAttachment queue (client-go's `Forget`).
 *
 * Nothing here outlives the VA: the controller calls {@link AttachmentMemory.forget} when the VA
 * is deleted and when a sync finds it gone, and nothing else is needed for it to be released.
 *
 * @module
 */

import { compareResourceVersions } from "../kube/resource_version.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import type { OperationLatency } from "./operation_latency.ts";

/** An operation on a volume. */
export type Operation = "attach" | "detach";

/** A publish the driver confirmed but whose `attached: true` is not written yet. */
export interface UnrecordedPublish {
  /** The uid of the VA it was made for: a VA re-created under the same name publishes anew. */
  uid: string;
  /** The driver's answer. */
  publishContext: Record<string, string>;
  /** The request without its secrets, as a key: only the same request may reuse the answer. */
  request: string;
}

/** Collaborators of {@link AttachmentMemory}. */
export interface AttachmentMemoryDeps {
  /** The VolumeAttachment queue's per-key backoff; {@link AttachmentMemory.forget} resets it. */
  backoff: { forget(name: string): void };
  /** Times attaches and detaches end to end; none when unset (e.g. the trivial handler). */
  latency?: OperationLatency;
}

/** What the attacher remembers per VolumeAttachment name; see the module doc. */
export class AttachmentMemory {
  #backoff: { forget(name: string): void };
  #latency: OperationLatency | undefined;
  #outOfSync = new Set<string>();
  #ownWrites = new Map<string, { uid: string; resourceVersion: string }>();
  #unrecordedPublishes = new Map<string, UnrecordedPublish>();
  #failed = new Map<string, Operation>();

  /** An empty memory over the VolumeAttachment queue's backoff and the latency timer. */
  constructor(deps: AttachmentMemoryDeps) {
    this.#backoff = deps.backoff;
    this.#latency = deps.latency;
  }

  /**
   * Drops everything kept for the VolumeAttachment `name` (every mark above, its latency timer
   * and its queue backoff): it was deleted, or a sync found it gone. Later syncs of a VA with
   * that name start afresh.
   */
  forget(name: string): void {
    this.#outOfSync.delete(name);
    this.#ownWrites.delete(name);
    this.#unrecordedPublishes.delete(name);
    this.#failed.delete(name);
    this.#latency?.forget(name);
    this.#backoff.forget(name);
  }

  /** Marks `name` out of sync with the driver: its next sync calls the driver regardless. */
  markOutOfSync(name: string): void {
    this.#outOfSync.add(name);
  }

  /** True (once) when `name` was marked out of sync since its last sync. */
  takeOutOfSync(name: string): boolean {
    return this.#outOfSync.delete(name);
  }

  /**
   * Remembers a write of this attacher on the VA `name`; `written` is the object the API server
   * returned. A write without an orderable resourceVersion (`../kube/resource_version.ts`) or a
   * uid is not remembered.
   */
  recordOwnWrite(name: string, written: VolumeAttachment | undefined): void {
    const rv = written?.metadata?.resourceVersion;
    if (compareResourceVersions(rv, rv) === 0 && rv !== undefined && written?.metadata.uid) {
      this.#ownWrites.set(name, { uid: written.metadata.uid, resourceVersion: rv });
    }
  }

  /**
   * True when the cached `va` is older than the last write this attacher recorded for it. The VA
   * is queued again by its own metadata patch (or by the reconciler), and that sync may start
   * before the watch has delivered the write: without this check it would publish (or
   * unpublish) the volume a second time. The watch event of the write queues the VA again, so
   * nothing is lost by skipping. resourceVersions are ordered only by
   * {@link compareResourceVersions}, the API's own rule; one it cannot order is never treated as
   * stale. A cached VA that is not older ends the record.
   */
  isOlderThanOwnWrite(va: VolumeAttachment): boolean {
    const name = va.metadata.name;
    const own = this.#ownWrites.get(name);
    if (own === undefined) return false;
    const order = compareResourceVersions(va.metadata.resourceVersion, own.resourceVersion);
    if (own.uid === va.metadata.uid && order !== undefined && order < 0) {
      return true;
    }
    this.#ownWrites.delete(name);
    return false;
  }

  /** Remembers a confirmed publish of the VA `name` whose `attached: true` was not written. */
  rememberUnrecordedPublish(name: string, publish: UnrecordedPublish): void {
    this.#unrecordedPublishes.set(name, publish);
  }

  /** The unrecorded publish of the VA `name`, if any; it is dropped (it is used at most once). */
  takeUnrecordedPublish(name: string): UnrecordedPublish | undefined {
    const publish = this.#unrecordedPublishes.get(name);
    this.#unrecordedPublishes.delete(name);
    return publish;
  }

  /** Remembers that `op` failed for the VA `name`. */
  recordFailure(name: string, op: Operation): void {
    this.#failed.set(name, op);
  }

  /**
   * The operation that last failed for the VA `name` (undefined when none did since its last
   * success); it is dropped.
   */
  takeFailure(name: string): Operation | undefined {
    const op = this.#failed.get(name);
    this.#failed.delete(name);
    return op;
  }

  /** Notes a VA of this driver seen in an informer event (starts timing what it waits for). */
  seen(va: VolumeAttachment): void {
    this.#latency?.seen(va);
  }

  /** Notes that the attach of `va` finished: `attached: true` is written. */
  attached(va: VolumeAttachment): void {
    this.#latency?.attached(va);
  }

  /** Notes that the detach of `va` finished: our finalizer is removed. */
  detached(va: VolumeAttachment): void {
    this.#latency?.detached(va);
  }
}
