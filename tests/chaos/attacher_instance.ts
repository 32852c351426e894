/**
 * One attacher process of a chaos schedule: the real informers, work queues, CSI handler and
 * controller, wired as `lib/run.ts` wires them, over the simulated API and driver. The
 * workers do not pull from the queues by themselves: the simulation starts each sync.
 *
 * @module
 */

import type { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { fenceMarginMs, TermFence } from "../../lib/leaderelection/term_fence.ts";
import type { LeaseFence } from "../../lib/lease_fence.ts";
import { ReplicaClock } from "./replica_clock.ts";
import { AttachController } from "../../lib/controller/controller.ts";
import { volumeAttachmentLanes } from "../../lib/controller/lanes.ts";
import { CsiHandler } from "../../lib/controller/csi_handler.ts";
import { AttachmentMemory } from "../../lib/controller/attachment_memory.ts";
import { ListVolumesReconciler } from "../../lib/controller/reconciler.ts";
import { Informer } from "../../lib/kube/informer.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { Logger } from "../../lib/observe/logger.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { ItemExponentialFailureRateLimiter } from "../../lib/workqueue/rate_limiters.ts";
import { RateLimitingWorkQueue } from "../../lib/workqueue/rate_limiting_queue.ts";
import type { QueueLanes } from "../../lib/workqueue/queue.ts";
import type { FaultyCsiDriver } from "./faulty_csi_client.ts";
import type { FaultyKubeApi } from "./faulty_kube_api.ts";
import { type Sabotage, sabotageClients } from "./sabotage.ts";
import { DRIVER_NAME } from "./world_names.ts";
import { NEVER_ABORTED } from "../../testkit/harness/ready_work.ts";

/** `--timeout`. */
export const CSI_TIMEOUT_MS = 15_000;
/** `--reconcile-sync`. */
export const RECONCILE_SYNC_MS = 60_000;
/** `--resync`. */
export const RESYNC_MS = 600_000;
/** `--retry-interval-start`. */
export const RETRY_INTERVAL_START_MS = 1000;
/** `--retry-interval-max`. */
export const RETRY_INTERVAL_MAX_MS = 300_000;
/** `--leader-election-lease-duration`, in seconds: the fence closes 14 s after a renewal. */
export const LEASE_SECONDS = 15;

/** Collaborators of {@link AttacherInstance}. */
export interface AttacherInstanceDeps {
  api: FaultyKubeApi;
  csi: FaultyCsiDriver;
  clock: FakeClock;
  log: Logger;
  /** Jitter source of the informers. */
  random: () => number;
}

/** Options of {@link AttacherInstance}. */
export interface AttacherInstanceOptions {
  /** The process name (a replica), used as client name and log field. */
  name: string;
  /** `--max-entries`. */
  maxEntries: number;
  /** Runs a deliberately broken attacher. */
  sabotage?: Sabotage;
}

/** One attacher process: informers, queues, handler, controller, all real. */
export class AttacherInstance {
  readonly name: string;
  readonly abort = new AbortController();
  readonly log: Logger;
  readonly vaInformer: Informer<VolumeAttachment>;
  readonly pvInformer: Informer<PersistentVolume>;
  readonly csiNodeInformer: Informer<CsiNode>;
  readonly vaQueue: RateLimitingWorkQueue;
  readonly pvQueue: RateLimitingWorkQueue;
  readonly handler: CsiHandler;
  readonly reconciler: ListVolumesReconciler;
  readonly controller: AttachController;
  /** VA syncs in flight. */
  vaWorkers = 0;
  /** PV syncs in flight. */
  pvWorkers = 0;
  /** This replica's clock: frozen while the process is paused. */
  readonly clock: ReplicaClock;
  /**
   * The lease fence of its term. The simulation stands for the elector: a running replica renews
   * whenever the world's time moves ({@link renew}); a paused one cannot.
   */
  readonly fence: TermFence;
  /** True once the fence found the lease lapsed: the process exits (the simulation kills it). */
  lapsed = false;
  /** When (this replica's clock) the last renewal started. */
  renewedAt: number;

  /** Builds everything; nothing runs until {@link AttacherInstance.start}. */
  constructor(deps: AttacherInstanceDeps, opts: AttacherInstanceOptions) {
    this.name = opts.name;
    const clock = this.clock = new ReplicaClock(deps.clock);
    this.renewedAt = clock.now();
    this.fence = new TermFence(clock, LEASE_SECONDS, this.renewedAt, () => this.lapsed = true);
    // The "noFence" sabotage: a fence that never closes, to show what the real one prevents.
    const fence: LeaseFence = opts.sabotage === "noFence" ? { valid: () => true } : this.fence;
    this.log = deps.log.with({ instance: opts.name });
    let kube = deps.api.connect(opts.name, clock);
    let csi = deps.csi.connect(opts.name, clock);
    if (opts.sabotage) {
      ({ kube, csi } = sabotageClients(opts.sabotage, { kube, csi, log: this.log }));
    }
    const informerDeps = { kube, clock, log: this.log, random: deps.random };
    this.vaInformer = new Informer<VolumeAttachment>(informerDeps, {
      resource: VOLUME_ATTACHMENTS,
      resyncMs: RESYNC_MS,
      name: "volumeattachments",
    });
    this.pvInformer = new Informer<PersistentVolume>(informerDeps, {
      resource: PERSISTENT_VOLUMES,
      resyncMs: RESYNC_MS,
      name: "persistentvolumes",
    });
    this.csiNodeInformer = new Informer<CsiNode>(informerDeps, {
      resource: CSI_NODES,
      resyncMs: RESYNC_MS,
      name: "csinodes",
    });
    const queue = (name: string, lanes?: QueueLanes) =>
      new RateLimitingWorkQueue({
        clock,
        rateLimiter: new ItemExponentialFailureRateLimiter({
          baseMs: RETRY_INTERVAL_START_MS,
          maxMs: RETRY_INTERVAL_MAX_MS,
        }),
      }, { name, lanes });
    // As in production: attach and detach lanes (the sweep takes keys of either, oldest first).
    this.vaQueue = queue("csi-attacher-va", volumeAttachmentLanes(this.vaInformer));
    this.pvQueue = queue("csi-attacher-pv");
    const stores = {
      volumeAttachments: this.vaInformer,
      persistentVolumes: this.pvInformer,
      csiNodes: this.csiNodeInformer,
    };
    const memory = new AttachmentMemory({ backoff: this.vaQueue });
    const log = this.log;
    this.handler = new CsiHandler({ kube, csi, log, clock, stores, memory, fence }, {
      driverName: DRIVER_NAME,
      timeoutMs: CSI_TIMEOUT_MS,
      supportsPublishReadOnly: true,
      supportsSingleNodeMultiWriter: false,
      defaultFsType: "ext4",
      attachErrorCodes: true,
    });
    this.reconciler = new ListVolumesReconciler({
      csi,
      log,
      clock,
      stores,
      memory,
      queue: this.vaQueue,
      fence,
    }, {
      driverName: DRIVER_NAME,
      timeoutMs: CSI_TIMEOUT_MS,
      maxEntries: opts.maxEntries,
    });
    this.controller = new AttachController({
      vaInformer: this.vaInformer,
      pvInformer: this.pvInformer,
      vaQueue: this.vaQueue,
      pvQueue: this.pvQueue,
      handler: this.handler,
      memory,
      reconciler: this.reconciler,
      log,
      clock,
    }, {
      driverName: DRIVER_NAME,
      workers: 1,
      reconcileSyncMs: RECONCILE_SYNC_MS,
    });
  }

  /** True once the VA and PV caches synced: the controller's workers may run. */
  ready(): boolean {
    return this.vaInformer.hasSynced() && this.pvInformer.hasSynced();
  }

  /**
   * Runs the informers, and once the VA and PV caches synced the reconcile loop, until
   * {@link AttacherInstance.kill}. `onFailure` hears of anything that rejects unexpectedly.
   */
  start(onFailure: (what: string, err: unknown) => void): void {
    const signal = this.abort.signal;
    for (const informer of [this.vaInformer, this.pvInformer, this.csiNodeInformer]) {
      informer.run(signal).catch((err) => onFailure(`${this.name} informer`, err));
    }
    Promise.all([this.vaInformer.waitForSync(signal), this.pvInformer.waitForSync(signal)])
      .then(() => this.#reconcileLoop(), () => {
        // aborted before the caches synced: the instance was killed
      })
      .catch((err) => onFailure(`${this.name} reconcile loop`, err));
  }

  /**
   * The lease renewed up to `at` (world time, now or ahead: a running leader renews every retry
   * period, so at any time it has renewed within one; see {@link fence}).
   */
  renew(at: number): void {
    this.renewedAt = Math.max(this.renewedAt, at);
    this.fence.wrote(this.renewedAt);
  }

  /** Whether the fence is still open at world time `now`, without asking it (which may close it). */
  fenceOpenAt(now: number): boolean {
    return now < this.renewedAt + LEASE_SECONDS * 1000 - fenceMarginMs(LEASE_SECONDS);
  }

  /** Stops everything this process runs; what it was waiting for never reaches it. */
  kill(): void {
    this.fence.close();
    this.abort.abort(new Error("killed"));
    this.vaQueue.shutDown();
    this.pvQueue.shutDown();
  }

  /** A VA worker takes the next key and syncs it in the background. */
  workVolumeAttachment(onFailure: (what: string, err: unknown) => void): void {
    this.vaWorkers++;
    this.controller.processNextVolumeAttachment(NEVER_ABORTED).then(
      () => this.vaWorkers--,
      (err) => onFailure(`${this.name} va worker`, err),
    );
  }

  /** A PV worker takes the next key and syncs it in the background. */
  workPersistentVolume(onFailure: (what: string, err: unknown) => void): void {
    this.pvWorkers++;
    this.controller.processNextPersistentVolume().then(
      () => this.pvWorkers--,
      (err) => onFailure(`${this.name} pv worker`, err),
    );
  }

  /** The controller's reconcile loop, as AttachController.run runs it. */
  async #reconcileLoop(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        await this.reconciler.reconcile(signal);
      } catch (err) {
        this.log.error(err, "Failed to reconcile volume attachments");
      }
      try {
        await this.clock.sleep(RECONCILE_SYNC_MS, signal);
      } catch (err) {
        if (signal.aborted) return;
        throw err;
      }
    }
  }
}
