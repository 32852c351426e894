/**
 * The controller loop: informer events → keys → workqueues → cache lookup → handler.
 *
 * It owns no volume logic; see {@link Handler}. The behaviour follows the Go attacher's
 * `pkg/controller/controller.go`.
 *
 * @module
 */

import type { Clock, Timer } from "../clock.ts";
import { realClock } from "../clock.ts";
import { COMPONENT_NAME } from "../component.ts";
import type { Handler, SyncOutcome } from "./handler.ts";
import type { AttachmentMemory } from "./attachment_memory.ts";
import type { Reconciler } from "./reconciler.ts";
import type { Logger } from "../observe/logger.ts";
import { jsonEqual } from "../kube/patches.ts";
import { isMigratablePersistentVolume } from "./migration.ts";
import { finalizerName, MIGRATED_TO_ANNOTATION } from "./names.ts";
import type { EventHandlers, ObjectStore } from "../kube/store.ts";
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import type { LanedQueue, RateLimitingQueue } from "../workqueue/types.ts";

/** A cache that can also deliver events. */
export interface InformerLike<T> extends ObjectStore<T> {
  addHandlers(h: EventHandlers<T>): void;
  hasSynced(): boolean;
  waitForSync(signal: AbortSignal): Promise<void>;
}

/** The `controller` of the "Caches are synced" line, the name of the Go attacher's controller. */
export const CONTROLLER_NAME = COMPONENT_NAME;

/**
 * How long after the last processed key the workers count as idle ({@link ControllerDeps.whenIdle}):
 * long enough that a burst's keys, which arrive as fast as the watch delivers them, end it only
 * once, short enough that its garbage does not outlive it by much.
 */
export const IDLE_AFTER_MS = 500;

/** Collaborators of {@link AttachController}. */
export interface ControllerDeps {
  vaInformer: InformerLike<VolumeAttachment>;
  pvInformer: InformerLike<PersistentVolume>;
  /** Rate-limited, with the attach and detach lanes (`./lanes.ts`). */
  vaQueue: RateLimitingQueue & LanedQueue;
  pvQueue: RateLimitingQueue;
  handler: Handler;
  /**
   * What is kept per VolumeAttachment (shared with the handler): told of every VA event of this
   * driver, and forgotten when a VA is gone. Its backoff must be `vaQueue`'s.
   */
  memory: AttachmentMemory;
  /** Run every {@link ControllerOptions.reconcileSyncMs}; no reconcile loop when unset. */
  reconciler?: Reconciler;
  log: Logger;
  clock?: Clock;
  /**
   * Called once, when the caches have synced and nothing is queued, before the first worker
   * starts: `run.ts` collects the garbage of the initial lists there (`lib/heap.ts`). With keys
   * queued at that point (a new leader, or a restart, over VolumeAttachments that need work) it
   * is not called: the work goes first and {@link whenIdle} collects once it is done.
   */
  afterSync?: () => void;
  /**
   * Called when the workers have been idle for {@link IDLE_AFTER_MS} after processing keys or
   * after a ListVolumes pass, and both queues are empty: the end of a burst. `run.ts` collects
   * the burst's garbage there (`lib/heap.ts`, which skips a collection not worth its time).
   */
  whenIdle?: () => void;
}

/** Options of {@link AttachController}. */
export interface ControllerOptions {
  /** The driver name from GetPluginInfo; only VolumeAttachments with this attacher are synced. */
  driverName: string;
  /**
   * Number of PersistentVolume workers, and of VolumeAttachment workers when
   * {@link laneWorkers} is not given.
   */
  workers: number;
  /**
   * VolumeAttachment workers per lane of the VA queue (e.g. `{attach: 10, detach: 10}`): each
   * worker takes keys of its lane only. Every lane of the queue needs at least one. Without it,
   * {@link workers} workers take keys of any lane.
   */
  laneWorkers?: Readonly<Record<string, number>>;
  /** Period of the reconcile loop, counted from the end of the previous pass. */
  reconcileSyncMs: number;
}

/**
 * Whether an update of a VolumeAttachment must be synced. Changes that touch only
 * `status.attachError`, `status.detachError`, `resourceVersion` or `managedFields` are the
 * controller's own error writes: syncing them would call the driver again at once and break the
 * exponential backoff (https://github.com/kubernetes-csi/external-attacher/issues/337).
 */
export function shouldEnqueueVAChange(oldVA: VolumeAttachment, newVA: VolumeAttachment): boolean {
  if (oldVA.metadata.resourceVersion === newVA.metadata.resourceVersion) {
    return true; // periodic resync
  }
  const oldStatus = oldVA.status;
  const newStatus = newVA.status;
  if (
    !oldStatus?.attachError && !newStatus?.attachError && !oldStatus?.detachError &&
    !newStatus?.detachError
  ) {
    return true;
  }
  const sanitized: VolumeAttachment = structuredClone(newVA);
  sanitized.metadata.resourceVersion = oldVA.metadata.resourceVersion;
  setOrDelete(sanitized.metadata, "managedFields", oldVA.metadata.managedFields);
  if (sanitized.status || oldStatus) {
    sanitized.status ??= { attached: false };
    setOrDelete(sanitized.status, "attachError", oldStatus?.attachError);
    setOrDelete(sanitized.status, "detachError", oldStatus?.detachError);
  }
  return !jsonEqual(normalizeStatus(oldVA), normalizeStatus(sanitized));
}

function setOrDelete<T extends object, K extends keyof T>(obj: T, key: K, value: T[K] | undefined) {
  if (value === undefined) delete obj[key];
  else obj[key] = value;
}

/** A missing status and an empty `{attached:false}` status compare equal. */
function normalizeStatus(va: VolumeAttachment): unknown {
  const { status, ...rest } = va;
  const s = status ?? { attached: false };
  return { ...rest, status: { ...s, attached: s.attached ?? false } };
}

/**
 * Whether a VolumeAttachment that appears (an informer's add: the initial list, a relist, a new
 * object) has nothing to be done: it is this driver's, attached and not being deleted. Its sync
 * would end at once, as the Go attacher's does (`csiHandler.syncAttach`: "already attached"
 * unless forced by the ListVolumes reconciler, which queues what it forces itself). Not queueing
 * it spares a new leader, or an attacher restarted over N attached VolumeAttachments, a pass over
 * all of them before the first VA that needs work; every later change of it is queued as before.
 */
export function isSettled(va: VolumeAttachment, driverName: string): boolean {
  return va.spec?.attacher === driverName && va.status?.attached === true &&
    !va.metadata.deletionTimestamp;
}

/**
 * Whether a PersistentVolume event may lead to removing our finalizer: the PV carries it and is
 * being deleted, or it is an in-tree PV no longer migrated to this driver (CSI migration turned
 * off or rolled back).
 */
export function shouldProcessPersistentVolume(pv: PersistentVolume, driverName: string): boolean {
  if (!(pv.metadata.finalizers ?? []).includes(finalizerName(driverName))) return false;
  if (pv.metadata.deletionTimestamp) return true;
  return isMigratablePersistentVolume(pv) &&
    pv.metadata.annotations?.[MIGRATED_TO_ANNOTATION] !== driverName;
}

/** The signal of the syncs a caller steps by hand ({@link AttachController.stepVolumeAttachment}). */
const NEVER_STOPPED: AbortSignal = new AbortController().signal;

/** Runs the VolumeAttachment and PersistentVolume queues of one driver. */
export class AttachController {
  #deps: ControllerDeps;
  #opts: ControllerOptions;
  #clock: Clock;
  #log: Logger;
  #idleTimer: Timer | undefined;
  /** Clock reading of the last processed key, for {@link ControllerDeps.whenIdle}. */
  #lastActivity = 0;
  /** VolumeAttachment syncs running now. */
  #vaInFlight = 0;
  /** Told when the VolumeAttachment queue is next drained ({@link #vaQueueDrained}). */
  #drainWaiters: (() => void)[] = [];

  constructor(deps: ControllerDeps, opts: ControllerOptions) {
    if (!Number.isInteger(opts.workers) || opts.workers < 1) {
      throw new RangeError(
        `Cannot create controller: workers must be at least 1, got ${opts.workers}`,
      );
    }
    if (opts.laneWorkers !== undefined) {
      const lanes = deps.vaQueue.lanes();
      for (const lane of new Set([...lanes, ...Object.keys(opts.laneWorkers)])) {
        const n = opts.laneWorkers[lane];
        if (!lanes.includes(lane) || n === undefined || !Number.isInteger(n) || n < 1) {
          throw new RangeError(
            `Cannot create controller: lane ${
              JSON.stringify(lane)
            } of the VolumeAttachment queue needs at least 1 worker, got ${n}`,
          );
        }
      }
    }
    this.#deps = deps;
    this.#opts = opts;
    this.#clock = deps.clock ?? realClock;
    this.#log = deps.log;
    deps.vaInformer.addHandlers({
      add: (va) => this.#vaAdded(va),
      update: (oldVA, newVA) => this.#vaUpdated(oldVA, newVA),
      delete: (va) => this.#vaDeleted(va),
    });
    deps.pvInformer.addHandlers({
      add: (pv) => this.#pvAddedOrUpdated(pv),
      update: (_oldPV, newPV) => this.#pvAddedOrUpdated(newPV),
    });
  }

  #vaAdded(va: VolumeAttachment): void {
    this.#noteSeen(va);
    if (isSettled(va, this.#opts.driverName)) return;
    this.#deps.vaQueue.add(va.metadata.name);
  }

  #noteSeen(va: VolumeAttachment): void {
    if (va.spec?.attacher === this.#opts.driverName) this.#deps.memory.seen(va);
  }

  #vaUpdated(oldVA: VolumeAttachment, newVA: VolumeAttachment): void {
    this.#noteSeen(newVA);
    if (shouldEnqueueVAChange(oldVA, newVA)) {
      this.#deps.vaQueue.add(newVA.metadata.name);
    } else {
      this.#log.v(3).info("Ignoring VolumeAttachment change", {
        volumeAttachment: newVA.metadata.name,
      });
    }
  }

  #vaDeleted(va: VolumeAttachment): void {
    // Nothing is kept for a VA that is gone, its backoff included.
    this.#deps.memory.forget(va.metadata.name);
    // A deleted VA may have been the last user of its PV: let the PV queue decide whether the
    // PV finalizer can go.
    const pvName = va.spec?.source?.persistentVolumeName;
    if (pvName) this.#deps.pvQueue.add(pvName);
  }

  #pvAddedOrUpdated(pv: PersistentVolume): void {
    if (shouldProcessPersistentVolume(pv, this.#opts.driverName)) {
      this.#deps.pvQueue.add(pv.metadata.name);
    }
  }

  /**
   * Syncs one VolumeAttachment key that is ready now (of `lane` only, when given), as one step of
   * a worker, for a caller that schedules the workers itself instead of {@link run} (the
   * attacher's simulations and scenario tests step them one key at a time). False at once when
   * no key is ready or the queue is shutting down. The sync's signal never aborts: the caller
   * stops by not stepping.
   */
  stepVolumeAttachment(lane?: string): Promise<boolean> {
    if (this.#deps.vaQueue.len(lane) === 0) return Promise.resolve(false);
    return this.#processNextVolumeAttachment(NEVER_STOPPED, lane);
  }

  /** Syncs one PersistentVolume key that is ready now; like {@link stepVolumeAttachment}. */
  stepPersistentVolume(): Promise<boolean> {
    if (this.#deps.pvQueue.len() === 0) return Promise.resolve(false);
    return this.#processNextPersistentVolume();
  }

  /**
   * Steps the workers until neither queue has a ready key: what is ready now, and what the syncs
   * queue again at once, is synced; a retry waiting for its backoff is not. Resolves with the
   * number of keys synced.
   */
  async drainReady(): Promise<number> {
    let synced = 0;
    while ((await this.stepVolumeAttachment()) || (await this.stepPersistentVolume())) synced++;
    return synced;
  }

  /**
   * Waits for a VolumeAttachment key (of `lane` only, when given) and syncs it, as one step of a
   * worker; `signal` (the controller's stop, when run by {@link run}) is handed to the sync. False
   * when the queue is shutting down: a key that arrives then is handed back unsynced (it reached
   * this worker after the stop).
   */
  async #processNextVolumeAttachment(signal: AbortSignal, lane?: string): Promise<boolean> {
    const queue = this.#deps.vaQueue;
    const key = await queue.get(lane);
    if (key === undefined) return false;
    if (queue.shuttingDown()) {
      queue.done(key);
      return false;
    }
    this.#vaInFlight++;
    try {
      await this.#syncVolumeAttachment(key, signal);
    } finally {
      this.#vaInFlight--;
      queue.done(key);
      this.#noteActivity();
      if (this.#drainWaiters.length > 0 && this.#vaInFlight === 0 && queue.len() === 0) {
        for (const w of this.#drainWaiters.splice(0)) w();
      }
    }
    return true;
  }

  /**
   * Resolves once a VolumeAttachment sync ends with no ready key left and no other sync running,
   * or after `ms` of the clock, or when `signal` aborts. The wait is registered synchronously.
   */
  async #vaQueueDrained(ms: number, signal: AbortSignal): Promise<void> {
    const drained = Promise.withResolvers<void>();
    this.#drainWaiters.push(drained.resolve);
    const timer = this.#clock.setTimer(ms, drained.resolve);
    const onAbort = () => drained.resolve();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      await drained.promise;
    } finally {
      timer.cancel();
      signal.removeEventListener("abort", onAbort);
      this.#drainWaiters = this.#drainWaiters.filter((w) => w !== drained.resolve);
    }
  }

  /** Waits for a PersistentVolume key and syncs it; like #processNextVolumeAttachment. */
  async #processNextPersistentVolume(): Promise<boolean> {
    const queue = this.#deps.pvQueue;
    const key = await queue.get();
    if (key === undefined) return false;
    if (queue.shuttingDown()) {
      queue.done(key);
      return false;
    }
    try {
      await this.#syncPersistentVolume(key);
    } finally {
      queue.done(key);
      this.#noteActivity();
    }
    return true;
  }

  async #syncVolumeAttachment(name: string, signal: AbortSignal): Promise<void> {
    const log = this.#log.with({ volumeAttachment: name });
    const va = this.#deps.vaInformer.get(name);
    if (!va) {
      log.v(4).info("VolumeAttachment was deleted in the meantime, ignoring");
      // A sync that failed while the VA was being deleted may have recorded a retry after
      // the delete event: this last sync of the key ends its records.
      this.#deps.memory.forget(name);
      return;
    }
    if (va.spec?.attacher !== this.#opts.driverName) {
      log.v(4).info("Skipping VolumeAttachment for another attacher", {
        attacher: va.spec?.attacher,
      });
      return;
    }
    let outcome: SyncOutcome;
    try {
      outcome = await this.#deps.handler.syncVolumeAttachment(va, signal);
    } catch (err) {
      // Handlers report their own failures; an exception here is a bug. Keep the key alive.
      log.error(err, "Unexpected failure syncing VolumeAttachment");
      outcome = "retry";
    }
    applyOutcome(this.#deps.vaQueue, name, outcome);
  }

  async #syncPersistentVolume(name: string): Promise<void> {
    const log = this.#log.with({ persistentVolume: name });
    const pv = this.#deps.pvInformer.get(name);
    if (!pv) {
      log.v(4).info("PersistentVolume was deleted in the meantime, ignoring");
      this.#deps.pvQueue.forget(name);
      return;
    }
    let outcome: SyncOutcome;
    try {
      outcome = await this.#deps.handler.syncPersistentVolume(pv);
    } catch (err) {
      log.error(err, "Unexpected failure syncing PersistentVolume");
      outcome = "retry";
    }
    applyOutcome(this.#deps.pvQueue, name, outcome);
  }

  /**
   * Waits for the caches, then runs the workers (and the reconcile loop) until `signal` aborts.
   * On abort the queues shut down and no worker takes another key; a sync that has not called
   * the driver yet stops where it is (an API request, a wait for the client's rate limiter), and
   * one that has completes, its status write included. This resolves once every sync in flight
   * has finished, so no CSI call is cut short by shutdown (each is bounded by `--timeout`) and
   * none starts after it.
   */
  async run(signal: AbortSignal): Promise<void> {
    const { vaInformer, pvInformer, vaQueue, pvQueue } = this.#deps;
    this.#log.info("Starting CSI attacher");
    const stop = () => {
      vaQueue.shutDown();
      pvQueue.shutDown();
    };
    signal.addEventListener("abort", stop, { once: true });
    try {
      await Promise.all([vaInformer.waitForSync(signal), pvInformer.waitForSync(signal)]);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    // As client-go's `WaitForNamedCacheSync` (tools/cache/shared_informer.go) says at V(0); the
    // Go attacher's plain `WaitForCacheSync` says nothing, and its reflectors' "Caches
    // populated" (tools/cache/reflector.go) is at V(2). The moment a new leader can work.
    this.#log.info("Caches are synced", { controller: CONTROLLER_NAME });
    // A full collection takes a few hundred ms with 100 000 objects cached: not before the
    // first attach a new leader owes.
    if (vaQueue.len() === 0 && pvQueue.len() === 0) this.#deps.afterSync?.();
    // Before any worker takes a key: the first reconcile pass waits for what is queued now.
    const firstPass = vaQueue.len() > 0 && this.#deps.reconciler !== undefined
      ? this.#vaQueueDrained(this.#opts.reconcileSyncMs, signal)
      : Promise.resolve();
    const loops: Promise<void>[] = [];
    for (let i = 0; i < this.#opts.workers; i++) {
      if (this.#opts.laneWorkers === undefined) {
        loops.push(this.#worker(signal, () => this.#processNextVolumeAttachment(signal)));
      }
      loops.push(this.#worker(signal, () => this.#processNextPersistentVolume()));
    }
    for (const [lane, n] of Object.entries(this.#opts.laneWorkers ?? {})) {
      for (let i = 0; i < n; i++) {
        loops.push(this.#worker(signal, () => this.#processNextVolumeAttachment(signal, lane)));
      }
    }
    const reconciler = this.#deps.reconciler;
    if (reconciler !== undefined) loops.push(this.#reconcileLoop(reconciler, signal, firstPass));
    await Promise.all(loops);
    this.#idleTimer?.cancel();
    this.#idleTimer = undefined;
    this.#log.info("Shutting down CSI attacher");
  }

  /**
   * Notes a processed key for {@link ControllerDeps.whenIdle}. One timer at a time: a key only
   * notes the time, and the timer, when it fires before the workers have been idle for
   * {@link IDLE_AFTER_MS}, waits for the rest (a timer per key cost a timer object and its
   * cancellation per attach).
   */
  #noteActivity(): void {
    if (this.#deps.whenIdle === undefined) return;
    this.#lastActivity = this.#clock.now();
    if (this.#idleTimer === undefined) this.#armIdleTimer(IDLE_AFTER_MS);
  }

  #armIdleTimer(ms: number): void {
    this.#idleTimer = this.#clock.setTimer(ms, () => {
      this.#idleTimer = undefined;
      const left = this.#lastActivity + IDLE_AFTER_MS - this.#clock.now();
      if (left > 0) {
        this.#armIdleTimer(left);
        return;
      }
      const { vaQueue, pvQueue } = this.#deps;
      if (vaQueue.shuttingDown() || vaQueue.len() > 0 || pvQueue.len() > 0) return;
      this.#deps.whenIdle?.();
    });
  }

  /**
   * Runs `step` until `signal` aborts, checking it before each key, as the Go attacher's
   * workers run under `wait.Until(..., ctx.Done())`: after a stop no worker takes another key,
   * even though the queue would still hand out the keys it holds (client-go's queue `Get`
   * drains after `ShutDown`). Those keys are simply the next leader's work.
   */
  async #worker(signal: AbortSignal, step: () => Promise<boolean>): Promise<void> {
    while (!signal.aborted && await step()) {
      // keep going until stopped or the queue shuts down
    }
  }

  /**
   * The reconcile passes. The first waits until the VolumeAttachments queued at the sync are
   * handed out and synced (at most one period): beyond the Go attacher, whose first pass runs at
   * once (`wait.UntilWithContext` in `controller.go` `Run`), so that a new leader's first
   * attaches do not share the driver and this process with a ListVolumes pass over every volume
   * (measured with the example driver at 20 000 volumes: the VA created at the takeover took
   * 350 ms from "Attaching" to "Attached" beside the pass, instead of a few ms).
   */
  async #reconcileLoop(
    reconciler: Reconciler,
    signal: AbortSignal,
    firstPass: Promise<void>,
  ): Promise<void> {
    await firstPass;
    while (!signal.aborted) {
      try {
        await reconciler.reconcile(signal);
      } catch (err) {
        this.#log.error(err, "Failed to reconcile volume attachments");
      }
      // A pass over many VAs leaves garbage as a burst does (its answer, the snapshot of the
      // cache): the workers' idle collection follows it too.
      this.#noteActivity();
      try {
        await this.#clock.sleep(this.#opts.reconcileSyncMs, signal);
      } catch {
        return; // aborted
      }
    }
  }
}

/**
 * Applies a sync's outcome to its key: client-go's `Forget` or `AddRateLimited`, or nothing for a
 * `stopped` sync: the attacher is stopping (the sync ended before it called the driver), or the
 * lease fence closed before its next write or driver call, possibly after a driver call whose
 * result it then did not write. The key is the next leader's work.
 */
function applyOutcome(queue: RateLimitingQueue, key: string, outcome: SyncOutcome): void {
  if (outcome === "retry") queue.addRateLimited(key);
  else if (outcome === "done") queue.forget(key);
}
