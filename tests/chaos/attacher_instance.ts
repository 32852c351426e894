/**
 * One attacher process of a chaos schedule: the real `LeaderElector` on the replica's freezable
 * clock against the API server's Lease (`./lease_api.ts`), the informers running from the start
 * (a warm standby's, as `lib/run.ts` runs them), and in each term the controller as it ships
 * (`buildController`, lib/controller/build.ts: work queues, CSI handler, reconciler) around the
 * fence the elector hands the term, over the simulated API and driver. The elector's own timers
 * renew the Lease (a paused replica's are held), its fence closes the term, and a standby's
 * elector takes the Lease over only once it saw the record unchanged for a lease duration. The
 * workers do not pull from the queues by themselves: the simulation starts each sync.
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
import type { AttachController } from "../../lib/controller/controller.ts";
import {
  apiInformers,
  buildController,
  buildControllerInformers,
  type BuiltController,
  type ControllerBuildSettings,
  type ControllerInformers,
} from "../../lib/controller/build.ts";
import type { CsiClient } from "../../lib/csi/api.ts";
import type { Logger } from "../../lib/observe/logger.ts";
import type { LanedWorkQueue } from "../../lib/workqueue/lanes.ts";
import type { FaultyCsiDriver } from "./faulty_csi_client.ts";
import type { FaultyKubeApi } from "./faulty_kube_api.ts";
import { type Sabotage, sabotageClients } from "./sabotage.ts";
import { DRIVER_NAME } from "./world_names.ts";

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

/** The Lease the replicas compete for (the name does not matter to the simulation). */
const LEASE_NAME = "external-attacher-leader-chaos";
const LEASE_NAMESPACE = "kube-system";

/**
 * One attacher process: its leader elector (the real `LeaderElector` on the replica's clock,
 * against the API server's Lease), and, in its term, the controller `buildController` builds for
 * `lib/run.ts`, with the fence of the term.
 */
export class AttacherInstance {
  readonly name: string;
  readonly abort = new AbortController();
  readonly log: Logger;
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
  readonly #build: (fence: LeaseFence) => BuiltController;
  /** The informers, run from the start as a warm standby's (`lib/run.ts`), read by the term. */
  readonly #informers: ControllerInformers;
  #term: BuiltController | undefined;

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
    const log = this.log;
    this.#informers = buildControllerInformers(
      // The simulated API serves no watch lists: the informers list, then watch.
      apiInformers({ kube, clock, log, random: deps.random }, { watchList: false }),
      RESYNC_MS,
      DRIVER_NAME,
    );
    this.#build = (termFence) =>
      buildController(
        {
          kube,
          informers: this.#informers,
          log,
          clock,
          // The "noFence" sabotage: a fence that never closes, to show what the real one prevents.
          fence: opts.sabotage === "noFence" ? { valid: () => true } : termFence,
        },
        buildSettings(opts.maxEntries),
        csiDriver(csi),
      );
  }

  /** True while its elector leads: from the term's start until it stopped leading. */
  get leading(): boolean {
    return this.#term !== undefined && !this.lapsed;
  }

  /** True once it leads and the VA and PV caches synced: the controller's workers may run. */
  ready(): boolean {
    const informers = this.#term?.informers;
    return this.leading && informers !== undefined &&
      informers.volumeAttachments.hasSynced() && informers.persistentVolumes.hasSynced();
  }

  /** The VolumeAttachment queue of the term (it has one once it leads). */
  get vaQueue(): LanedWorkQueue {
    return this.#built().vaQueue;
  }

  /** The PersistentVolume queue of the term. */
  get pvQueue(): LanedWorkQueue {
    return this.#built().pvQueue;
  }

  /**
   * Runs the elector; in its term the informers, and once the VA and PV caches synced the
   * reconcile loop, until the term ends or {@link AttacherInstance.kill}. `onFailure` hears of
   * anything that rejects unexpectedly.
   */
  start(onFailure: (what: string, err: unknown) => void): void {
    const { volumeAttachments, persistentVolumes, csiNodes } = this.#informers;
    for (const informer of [volumeAttachments, persistentVolumes, csiNodes]) {
      informer.run(this.abort.signal).catch((err) => onFailure(`${this.name} informer`, err));
    }
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
    const { volumeAttachments, persistentVolumes } = term.informers;
    Promise.all([volumeAttachments.waitForSync(signal), persistentVolumes.waitForSync(signal)])
      .then(() => this.#reconcileLoop(term, signal), () => {
        // the term ended before the caches synced
      })
      .catch((err) => onFailure(`${this.name} reconcile loop`, err));
    if (signal.aborted) return;
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
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
    this.#term?.vaQueue.shutDown();
    this.#term?.pvQueue.shutDown();
  }

  /** A VA worker takes the next key and syncs it in the background. */
  workVolumeAttachment(onFailure: (what: string, err: unknown) => void): void {
    this.vaWorkers++;
    this.#work().stepVolumeAttachment().then(
      () => this.vaWorkers--,
      (err) => onFailure(`${this.name} va worker`, err),
    );
  }

  /** A PV worker takes the next key and syncs it in the background. */
  workPersistentVolume(onFailure: (what: string, err: unknown) => void): void {
    this.pvWorkers++;
    this.#work().stepPersistentVolume().then(
      () => this.pvWorkers--,
      (err) => onFailure(`${this.name} pv worker`, err),
    );
  }

  /** The controller of the term: workers run only while it leads. */
  #work(): AttachController {
    return this.#built().controller;
  }

  /** What the term runs. */
  #built(): BuiltController {
    if (this.#term === undefined) throw new Error(`${this.name} has no term: it never led`);
    return this.#term;
  }

  /** The controller's reconcile loop, as AttachController.run runs it. */
  async #reconcileLoop(term: BuiltController, signal: AbortSignal): Promise<void> {
    const reconciler = term.reconciler;
    if (reconciler === undefined) throw new Error("the simulated driver lists published volumes");
    while (!signal.aborted) {
      try {
        await reconciler.reconcile(signal);
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

/** The attacher's flags in a schedule (`--max-entries` varies). */
function buildSettings(maxEntries: number): ControllerBuildSettings {
  return {
    resyncMs: RESYNC_MS,
    retry: { baseMs: RETRY_INTERVAL_START_MS, maxMs: RETRY_INTERVAL_MAX_MS },
    // The simulation starts each worker's sync itself.
    workers: 1,
    attachWorkers: 1,
    detachWorkers: 1,
    reconcileSyncMs: RECONCILE_SYNC_MS,
    handler: { defaultFsType: "ext4", attachErrorCodes: true },
    reconciler: { timeoutMs: CSI_TIMEOUT_MS, maxEntries },
    callTimeoutMs: CSI_TIMEOUT_MS,
  };
}

/** The simulated driver: it publishes (read-only too) and lists published volumes. */
function csiDriver(csi: CsiClient) {
  return {
    kind: "csi" as const,
    driverName: DRIVER_NAME,
    csi,
    capabilities: { publishReadonly: true, singleNodeMultiWriter: false, reconcile: true },
  };
}
