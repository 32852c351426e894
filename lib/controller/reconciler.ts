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
import { FENCE_REFUSED_MESSAGE, type LeaseFence, UNFENCED } from "../lease_fence.ts";
import type { LanedQueue } from "../workqueue/types.ts";
import type { AttachmentMemory } from "./attachment_memory.ts";
import type { HandlerStores } from "./handler.ts";
import { repairVolumeHandle } from "./migration.ts";
import { nodeIdOf } from "./volume_source.ts";
import { attempt, type Lookup, ok, sourcePersistentVolume, volumeOf } from "./sync_step.ts";

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
   * The leader's lease fence, asked before each ListVolumes page and before the differences are
   * queued: a pass whose fence closed acts on nothing.
   */
  fence?: LeaseFence;
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
 * The identity of one state of a VolumeAttachment in the cache: its uid and resourceVersion. Any
 * write (ours or another's) and a delete and re-create under the same name change it.
 */
function cachedVersion(va: VolumeAttachment): string {
  return `${va.metadata.uid ?? ""}/${va.metadata.resourceVersion ?? ""}`;
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
    this.#fence = deps.fence ?? UNFENCED;
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
    // The state of every VA before the driver is asked: a VA whose cached state differs from
    // this afterwards changed while ListVolumes ran.
    const before = new Map<string, string>();
    for (const va of stores.volumeAttachments.list()) {
      before.set(va.metadata.name, cachedVersion(va));
    }
    const published = await this.#listPublished(signal, before.size);
    if (published === undefined) return;
    for (const va of stores.volumeAttachments.list()) {
      if (va.spec?.attacher !== this.#opts.driverName) continue;
      this.#reconcileOne(va, published, before);
    }
  }

  /**
   * Every ListVolumes page of one pass, within its deadline: volume ID → the nodes it is
   * published to, as the pages gave them (one or two entries each: an array is smaller than a
   * Set and as quick to search). Undefined when `signal` aborts or the lease fence closes
   * between pages or after the last.
   *
   * @throws {Error} when a ListVolumes call fails (the Go attacher's text)
   */
  async #listPublished(
    signal: AbortSignal,
    vaCount: number,
  ): Promise<Map<string, readonly string[]> | undefined> {
    const deadline = this.#clock.now() + this.#opts.timeoutMs;
    this.#reportPaging(this.#paging.beforePass(vaCount));
    const published = new Map<string, readonly string[]>();
    let token = "";
    let pages = 0;
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
      this.#paging.observe(page.entries, page.bytes, token === "" && page.nextToken === "");
      for (const entry of page.entries) {
        published.set(entry.volumeId, entry.publishedNodeIds);
      }
      token = page.nextToken;
      if (token === "") break;
    }
    if (signal.aborted || this.#fenceClosed()) return undefined;
    this.#deps.log.v(4).info("ListVolumes pass read", {
      pages,
      volumes: published.size,
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
    published: ReadonlyMap<string, readonly string[]>,
    before: ReadonlyMap<string, string>,
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
    const found = published.get(volumeHandle)?.includes(nodeId) ?? false;
    const attached = va.status?.attached ?? false;
    if (found === attached) return;
    const fields = { volumeHandle, nodeID: nodeId, attached, published: found };
    if (this.#deps.queue.isQueuedOrProcessing(name)) {
      log().v(4).info("VolumeAttachment is queued or being synced, not reconciling it", fields);
      return;
    }
    if (before.get(name) !== cachedVersion(va)) {
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
  #volumeOnNode(va: VolumeAttachment): Lookup<{ volumeHandle: string; nodeId: string }> {
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
