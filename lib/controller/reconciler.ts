/**
 * The ListVolumes reconciler (external-attacher `pkg/controller/csi_handler.go`, `ReconcileVA`):
 * every `--reconcile-sync` the driver is asked which volumes it has published on which nodes,
 * and every VolumeAttachment whose `status.attached` differs from that is queued with a forced
 * sync (its next sync calls the driver even if the VA looks done).
 *
 * Unlike the Go attacher, a difference is acted on only when it is real. The driver's answer
 * and the cache are read at different times, so a VA is left to its own sync when it
 * - is queued or being synced (an attach or detach in flight: the driver may already show its
 *   result while the cache does not), or
 * - changed in the cache since the pass started (the answer may predate the change), or
 * - is older in the cache than this attacher's own last write of it (the answer may show that
 *   attach or detach while the cache does not yet).
 * Such a VA is looked at again in the next pass; a difference that remains is repaired then.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { realClock } from "../clock.ts";
import { errorText } from "../errors.ts";
import type { CsiClient, ListVolumesPage } from "../csi/api.ts";
import { ListVolumesPaging, type PagingTurnedOn } from "./list_volumes_paging.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import type { Logger } from "../observe/logger.ts";
import { FENCE_REFUSED_MESSAGE, type LeaseFence } from "../lease_fence.ts";
import type { LanedQueue } from "../workqueue/types.ts";
import type { AttachmentMemory } from "./attachment_memory.ts";
import type { HandlerStores } from "./handler.ts";
import { repairVolumeHandle } from "./migration.ts";
import { nodeIdOf } from "./volume_source.ts";
import {
  attempt,
  type Failed,
  type Ok,
  ok,
  sourcePersistentVolume,
  volumeOf,
} from "./sync_step.ts";

/** What the controller's reconcile loop runs, once per `--reconcile-sync`. */
export interface Reconciler {
  /** One pass; a failed pass rejects (the loop logs it and tries again next period). */
  reconcile(signal: AbortSignal): Promise<void>;
}

/** Collaborators of {@link ListVolumesReconciler}. */
export interface ListVolumesReconcilerDeps {
  /** The driver, asked for its published volumes. */
  csi: CsiClient;
  log: Logger;
  /** Measures the pass's timeout; the real clock by default. */
  clock?: Clock;
  /** The informer caches of VolumeAttachments, PersistentVolumes and CSINodes. */
  stores: HandlerStores;
  /** Where a VA found out of sync is marked, for its next sync. */
  memory: AttachmentMemory;
  /** The VolumeAttachment queue: VAs found out of sync are added; busy ones are left alone. */
  queue: Pick<LanedQueue, "add" | "isQueuedOrProcessing">;
  /**
   * The lease fence of the term (`SOLE_REPLICA` without leader election), asked before each
   * ListVolumes page and before the differences are queued: a pass whose fence closed acts on
   * nothing. Required, so that no reconciler acts unfenced by omission.
   */
  fence: LeaseFence;
}

/** Options of {@link ListVolumesReconciler}. */
export interface ListVolumesReconcilerOptions {
  driverName: string;
  /** Timeout of one whole pass, every ListVolumes page included. */
  timeoutMs: number;
  /**
   * `max_entries` of each ListVolumes page; 0 means no limit until an answer grows too large for
   * one gRPC message (list_volumes_paging.ts).
   */
  maxEntries: number;
}

/**
 * Whether `now` is the state of the VolumeAttachment that `then` was: the same object, or one of
 * the same uid and resourceVersion (a re-list replaces objects that did not change). Any write
 * (ours or another's) and a delete and re-create under the same name change them.
 */
function sameVersion(then: VolumeAttachment, now: VolumeAttachment | undefined): boolean {
  return now === then || (
    now !== undefined && now.metadata.uid === then.metadata.uid &&
    now.metadata.resourceVersion === then.metadata.resourceVersion
  );
}

/**
 * The nodes a volume is published to, as kept during a pass: one node ID as a string (the usual
 * case: a string takes no memory of its own when the ID is interned), several as an array.
 */
type PublishedNodes = string | readonly string[];

function publishedTo(nodes: PublishedNodes | undefined, nodeId: string): boolean {
  if (nodes === undefined) return false;
  return typeof nodes === "string" ? nodes === nodeId : nodes.includes(nodeId);
}

/** Compares the driver's published volumes with the VolumeAttachments; see the module doc. */
export class ListVolumesReconciler implements Reconciler {
  #deps: ListVolumesReconcilerDeps;
  #clock: Clock;
  #opts: ListVolumesReconcilerOptions;
  #fence: LeaseFence;
  #paging: ListVolumesPaging;

  /** Builds the reconciler; nothing runs until {@link reconcile}. */
  constructor(deps: ListVolumesReconcilerDeps, opts: ListVolumesReconcilerOptions) {
    this.#deps = deps;
    this.#clock = deps.clock ?? realClock;
    this.#opts = opts;
    this.#fence = deps.fence;
    this.#paging = new ListVolumesPaging(opts.maxEntries);
  }

  /** True (and logged) when the lease fence is closed. */
  #fenceClosed(): boolean {
    if (this.#fence.valid()) return false;
    this.#deps.log.info(FENCE_REFUSED_MESSAGE, { reconciler: "ListVolumes" });
    return true;
  }

  /** `max_entries` of the next ListVolumes page (0: no limit); see list_volumes_paging.ts. */
  get maxEntries(): number {
    return this.#paging.maxEntries;
  }

  /** Logs, once in the life of the reconciler, that paging was turned on and why. */
  #reportPaging(turnedOn: PagingTurnedOn | undefined): void {
    if (turnedOn === undefined) return;
    this.#deps.log.info("ListVolumes answer too large for one message, paging with max_entries", {
      reason: turnedOn.reason,
      answerBytes: turnedOn.answerBytes,
      limitBytes: turnedOn.limitBytes,
      maxEntries: turnedOn.maxEntries,
    });
  }

  /**
   * One pass: every ListVolumes page within {@link ListVolumesReconcilerOptions.timeoutMs},
   * then each differing VA marked out of sync and queued. Returns early, having queued nothing,
   * when `signal` aborts or the lease fence closes between pages or before the queueing.
   *
   * @throws {Error} when a ListVolumes call fails (the Go attacher's text)
   */
  async reconcile(signal: AbortSignal): Promise<void> {
    const { stores } = this.#deps;
    // Every VA before the driver is asked: one whose cached state is not this one afterwards
    // changed while ListVolumes ran. Cached objects are replaced, never changed, so the array of
    // them is the whole record (at 100 000 VAs, 0.8 MB instead of a map of version strings).
    const before = stores.volumeAttachments.list();
    const published = await this.#listPublished(signal, before.length);
    if (published === undefined) return;
    // The VAs of the snapshot, as they are now: a VA created during the pass is left to its own
    // sync (it is queued anyway), one deleted during the pass has nothing to reconcile.
    for (const then of before) {
      const va = stores.volumeAttachments.get(then.metadata.name);
      if (va === undefined || va.spec?.attacher !== this.#opts.driverName) continue;
      this.#reconcileOne(va, published, then);
    }
  }

  /**
   * Every ListVolumes page of one pass, within its deadline: volume ID → the nodes it is
   * published to; volumes published nowhere are left out (not found is not published).
   * Undefined when `signal` aborts or the lease fence closes between pages or after the last.
   *
   * @throws {Error} when a ListVolumes call fails (the Go attacher's text)
   */
  async #listPublished(
    signal: AbortSignal,
    vaCount: number,
  ): Promise<Map<string, PublishedNodes> | undefined> {
    const deadline = this.#clock.now() + this.#opts.timeoutMs;
    this.#reportPaging(this.#paging.beforePass(vaCount));
    const published = new Map<string, PublishedNodes>();
    // The node IDs are interned for the pass: a node's ID is repeated by every volume published
    // to it, and each page decodes its own copies.
    const nodeIds = new Map<string, string>();
    const nodeIdOnce = (id: string): string => {
      const known = nodeIds.get(id);
      if (known !== undefined) return known;
      nodeIds.set(id, id);
      return id;
    };
    let token = "";
    let pages = 0;
    let volumes = 0;
    for (;;) {
      if (signal.aborted || this.#fenceClosed()) return undefined;
      const timeoutMs = Math.max(1, deadline - this.#clock.now());
      let page: ListVolumesPage;
      try {
        page = await this.#deps.csi.listVolumes({
          maxEntries: this.#paging.maxEntries,
          startingToken: token,
        }, {
          timeoutMs,
        });
      } catch (err) {
        const { retry, turnedOn } = this.#paging.onFailure(err);
        this.#reportPaging(turnedOn);
        // A page too large for one message is asked again, smaller, within the same deadline.
        if (retry && this.#clock.now() < deadline) continue;
        throw new Error(`failed to ListVolumes: failed to list volumes: ${errorText(err)}`, {
          cause: err,
        });
      }
      pages++;
      volumes += page.entries.length;
      this.#paging.observe(page.entries, page.bytes, token === "" && page.nextToken === "");
      for (const entry of page.entries) {
        const ids = entry.publishedNodeIds;
        if (ids.length === 0) {
          // A later entry of the same volume replaces an earlier one, as a map write does.
          published.delete(entry.volumeId);
        } else if (ids.length === 1) {
          published.set(entry.volumeId, nodeIdOnce(ids[0]!));
        } else {
          published.set(entry.volumeId, Object.freeze(ids.map(nodeIdOnce)));
        }
      }
      token = page.nextToken;
      if (token === "") break;
    }
    if (signal.aborted || this.#fenceClosed()) return undefined;
    this.#deps.log.v(4).info("ListVolumes pass read", {
      pages,
      volumes,
      maxEntries: this.#paging.maxEntries,
    });
    return published;
  }

  /**
   * Compares one VA of this driver with the driver's answer; a real difference marks it out of
   * sync and queues it (see the module doc for the VAs left to their own sync).
   */
  #reconcileOne(
    va: VolumeAttachment,
    published: ReadonlyMap<string, PublishedNodes>,
    then: VolumeAttachment,
  ): void {
    const name = va.metadata.name;
    // The child logger only for a VA that gets a line: most of them get none.
    const log = () => this.#deps.log.with({ volumeAttachment: name });
    const volume = this.#volumeOnNode(va);
    if (volume.kind !== "ok") {
      log().error(volume.error, "Skipping VolumeAttachment in reconciliation");
      return;
    }
    const { volumeHandle, nodeId } = volume.value;
    const found = publishedTo(published.get(volumeHandle), nodeId);
    const attached = va.status?.attached ?? false;
    if (found === attached) return;
    const fields = { volumeHandle, nodeID: nodeId, attached, published: found };
    if (this.#deps.queue.isQueuedOrProcessing(name)) {
      log().v(4).info("VolumeAttachment is queued or being synced, not reconciling it", fields);
      return;
    }
    if (!sameVersion(then, va)) {
      log().v(4).info("VolumeAttachment changed during ListVolumes, not reconciling it", fields);
      return;
    }
    if (this.#deps.memory.isOlderThanOwnWrite(va)) {
      // Our own attach or detach was recorded after this cached copy: the driver's answer may
      // show it while the cache does not yet.
      log().v(4).info("VolumeAttachment is older than our own write, not reconciling it", fields);
      return;
    }
    log().v(2).info("Driver's published state differs from VolumeAttachment, requeueing", fields);
    this.#deps.memory.markOutOfSync(name);
    this.#deps.queue.add(name);
  }

  /**
   * The VA's node ID (the annotation standing in for a missing CSINode) and volume handle (an
   * in-tree one repaired with the node ID, as csi-translation-lib's `RepairVolumeHandle`).
   */
  #volumeOnNode(va: VolumeAttachment): Ok<{ volumeHandle: string; nodeId: string }> | Failed {
    const { stores } = this.#deps;
    const nodeId = attempt(() =>
      nodeIdOf(stores.csiNodes, this.#opts.driverName, va.spec.nodeName, va)
    );
    if (nodeId.kind !== "ok") return nodeId;
    const pv = sourcePersistentVolume(stores, va);
    if (pv.kind !== "ok") return pv;
    const volume = volumeOf(va, pv.value);
    if (volume.kind !== "ok") return volume;
    const { source, volumeHandle } = volume.value;
    const handle = source.migrated
      ? attempt(() => repairVolumeHandle(source.csi.driver, volumeHandle, nodeId.value))
      : ok(volumeHandle);
    if (handle.kind !== "ok") return handle;
    return ok({ volumeHandle: handle.value, nodeId: nodeId.value });
  }
}
