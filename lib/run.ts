/**
 * The attacher's startup sequence (external-attacher `cmd/csi-attacher/main.go`): connect to the driver, learn its name and
 * capabilities, pick a handler, then run the informers and the controller until stopped.
 *
 * Everything the process environment provides (files, environment variables, exit) comes in
 * through {@link AttacherEnv}, so tests and the sandbox run the same code in-process.
 *
 * @module
 */

import type { Clock } from "./clock.ts";
import { realClock } from "./clock.ts";
import { AttachController } from "./controller/controller.ts";
import { ATTACH_LANE, DETACH_LANE, volumeAttachmentLanes } from "./controller/lanes.ts";
import type { CsiClient } from "./csi/api.ts";
import type { CsiCallInfo } from "./csi/client.ts";
import {
  connect,
  type DriverCapabilities,
  getCapabilities,
  getDriverName,
  probeForever,
} from "./csi/connection.ts";
import { CsiHandler } from "./controller/csi_handler.ts";
import { EventRecorder } from "./events/recorder.ts";
import { OperationLatency } from "./controller/operation_latency.ts";
import { AttachmentMemory } from "./controller/attachment_memory.ts";
import { ListVolumesReconciler } from "./controller/reconciler.ts";
import { pendingVolumeAttachments } from "./controller/pending.ts";
import { BacklogReporter } from "./controller/backlog.ts";
import type { Handler, HandlerStores } from "./controller/handler.ts";
import { Informer } from "./kube/informer.ts";
import {
  cachedCsiNode,
  cachedPersistentVolume,
  cachedVolumeAttachment,
} from "./controller/cache_fields.ts";
import type { KubeApi } from "./kube/api.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "./kube/api.ts";
import type { Logger } from "./observe/logger.ts";
import { DUMMY_DRIVER_NAME } from "./controller/names.ts";
import type { Options } from "./cli/options.ts";
import { TrivialHandler } from "./controller/trivial_handler.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "./kube/types.ts";
import { startHttpServer } from "./observe/http_server.ts";
import { LeaderElector } from "./leaderelection/elector.ts";
import { leaderElectionNamespace, leaderIdentity } from "./leaderelection/config.ts";
import { raceAbort } from "./abort.ts";
import { type LeaseFence, UNFENCED } from "./lease_fence.ts";
import { heapReclaimer } from "./heap.ts";
import {
  type ApiLatencyObservation,
  type ApiRequestObservation,
  createMetrics,
  type Metrics,
} from "./observe/metrics.ts";
import { MIGRATION_DRIVER_NAMES } from "./controller/migration.ts";
import { leaseName } from "./controller/names.ts";
import { ItemExponentialFailureRateLimiter } from "./workqueue/rate_limiters.ts";
import { RateLimitingWorkQueue } from "./workqueue/rate_limiting_queue.ts";
import type { QueueLanes } from "./workqueue/queue.ts";
import { VERSION } from "./version.ts";

/** The message written to the termination log when the driver connection is lost. */
export const CONNECTION_LOST_MESSAGE = "Lost connection to CSI driver, exiting";

/** What the process provides. */
export interface AttacherEnv {
  /** Ends the process (or the test) with `code`; used for connection loss and lost leadership. */
  exit(code: number): void;
  /** Writes the termination message (`/dev/termination-log`) when possible. */
  writeTerminationMessage(message: string): void;
  /** The host name, the leader-election identity. */
  hostname(): string;
  /** `POD_NAMESPACE`, for the lease namespace. */
  podNamespace?: string;
  /** Reads the service account's namespace file, for the lease namespace. */
  readServiceAccountNamespace?(): string | undefined;
}

/** An API client that {@link runAttacher} owns: it closes it before it returns. */
export interface OwnedKubeApi extends KubeApi {
  /** Ends the client's requests and watches and frees its connections. */
  close(): void | Promise<void>;
}

/** Collaborators of {@link runAttacher}. */
export interface AttacherDeps {
  log: Logger;
  env: AttacherEnv;
  /**
   * Builds an API client: one for the informers and the handler, one for Events and, with
   * leader election, one for the Lease, each with a rate limiter of its own. A client that can
   * report its requests and retries passes them to `observer`, which counts them in the
   * metrics. runAttacher closes every client it built before it returns or throws.
   */
  kube: (observer?: KubeRequestObserver) => OwnedKubeApi;
  clock?: Clock;
  /** Stops the attacher: workers finish what they are doing, then `runAttacher` resolves. */
  signal: AbortSignal;
  /** Told when the caches have synced and the workers run. */
  onReady?: () => void;
}

/** What an API client reports about its requests (see {@link AttacherDeps.kube}). */
export interface KubeRequestObserver {
  onRequest(info: ApiRequestObservation): void;
  onRetry(info: ApiRequestObservation): void;
  /** One request's whole duration, retries included. */
  onRequestLatency(info: ApiLatencyObservation): void;
  /** One wait for the client's rate limiter. */
  onRateLimiterWait(info: ApiLatencyObservation): void;
}

/** Metrics that can be swapped once the driver name is known (CSI migration adds a label). */
class MetricsHolder {
  current: Metrics = createMetrics({});
  observe = (info: CsiCallInfo) => this.current.observeCsiCall(info);
  kube: KubeRequestObserver = {
    onRequest: (info) => this.current.observeApiRequest(info),
    onRetry: (info) => this.current.observeApiRetry(info),
    onRequestLatency: (info) => this.current.observeApiRequestDuration(info),
    onRateLimiterWait: (info) => this.current.observeRateLimiterWait(info),
  };
}

/** The driver learnt at startup: its name, its client and whether it publishes volumes. */
interface DriverSetup {
  driverName: string;
  /** The driver's client; none in dummy mode. */
  csi?: CsiClient;
  /**
   * The capabilities of a driver with ControllerPublishVolume (the CSI handler); undefined
   * selects the trivial handler.
   */
  publishing?: DriverCapabilities;
}

/** `source.component` of the Events on VolumeAttachments. */
export const EVENT_COMPONENT = "csi-attacher";

/**
 * How long, at most, the attacher waits at exit for the Events still queued (the leader's
 * "stopped leading" among them) to be posted: the leader election's renew deadline, the bound
 * each of its own requests has.
 */
function eventDrainMs(options: Options): number {
  return options.leaderElectionRenewDeadlineMs;
}

async function setUpDriver(
  options: Options,
  deps: AttacherDeps,
  metrics: MetricsHolder,
): Promise<DriverSetup> {
  const { log, env } = deps;
  const clock = deps.clock ?? realClock;
  if (options.dummy) {
    log.info("Running in dummy mode: no CSI driver", { driver: DUMMY_DRIVER_NAME });
    return { driverName: DUMMY_DRIVER_NAME };
  }
  const csi = await connect(options.csiAddress, {
    log,
    clock,
    maxGrpcLogLength: options.maxGrpcLogLength,
    onCall: metrics.observe,
    onConnectionLoss: () => {
      env.writeTerminationMessage(CONNECTION_LOST_MESSAGE);
      log.error(new Error("connection lost"), CONNECTION_LOST_MESSAGE);
      env.exit(1);
    },
  });
  try {
    await probeForever(csi, { timeoutMs: options.timeoutMs, clock, log, signal: deps.signal });
    const driverName = await getDriverName(csi);
    log.info("CSI driver name", { driver: driverName });
    if (MIGRATION_DRIVER_NAMES.has(driverName)) {
      metrics.current = createMetrics({ driverName, migrated: true });
    }
    const caps = await getCapabilities(csi, clock);
    if (!caps.controllerService || !caps.publishUnpublish) {
      log.info("CSI driver does not support ControllerPublishUnpublish, using trivial handler", {
        driver: driverName,
      });
      return { driverName, csi };
    }
    return { driverName, csi, publishing: caps };
  } catch (err) {
    csi.close();
    throw err;
  }
}

/**
 * Runs the attacher until `deps.signal` aborts, then waits for the work in flight.
 *
 * @throws {Error} for fatal startup failures (driver unreachable, probe failed, no name, the
 *   HTTP endpoint cannot listen); the caller logs them and exits 1.
 */
export async function runAttacher(options: Options, deps: AttacherDeps): Promise<void> {
  const { log } = deps;
  const clock = deps.clock ?? realClock;
  const metrics = new MetricsHolder();
  const clients = new OwnedClients(deps.kube);
  try {
    const kube = clients.create(metrics.kube);
    // The one Event path of the process (the CSI handler's and the leader elector's Events). It
    // has an API client of its own, so Events never take the rate-limiter tokens of attach and
    // detach; it runs until the end of runAttacher and then posts what is still queued.
    const events = new EventRecorder({ kube: clients.create(metrics.kube), clock, log }, {
      component: EVENT_COMPONENT,
      host: leaderIdentity(deps.env.hostname()),
    });
    const stopEvents = new AbortController();
    const posting = events.run(stopEvents.signal);
    try {
      await runWithEvents(options, deps, { clock, metrics, clients, kube, events });
    } finally {
      const drain = clock.setTimer(eventDrainMs(options), () => stopEvents.abort());
      await raceAbort(events.idle(), stopEvents.signal);
      drain.cancel();
      stopEvents.abort();
      await posting;
    }
  } finally {
    await clients.closeAll(log);
  }
}

/** The API clients {@link runAttacher} builds; it closes all of them on every way out. */
class OwnedClients {
  #make: (observer?: KubeRequestObserver) => OwnedKubeApi;
  #clients: OwnedKubeApi[] = [];

  constructor(make: (observer?: KubeRequestObserver) => OwnedKubeApi) {
    this.#make = make;
  }

  /** A new client, remembered for {@link closeAll}. */
  create(observer: KubeRequestObserver): OwnedKubeApi {
    const client = this.#make(observer);
    this.#clients.push(client);
    return client;
  }

  /** Closes every client built so far; a failure to close one is logged, not thrown. */
  async closeAll(log: Logger): Promise<void> {
    for (const client of this.#clients.splice(0)) {
      try {
        await client.close();
      } catch (err) {
        log.error(err, "Failed to close an API client");
      }
    }
  }
}

/** What {@link runAttacher} has built before the driver is set up. */
interface AttacherParts {
  clock: Clock;
  metrics: MetricsHolder;
  /** Where further API clients come from (the Lease's). */
  clients: OwnedClients;
  /** The API client of the informers and the handler. */
  kube: KubeApi;
  events: EventRecorder;
}

/** runAttacher once the Event path runs: driver setup, diagnostics server, election, work. */
async function runWithEvents(
  options: Options,
  deps: AttacherDeps,
  parts: AttacherParts,
): Promise<void> {
  const { log } = deps;
  const { clock, metrics, clients, kube, events } = parts;
  const setup = await setUpDriver(options, deps, metrics);
  const { driverName } = setup;
  metrics.current.setDriverName(driverName);
  let elector: LeaderElector | undefined;
  let ready = false;
  const address = options.httpEndpoint || options.metricsAddress;
  const http = address
    ? await startHttpServer({
      address,
      metricsPath: options.metricsPath,
      metrics: metrics.current,
      leaderHealth: options.leaderElection && options.httpEndpoint
        ? () => elector?.healthCheck()
        : undefined,
      ready: () => ready,
      zpages: {
        component: "csi-attacher",
        binaryVersion: VERSION,
        runtimeVersion: `deno ${Deno.version.deno} (V8 ${Deno.version.v8}, TypeScript ` +
          `${Deno.version.typescript})`,
        startTimeMs: clock.wallNow() - clock.now(),
        uptimeMs: () => clock.now(),
        flags: options.flagValues,
      },
      log,
    }).catch((err) => {
      setup.csi?.close();
      throw err;
    })
    : undefined;
  try {
    const work = (signal: AbortSignal) =>
      runController({
        options,
        log: deps.log,
        clock,
        setup,
        kube,
        events,
        metrics: metrics.current,
        signal,
        // Read when the term starts: the elector exists by then.
        fence: elector?.fence ?? UNFENCED,
        onReady: () => {
          ready = true;
          deps.onReady?.();
        },
      });
    if (!options.leaderElection) {
      await work(deps.signal);
      return;
    }
    const identity = leaderIdentity(deps.env.hostname());
    elector = new LeaderElector({
      kube: clients.create(metrics.kube),
      events,
      clock,
      log,
      metrics: metrics.current,
    }, {
      name: leaseName(driverName),
      namespace: leaderElectionNamespace({
        flag: options.leaderElectionNamespace,
        podNamespaceEnv: deps.env.podNamespace,
        readServiceAccountNamespace: deps.env.readServiceAccountNamespace,
      }),
      identity,
      leaseDurationMs: options.leaderElectionLeaseDurationMs,
      renewDeadlineMs: options.leaderElectionRenewDeadlineMs,
      retryPeriodMs: options.leaderElectionRetryPeriodMs,
      labels: options.leaderElectionLabels,
      releaseOnCancel: options.featureGates.ReleaseLeaderElectionOnExit,
    });
    await elector.run(deps.signal, {
      onStartedLeading: (leaderSignal) => work(leaderSignal),
      onStoppedLeading: () => {
        log.error(new Error("leader election lost"), "Stopped leading", { identity });
        deps.env.exit(1);
      },
      onNewLeader: (leader) => log.info("New leader elected", { identity: leader }),
    });
  } finally {
    await http?.close();
    setup.csi?.close();
  }
}

/** What {@link runController} runs with. */
interface ControllerRun {
  options: Options;
  log: Logger;
  clock: Clock;
  /** The driver's name and the handler chosen for it. */
  setup: DriverSetup;
  /** The API client of the informers and the handler. */
  kube: KubeApi;
  /** The process's Event path. */
  events: EventRecorder;
  metrics: Metrics;
  /** Aborts when the attacher stops or loses the lease. */
  signal: AbortSignal;
  /** The lease fence of the term (UNFENCED without leader election), asked before each act. */
  fence: LeaseFence;
  /** Called once the VolumeAttachment and PersistentVolume caches have synced. */
  onReady: () => void;
}

/** Runs the informers and the controller until `signal` aborts and the work in flight is done. */
async function runController(run: ControllerRun): Promise<void> {
  const { options, log, clock, setup, kube, metrics, signal, onReady } = run;
  const informerDeps = { kube, clock, log };
  const vaInformer = new Informer<VolumeAttachment>(informerDeps, {
    resource: VOLUME_ATTACHMENTS,
    resyncMs: options.resyncMs,
    name: "volumeattachments",
    // The PV name a VA names is the cached PV's own string (pvInformer is set by the time the
    // informer runs).
    transform: (va) => cachedVolumeAttachment(va, pvInformer),
    watchList: true,
  });
  const pvInformer = new Informer<PersistentVolume>(informerDeps, {
    resource: PERSISTENT_VOLUMES,
    resyncMs: options.resyncMs,
    name: "persistentvolumes",
    transform: cachedPersistentVolume,
    watchList: true,
  });
  const csiNodeInformer = new Informer<CsiNode>(informerDeps, {
    resource: CSI_NODES,
    resyncMs: options.resyncMs,
    name: "csinodes",
    transform: cachedCsiNode(setup.driverName),
    watchList: true,
  });
  const queue = (name: string, lanes?: QueueLanes) =>
    new RateLimitingWorkQueue({
      clock,
      metricsProvider: metrics.queueMetricsProvider,
      rateLimiter: new ItemExponentialFailureRateLimiter({
        baseMs: options.retryIntervalStartMs,
        maxMs: options.retryIntervalMaxMs,
      }),
    }, { name, lanes });
  // Attaches and detaches have their own workers (beyond the Go attacher; ARCHITECTURE.md
  // "Scheduling").
  const vaQueue = queue("csi-attacher-va", volumeAttachmentLanes(vaInformer));
  const pvQueue = queue("csi-attacher-pv");
  const stores: HandlerStores = {
    volumeAttachments: vaInformer,
    persistentVolumes: pvInformer,
    csiNodes: csiNodeInformer,
  };
  const { handler, memory, reconciler } = buildHandler({ ...run, stores, vaQueue });
  // The initial lists' garbage, then each burst's (lib/heap.ts).
  const reclaim = heapReclaimer();
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    vaQueue,
    pvQueue,
    handler,
    memory,
    reconciler,
    log,
    clock,
    afterSync: reclaim,
    whenIdle: reclaim,
  }, {
    driverName: setup.driverName,
    workers: options.workerThreads,
    laneWorkers: {
      [ATTACH_LANE]: options.attachWorkerThreads,
      [DETACH_LANE]: options.detachWorkerThreads,
    },
    reconcileSyncMs: options.reconcileSyncMs,
  });
  const informers = Promise.all([
    vaInformer.run(signal),
    pvInformer.run(signal),
    csiNodeInformer.run(signal),
  ]);
  const synced = Promise.all([vaInformer.waitForSync(signal), pvInformer.waitForSync(signal)])
    .then(onReady, () => {});
  // Beyond the Go attacher: the backlog as gauges and as a periodic log line.
  metrics.setPendingSource(() =>
    pendingVolumeAttachments(vaInformer.list(), {
      driverName: setup.driverName,
      nowMs: clock.wallNow(),
    })
  );
  const backlog = options.logBacklogIntervalMs > 0
    ? new BacklogReporter({ clock, log }, {
      queues: [{ name: vaQueue.name, queue: vaQueue }, { name: pvQueue.name, queue: pvQueue }],
      intervalMs: options.logBacklogIntervalMs,
    }).run(signal)
    : undefined;
  try {
    await Promise.all([
      controller.run(signal),
      informers,
      synced,
      backlog,
    ]);
  } finally {
    metrics.setPendingSource(undefined);
  }
}

/**
 * The handler the driver calls for, with the per-VolumeAttachment memory it shares with the
 * controller, and the ListVolumes reconciler when the driver can list published volumes.
 */
function buildHandler(
  run: ControllerRun & { stores: HandlerStores; vaQueue: RateLimitingWorkQueue },
): { handler: Handler; memory: AttachmentMemory; reconciler?: ListVolumesReconciler } {
  const { options, log, clock, setup, kube, events, metrics, stores, vaQueue, fence } = run;
  const caps = setup.publishing;
  if (setup.csi === undefined || caps === undefined) {
    return {
      handler: new TrivialHandler({ kube, log, fence }),
      memory: new AttachmentMemory({ backoff: vaQueue }),
    };
  }
  const latency = new OperationLatency({
    clock,
    sink: {
      observeAttachDuration: (seconds) => metrics.observeAttachDuration(seconds),
      observeDetachDuration: (seconds) => metrics.observeDetachDuration(seconds),
    },
  });
  const memory = new AttachmentMemory({ backoff: vaQueue, latency });
  const csi = setup.csi;
  const handler = new CsiHandler({ kube, csi, log, clock, stores, memory, events, fence }, {
    driverName: setup.driverName,
    timeoutMs: options.timeoutMs,
    supportsPublishReadOnly: caps.publishReadonly,
    supportsSingleNodeMultiWriter: caps.singleNodeMultiWriter,
    defaultFsType: options.defaultFsType,
    attachErrorCodes: options.featureGates.MutableCSINodeAllocatableCount,
  });
  const reconciler = caps.reconcile
    ? new ListVolumesReconciler({ csi, log, clock, stores, memory, queue: vaQueue, fence }, {
      driverName: setup.driverName,
      timeoutMs: options.reconcileTimeoutMs,
      maxEntries: options.maxEntries,
    })
    : undefined;
  return { handler, memory, reconciler };
}
