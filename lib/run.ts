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
import {
  ATTACH_LANE,
  AttachController,
  DETACH_LANE,
  volumeAttachmentLanes,
} from "./controller/controller.ts";
import type { CsiClient } from "./csi/api.ts";
import type { CsiCallInfo } from "./csi/client.ts";
import { connect, getCapabilities, getDriverName, probeForever } from "./csi/connection.ts";
import { CsiHandler } from "./controller/csi_handler.ts";
import { EventRecorder } from "./events/recorder.ts";
import { OperationLatency } from "./controller/operation_latency.ts";
import { pendingVolumeAttachments } from "./controller/pending.ts";
import { BacklogReporter } from "./controller/backlog.ts";
import type { Handler } from "./controller/handler.ts";
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

/** Collaborators of {@link runAttacher}. */
export interface AttacherDeps {
  log: Logger;
  env: AttacherEnv;
  /**
   * Builds the API client (for the controller, and a second one for leader election). A client
   * that can report its requests and retries passes them to `observer`, which counts them in
   * the metrics.
   */
  kube: (observer?: KubeRequestObserver) => KubeApi;
  clock?: Clock;
  /** Stops the attacher: workers finish what they are doing, then `runAttacher` resolves. */
  signal: AbortSignal;
  /** Told when the diagnostics server listens (tests use port 0). */
  onHttpListening?: (port: number) => void;
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

/** The driver name, handler and CSI client chosen at startup. */
interface DriverSetup {
  driverName: string;
  handler: Handler;
  reconcile: boolean;
  csi?: CsiClient;
  /** Times attaches and detaches end to end (CSI handler only). */
  latency?: OperationLatency;
  /** Posts the CSI handler's Events while the controller runs. */
  events?: EventRecorder;
}

/** `source.component` of the Events on VolumeAttachments. */
export const EVENT_COMPONENT = "csi-attacher";

async function setUpDriver(
  options: Options,
  deps: AttacherDeps,
  kube: KubeApi,
  metrics: MetricsHolder,
): Promise<DriverSetup> {
  const { log, env } = deps;
  const clock = deps.clock ?? realClock;
  if (options.dummy) {
    log.info("Running in dummy mode: no CSI driver", { driver: DUMMY_DRIVER_NAME });
    return {
      driverName: DUMMY_DRIVER_NAME,
      handler: new TrivialHandler({ kube, log }),
      reconcile: false,
    };
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
      return { driverName, handler: new TrivialHandler({ kube, log }), reconcile: false, csi };
    }
    const latency = new OperationLatency({
      clock,
      sink: {
        observeAttachDuration: (seconds) => metrics.current.observeAttachDuration(seconds),
        observeDetachDuration: (seconds) => metrics.current.observeDetachDuration(seconds),
      },
    });
    // Events get an API client of their own, so their requests never take the rate-limiter
    // tokens of attach and detach.
    const events = new EventRecorder({ kube: deps.kube(metrics.kube), clock, log }, {
      component: EVENT_COMPONENT,
      host: leaderIdentity(env.hostname()),
    });
    const handler = new CsiHandler({ kube, csi, log, clock, latency, events }, {
      driverName,
      timeoutMs: options.timeoutMs,
      supportsPublishReadOnly: caps.publishReadonly,
      supportsSingleNodeMultiWriter: caps.singleNodeMultiWriter,
      defaultFsType: options.defaultFsType,
      attachErrorCodes: options.featureGates.MutableCSINodeAllocatableCount,
      maxEntries: options.maxEntries,
    });
    return { driverName, handler, reconcile: caps.reconcile, csi, latency, events };
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
  const kube = deps.kube(metrics.kube);
  const setup = await setUpDriver(options, deps, kube, metrics);
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
      log,
    }).catch((err) => {
      setup.csi?.close();
      throw err;
    })
    : undefined;
  if (http) deps.onHttpListening?.(http.port);
  try {
    const work = (signal: AbortSignal) =>
      runController({
        options,
        log: deps.log,
        clock,
        setup,
        kube,
        metrics: metrics.current,
        signal,
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
      kube: deps.kube(metrics.kube),
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
  /** The API client of the informers. */
  kube: KubeApi;
  metrics: Metrics;
  /** Aborts when the attacher stops or loses the lease. */
  signal: AbortSignal;
  /** Called once the VolumeAttachment and PersistentVolume caches have synced. */
  onReady: () => void;
}

/** Runs the informers and the controller until `signal` aborts and the work in flight is done. */
async function runController(run: ControllerRun): Promise<void> {
  const { options, log, clock, setup, kube, metrics, signal, onReady } = run;
  const informerDeps = { api: kube, clock, log };
  const vaInformer = new Informer<VolumeAttachment>(informerDeps, {
    resource: VOLUME_ATTACHMENTS,
    resyncMs: options.resyncMs,
    name: "volumeattachments",
    transform: cachedVolumeAttachment,
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
  // Attaches and detaches have their own workers (beyond the Go attacher; README "Scheduling").
  const vaQueue = queue("csi-attacher-va", volumeAttachmentLanes(vaInformer));
  const pvQueue = queue("csi-attacher-pv");
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    csiNodeStore: csiNodeInformer,
    vaQueue,
    pvQueue,
    handler: setup.handler,
    log,
    clock,
    latency: setup.latency,
  }, {
    driverName: setup.driverName,
    workers: options.workerThreads,
    laneWorkers: {
      [ATTACH_LANE]: options.attachWorkerThreads,
      [DETACH_LANE]: options.detachWorkerThreads,
    },
    reconcile: setup.reconcile,
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
      setup.events?.run(signal),
    ]);
  } finally {
    metrics.setPendingSource(undefined);
  }
}
