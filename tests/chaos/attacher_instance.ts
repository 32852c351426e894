/**
 * One attacher process of a chaos schedule: the real `LeaderElector` on the replica's freezable
 * clock against the API server's Lease (`./lease_api.ts`), and in each term the real informers,
 * work queues, CSI handler and controller, wired as `lib/run.ts` wires them around the fence the
 * elector hands the term, over the simulated API and driver. The elector's own timers renew the
 * Lease (a paused replica's are held), its fence closes the term, and a standby's elector takes
 * the Lease over only once it saw the record unchanged for a lease duration. The workers do not
 * pull from the queues by themselves: the simulation starts each sync.
 *
 * @module
 */

import type { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { fenceMarginMs } from "../../lib/leaderelection/term_fence.ts";
import { LeaderElector } from "../../lib/leaderelection/elector.ts";
import { LeaseApi } from "./lease_api.ts";
import type { MemoryApiServer } from "../../testkit/apiserver/server.ts";
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
import { LanedWorkQueue } from "../../lib/workqueue/lanes.ts";
import type { QueueLanes } from "../../lib/workqueue/lanes.ts";
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
/** `--leader-election-renew-deadline`. */
export const RENEW_DEADLINE_MS = 10_000;
/** `--leader-election-retry-period`. */
export const RETRY_PERIOD_MS = 5_000;

/** Collaborators of {@link AttacherInstance}. */
export interface AttacherInstanceDeps {
  api: FaultyKubeApi;
  /** The API server whose Lease the elector reads and writes. */
  server: MemoryApiServer;
  csi: FaultyCsiDriver;
  clock: FakeClock;
  log: Logger;
  /** Jitter source of the informers and of the elector's acquire attempts. */
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

/** What one term of leadership runs: built when the elector hands out the term's fence. */
interface TermWork {
  readonly handler: CsiHandler;
  readonly reconciler: ListVolumesReconciler;
  readonly controller: AttachController;
}

/** The Lease the replicas compete for (the name does not matter to the simulation). */
const LEASE_NAME = "external-attacher-leader-chaos";
const LEASE_NAMESPACE = "kube-system";

/**
 * One attacher process: its leader elector (the real `LeaderElector` on the replica's clock,
 * against the API server's Lease), and, in its term, informers, queues, handler, controller,
 * all real, wired as `lib/run.ts` wires them, with the fence of the term.
 */
export class AttacherInstance {
  readonly name: string;
  readonly abort = new AbortController();
  readonly log: Logger;
  readonly vaInformer: Informer<VolumeAttachment>;
  readonly pvInformer: Informer<PersistentVolume>;
  readonly csiNodeInformer: Informer<CsiNode>;
  readonly vaQueue: LanedWorkQueue;
  readonly pvQueue: LanedWorkQueue;
  readonly elector: LeaderElector;
  /** VA syncs in flight. */
  vaWorkers = 0;
  /** PV syncs in flight. */
  pvWorkers = 0;
  /** This replica's clock: frozen while the process is paused. */
  readonly clock: ReplicaClock;
  /**
   * True once the elector stopped leading (the term's fence closed, or a renewal found the Lease
   * held by another): the process exits 1 (the simulation kills it).
   */
  lapsed = false;
  readonly #leases: LeaseApi;
  readonly #build: (fence: LeaseFence) => TermWork;
  #term: TermWork | undefined;

  /** Builds the process; nothing runs until {@link AttacherInstance.start}. */
  constructor(deps: AttacherInstanceDeps, opts: AttacherInstanceOptions) {
    this.name = opts.name;
    const clock = this.clock = new ReplicaClock(deps.clock);
    this.log = deps.log.with({ instance: opts.name });
    this.#leases = new LeaseApi(deps.server, clock, opts.name);
    this.elector = new LeaderElector({
      kube: this.#leases,
      clock,
      log: this.log,
      random: deps.random,
    }, {
      name: LEASE_NAME,
      namespace: LEASE_NAMESPACE,
      identity: opts.name,
      leaseDurationMs: LEASE_SECONDS * 1000,
      renewDeadlineMs: RENEW_DEADLINE_MS,
      retryPeriodMs: RETRY_PERIOD_MS,
      // A kill is a crash: nothing is handed back.
      releaseOnCancel: false,
    });
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
      new LanedWorkQueue({
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
    const log = this.log;
    this.#build = (termFence) => {
      // The "noFence" sabotage: a fence that never closes, to show what the real one prevents.
      const fence: LeaseFence = opts.sabotage === "noFence" ? { valid: () => true } : termFence;
      const memory = new AttachmentMemory({ backoff: this.vaQueue });
      const handler = new CsiHandler({ kube, csi, log, clock, stores, memory, fence }, {
        driverName: DRIVER_NAME,
        timeoutMs: CSI_TIMEOUT_MS,
        supportsPublishReadOnly: true,
        supportsSingleNodeMultiWriter: false,
        defaultFsType: "ext4",
        attachErrorCodes: true,
      });
      const reconciler = new ListVolumesReconciler({
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
      const controller = new AttachController({
        vaInformer: this.vaInformer,
        pvInformer: this.pvInformer,
        vaQueue: this.vaQueue,
        pvQueue: this.pvQueue,
        handler,
        memory,
        reconciler,
        log,
        clock,
      }, {
        driverName: DRIVER_NAME,
        workers: 1,
        reconcileSyncMs: RECONCILE_SYNC_MS,
      });
      return { handler, reconciler, controller };
    };
  }

  /** True while its elector leads: from the term's start until it stopped leading. */
  get leading(): boolean {
    return this.#term !== undefined && !this.lapsed;
  }

  /** True once it leads and the VA and PV caches synced: the controller's workers may run. */
  ready(): boolean {
    return this.leading && this.vaInformer.hasSynced() && this.pvInformer.hasSynced();
  }

  /**
   * Runs the elector; in its term the informers, and once the VA and PV caches synced the
   * reconcile loop, until the term ends or {@link AttacherInstance.kill}. `onFailure` hears of
   * anything that rejects unexpectedly.
   */
  start(onFailure: (what: string, err: unknown) => void): void {
    this.elector.run(this.abort.signal, {
      onStartedLeading: (signal, fence) => this.#lead(signal, fence, onFailure),
      onStoppedLeading: () => this.lapsed = true,
    }).catch((err) => onFailure(`${this.name} elector`, err));
  }

  /** One term, as `lib/run.ts` runs the controller: built around the term's fence. */
  async #lead(
    signal: AbortSignal,
    fence: LeaseFence,
    onFailure: (what: string, err: unknown) => void,
  ): Promise<void> {
    const term = this.#term = this.#build(fence);
    const running = [this.vaInformer, this.pvInformer, this.csiNodeInformer].map((informer) =>
      informer.run(signal).catch((err) => onFailure(`${this.name} informer`, err))
    );
    Promise.all([this.vaInformer.waitForSync(signal), this.pvInformer.waitForSync(signal)])
      .then(() => this.#reconcileLoop(term, signal), () => {
        // the term ended before the caches synced
      })
      .catch((err) => onFailure(`${this.name} reconcile loop`, err));
    await Promise.all(running);
  }

  /**
   * Whether the term's fence is still open at world time `now`, without asking it (which may
   * close it): the elector's last successful Lease write naming this replica was sent less than
   * the fence's span ago.
   */
  fenceOpenAt(now: number): boolean {
    return this.leading &&
      now < this.#leases.lastHeldWriteAt + LEASE_SECONDS * 1000 - fenceMarginMs(LEASE_SECONDS);
  }

  /** Stops everything this process runs; what it was waiting for never reaches it. */
  kill(): void {
    this.#leases.kill();
    this.abort.abort(new Error("killed"));
    this.vaQueue.shutDown();
    this.pvQueue.shutDown();
  }

  /** A VA worker takes the next key and syncs it in the background. */
  workVolumeAttachment(onFailure: (what: string, err: unknown) => void): void {
    this.vaWorkers++;
    this.#work().processNextVolumeAttachment(NEVER_ABORTED).then(
      () => this.vaWorkers--,
      (err) => onFailure(`${this.name} va worker`, err),
    );
  }

  /** A PV worker takes the next key and syncs it in the background. */
  workPersistentVolume(onFailure: (what: string, err: unknown) => void): void {
    this.pvWorkers++;
    this.#work().processNextPersistentVolume().then(
      () => this.pvWorkers--,
      (err) => onFailure(`${this.name} pv worker`, err),
    );
  }

  /** The controller of the term: workers run only while it leads. */
  #work(): AttachController {
    if (this.#term === undefined) throw new Error(`${this.name} has no term: it never led`);
    return this.#term.controller;
  }

  /** The controller's reconcile loop, as AttachController.run runs it. */
  async #reconcileLoop(term: TermWork, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await term.reconciler.reconcile(signal);
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
