/**
 * The one place that builds the attacher's controller for a driver: the informers and the
 * transforms of their caches, the work queues, the per-VolumeAttachment memory, the handler the
 * driver calls for, the ListVolumes reconciler and the lease fence every act asks. The start-up
 * (`lib/run.ts`), the scenario harness and the chaos simulation build it here, so what the tests
 * run is what ships; they differ only in what they hand in: the API client, the driver's client,
 * the clock, where the informers come from ({@link InformerSource}) and the fence.
 *
 * The Go attacher builds the same pieces in `cmd/csi-attacher/main.go` (`NewCSIAttachController`
 * with its informers, `NewCSIHandler` or `NewTrivialHandler`).
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { COMPONENT_NAME } from "../component.ts";
import type { CsiClient } from "../csi/api.ts";
import type { DriverCapabilities } from "../csi/connection.ts";
import type { EventSink } from "../events/recorder.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, type Resource, VOLUME_ATTACHMENTS } from "../kube/api.ts";
import type { KubeApi } from "../kube/api.ts";
import { Informer, type InformerDeps } from "../kube/informer.ts";
import type { ObjectStore } from "../kube/store.ts";
import type { CsiNode, KubeObject, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import type { LeaseFence } from "../lease_fence.ts";
import type { Logger } from "../observe/logger.ts";
import type { QueueMetricsProvider } from "../workqueue/metrics.ts";
import { ItemExponentialFailureRateLimiter } from "../workqueue/rate_limiters.ts";
import { LanedWorkQueue } from "../workqueue/lanes.ts";
import type { QueueLanes } from "../workqueue/lanes.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { CacheFields } from "./cache_fields.ts";
import { AttachController, type InformerLike } from "./controller.ts";
import { CsiHandler, type CsiHandlerOptions } from "./csi_handler.ts";
import type { Handler, HandlerStores } from "./handler.ts";
import { ATTACH_LANE, DETACH_LANE, volumeAttachmentLanes } from "./lanes.ts";
import { DUMMY_DRIVER_NAME } from "./names.ts";
import { OperationLatency, type OperationLatencySink } from "./operation_latency.ts";
import { ListVolumesReconciler, type ListVolumesReconcilerOptions } from "./reconciler.ts";
import { TrivialHandler } from "./trivial_handler.ts";

/** The VolumeAttachment queue's name (its metrics' `name` label). */
export const VA_QUEUE_NAME = `${COMPONENT_NAME}-va`;
/** The PersistentVolume queue's name. */
export const PV_QUEUE_NAME = `${COMPONENT_NAME}-pv`;

/** One informer of the controller: what it caches, its name in logs, and what it keeps. */
export interface InformerSpec<T> {
  resource: Resource;
  /** e.g. `volumeattachments`. */
  name: string;
  /** `--resync`. */
  resyncMs: number;
  /** What the cache keeps of each object (`./cache_fields.ts`). */
  transform: (obj: T) => T;
}

/** An informer the controller reads and is told by, and that its owner runs. */
export interface RunnableInformer<T> extends InformerLike<T> {
  /** Lists and watches until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
}

/**
 * Where the controller's informers come from: the shipped one ({@link apiInformers}) lists and
 * watches through the API; the scenario harness hands in caches it fills by hand.
 */
export type InformerSource = <T extends KubeObject>(spec: InformerSpec<T>) => RunnableInformer<T>;

/**
 * The informers of the attacher: `kube`'s list and watch on `deps.clock`, each streaming its
 * initial list when `watchList` (a server that serves watch lists; the informer falls back to a
 * LIST otherwise), `onListedObject` called for each object listed (`lib/heap.ts`).
 */
export function apiInformers(
  deps: InformerDeps,
  opts: { watchList: boolean; onListedObject?: () => void },
): InformerSource {
  return <T extends KubeObject>(spec: InformerSpec<T>) =>
    new Informer<T>(deps, {
      resource: spec.resource,
      resyncMs: spec.resyncMs,
      name: spec.name,
      transform: spec.transform,
      watchList: opts.watchList,
      onListedObject: opts.onListedObject,
    });
}

/**
 * The handler the driver calls for:
 * - `csi`: a driver with ControllerPublishVolume: the CSI handler, and the ListVolumes
 *   reconciler when the driver lists published volumes;
 * - `trivial`: a driver without it: every VolumeAttachment of the driver is marked attached;
 * - `dummy` (`--dummy`): no driver at all: the trivial handler under the name `csi/dummy`.
 */
export type DriverHandling =
  | {
    kind: "csi";
    driverName: string;
    csi: CsiClient;
    capabilities: Pick<
      DriverCapabilities,
      "publishReadonly" | "singleNodeMultiWriter" | "reconcile"
    >;
  }
  | { kind: "trivial"; driverName: string }
  | { kind: "dummy" };

/** `--dummy`: no driver. */
export const DUMMY_DRIVER: DriverHandling = Object.freeze({ kind: "dummy" });

/** The driver name the controller works for: the driver's own, or `csi/dummy`. */
export function handledDriverName(driver: DriverHandling): string {
  return driver.kind === "dummy" ? DUMMY_DRIVER_NAME : driver.driverName;
}

/** What the controller is built with. */
export interface ControllerBuildDeps {
  /** The API client of the handler's writes. */
  kube: KubeApi;
  /**
   * Where the informers come from, or the informers themselves, already made by
   * {@link buildControllerInformers} for this driver (a warm standby's, `lib/run.ts`, running
   * before the term that builds the controller).
   */
  informers: InformerSource | ControllerInformers;
  log: Logger;
  clock: Clock;
  /**
   * The lease fence of the term (`LeaderElector`'s `onStartedLeading`), or `SOLE_REPLICA`
   * without leader election: asked before every write and driver call of the handler and the
   * reconciler. Required: nothing is built unfenced by omission.
   */
  fence: LeaseFence;
  /** Events on VolumeAttachments (the CSI handler's); none if unset. */
  events?: EventSink;
  /** The queues' metrics and the attach and detach durations; none if unset. */
  metrics?: { readonly queueMetricsProvider: QueueMetricsProvider } & OperationLatencySink;
  /** See `ControllerDeps.afterSync`. */
  afterSync?: () => void;
  /** See `ControllerDeps.whenIdle`. */
  whenIdle?: () => void;
  /**
   * A handler of the caller's own in place of the one the driver calls for, given the caches and
   * the memory it shares with the controller (the scenario harness's deliberately broken
   * handlers, which show that its invariant checks fire); the reconciler stays the driver's.
   */
  ownHandler?: (made: { stores: HandlerStores; memory: AttachmentMemory }) => Handler;
}

/** The settings of the controller's pieces (the start-up's `ControllerSettings` and `--timeout`). */
export interface ControllerBuildSettings {
  /** `--resync`: the informers' resync period. */
  resyncMs: number;
  /** `--retry-interval-start` and `--retry-interval-max`: each queue's per-item backoff. */
  retry: { baseMs: number; maxMs: number };
  /** `--worker-threads`: the PersistentVolume workers. */
  workers: number;
  /** The VolumeAttachment workers of the attach lane. */
  attachWorkers: number;
  /** The VolumeAttachment workers of the detach lane. */
  detachWorkers: number;
  /** `--reconcile-sync`. */
  reconcileSyncMs: number;
  handler: Pick<CsiHandlerOptions, "defaultFsType" | "attachErrorCodes">;
  reconciler: Pick<ListVolumesReconcilerOptions, "timeoutMs" | "maxEntries">;
  /** `--timeout`: the bound of each publish and unpublish. */
  callTimeoutMs: number;
}

/** The caches the controller and its handler read, and that their owner runs. */
export interface ControllerInformers extends HandlerStores {
  volumeAttachments: RunnableInformer<VolumeAttachment>;
  persistentVolumes: RunnableInformer<PersistentVolume>;
  csiNodes: RunnableInformer<CsiNode>;
}

/** What {@link buildController} made. */
export interface BuiltController {
  readonly driverName: string;
  readonly informers: ControllerInformers;
  /** With the attach and detach lanes (`./lanes.ts`). */
  readonly vaQueue: LanedWorkQueue;
  readonly pvQueue: LanedWorkQueue;
  /** What is kept per VolumeAttachment, shared by the controller, handler and reconciler. */
  readonly memory: AttachmentMemory;
  readonly handler: Handler;
  /** Only for a driver that lists published volumes. */
  readonly reconciler: ListVolumesReconciler | undefined;
  readonly controller: AttachController;
}

/** Builds the controller of `driver`; nothing runs until its owner runs the informers and it. */
export function buildController(
  deps: ControllerBuildDeps,
  settings: ControllerBuildSettings,
  driver: DriverHandling,
): BuiltController {
  const driverName = handledDriverName(driver);
  const controllerSettings = settings;
  const informers = typeof deps.informers === "function"
    ? buildControllerInformers(deps.informers, controllerSettings.resyncMs, driverName)
    : deps.informers;
  // Attaches and detaches have their own workers (beyond the Go attacher; ARCHITECTURE.md
  // "Scheduling").
  const queue = (name: string, lanes?: QueueLanes) =>
    workQueue(
      { clock: deps.clock, metricsProvider: deps.metrics?.queueMetricsProvider },
      { name, retry: controllerSettings.retry, lanes },
    );
  const vaQueue = queue(VA_QUEUE_NAME, volumeAttachmentLanes(informers.volumeAttachments));
  const pvQueue = queue(PV_QUEUE_NAME);
  const built = buildHandler(deps, settings, driver, informers, vaQueue);
  const { memory, reconciler } = built;
  const handler = deps.ownHandler?.({ stores: informers, memory }) ?? built.handler;
  const controller = new AttachController({
    vaInformer: informers.volumeAttachments,
    pvInformer: informers.persistentVolumes,
    vaQueue,
    pvQueue,
    handler,
    memory,
    reconciler,
    log: deps.log,
    clock: deps.clock,
    afterSync: deps.afterSync,
    whenIdle: deps.whenIdle,
  }, {
    driverName,
    workers: controllerSettings.workers,
    laneWorkers: {
      [ATTACH_LANE]: controllerSettings.attachWorkers,
      [DETACH_LANE]: controllerSettings.detachWorkers,
    },
    reconcileSyncMs: controllerSettings.reconcileSyncMs,
  });
  return { driverName, informers, vaQueue, pvQueue, memory, handler, reconciler, controller };
}

/**
 * One of the controller's work queues: rate-limited with the per-item exponential backoff of
 * `--retry-interval-start` and `--retry-interval-max` (client-go's
 * `NewTypedItemExponentialFailureRateLimiter`), with `lanes` when given. Also what the controller's
 * unit tests build their queues with.
 */
export function workQueue(
  deps: { clock: Clock; metricsProvider?: QueueMetricsProvider },
  opts: { name: string; retry: { baseMs: number; maxMs: number }; lanes?: QueueLanes },
): LanedWorkQueue {
  return new LanedWorkQueue({
    clock: deps.clock,
    metricsProvider: deps.metricsProvider,
    rateLimiter: new ItemExponentialFailureRateLimiter(opts.retry),
  }, { name: opts.name, lanes: opts.lanes });
}

/**
 * The informers of VolumeAttachments, PersistentVolumes and the driver's CSINodes, their caches
 * keeping only what the attacher reads (`./cache_fields.ts`), in pools of this controller's own.
 * {@link buildController} makes them unless it is handed them made.
 */
export function buildControllerInformers(
  source: InformerSource,
  resyncMs: number,
  driverName: string,
): ControllerInformers {
  const fields = new CacheFields();
  // A new version of a cached object keeps what it shares with the version it replaces; the
  // caches are looked up once made (a cache filled as it is made has no previous versions).
  const made: {
    pvs?: ObjectStore<PersistentVolume>;
    vas?: ObjectStore<VolumeAttachment>;
  } = {};
  const persistentVolumes = source<PersistentVolume>({
    resource: PERSISTENT_VOLUMES,
    name: "persistentvolumes",
    resyncMs,
    transform: (pv) => fields.persistentVolume(pv, made.pvs),
  });
  made.pvs = persistentVolumes;
  const volumeAttachments = source<VolumeAttachment>({
    resource: VOLUME_ATTACHMENTS,
    name: "volumeattachments",
    resyncMs,
    // The PV name a VA names is the cached PV's own string.
    transform: (va) => fields.volumeAttachment(va, persistentVolumes, made.vas),
  });
  made.vas = volumeAttachments;
  const csiNodes = source<CsiNode>({
    resource: CSI_NODES,
    name: "csinodes",
    resyncMs,
    transform: fields.csiNode(driverName),
  });
  return { volumeAttachments, persistentVolumes, csiNodes };
}

/**
 * The handler `driver` calls for, with the per-VolumeAttachment memory it shares with the
 * controller, and the ListVolumes reconciler when the driver can list published volumes.
 */
function buildHandler(
  deps: ControllerBuildDeps,
  settings: ControllerBuildSettings,
  driver: DriverHandling,
  stores: HandlerStores,
  vaQueue: LanedWorkQueue,
): { handler: Handler; memory: AttachmentMemory; reconciler?: ListVolumesReconciler } {
  const { kube, log, clock, fence, events, metrics } = deps;
  if (driver.kind !== "csi") {
    return {
      handler: new TrivialHandler({ kube, log, fence }),
      memory: new AttachmentMemory({ backoff: vaQueue }),
    };
  }
  const { csi, capabilities: caps, driverName } = driver;
  const latency = metrics === undefined
    ? undefined
    : new OperationLatency({ clock, sink: metrics });
  const memory = new AttachmentMemory({ backoff: vaQueue, latency });
  const { handler: handlerSettings, reconciler: reconcilerSettings } = settings;
  const handler = new CsiHandler({ kube, csi, log, clock, stores, memory, events, fence }, {
    ...handlerSettings,
    driverName,
    timeoutMs: settings.callTimeoutMs,
    supportsPublishReadOnly: caps.publishReadonly,
    supportsSingleNodeMultiWriter: caps.singleNodeMultiWriter,
  });
  const reconciler = caps.reconcile
    ? new ListVolumesReconciler({ csi, log, clock, stores, memory, queue: vaQueue, fence }, {
      ...reconcilerSettings,
      driverName,
    })
    : undefined;
  return { handler, memory, reconciler };
}
