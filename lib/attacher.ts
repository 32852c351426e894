/**
 * The attacher's startup sequence (REFERENCE §2.1): connect to the driver, learn its name and
 * capabilities, pick a handler, then run the informers and the controller until stopped.
 *
 * Everything the process environment provides (files, environment variables, exit) comes in
 * through {@link AttacherEnv}, so tests and the sandbox run the same code in-process.
 *
 * @module
 */

import type { Clock } from "./clock.ts";
import { realClock } from "./clock.ts";
import { AttachController } from "./controller.ts";
import type { CsiClient } from "./csi_api.ts";
import type { CsiCallInfo } from "./csi_client.ts";
import { connect, getCapabilities, getDriverName, probeForever } from "./csi_connection.ts";
import { CsiHandler } from "./csi_handler.ts";
import type { Handler } from "./handler.ts";
import { Informer } from "./informer.ts";
import type { KubeApi } from "./kube_api.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "./kube_api.ts";
import type { Logger } from "./logger.ts";
import { DUMMY_DRIVER_NAME } from "./names.ts";
import type { Options } from "./options.ts";
import { TrivialHandler } from "./trivial_handler.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "./types.ts";
import type { QueueMetricsProvider } from "./workqueue/metrics.ts";
import { ItemExponentialFailureRateLimiter } from "./workqueue/rate_limiters.ts";
import { RateLimitingWorkQueue } from "./workqueue/rate_limiting_queue.ts";

/** The message written to the termination log when the driver connection is lost. */
export const CONNECTION_LOST_MESSAGE = "Lost connection to CSI driver, exiting";

/** What the process provides. */
export interface AttacherEnv {
  /** Ends the process (or the test) with `code`; used for connection loss and lost leadership. */
  exit(code: number): void;
  /** Writes the termination message (`/dev/termination-log`) when possible. */
  writeTerminationMessage(message: string): void;
}

/** Collaborators of {@link runAttacher}. */
export interface AttacherDeps {
  log: Logger;
  env: AttacherEnv;
  /** Builds the API client (for the controller, and a second one for leader election). */
  kube: () => KubeApi;
  clock?: Clock;
  /** Stops the attacher: workers finish what they are doing, then `runAttacher` resolves. */
  signal: AbortSignal;
  /** Metrics of CSI calls. */
  onCsiCall?: (info: CsiCallInfo) => void;
  /** Metrics of the workqueues. */
  queueMetrics?: QueueMetricsProvider;
  /** Told the driver name once it is known. */
  onDriverName?: (name: string) => void;
  /** Told when the caches have synced and the workers run (for `/healthz`). */
  onReady?: () => void;
  /**
   * Runs `work` when this replica may act; without leader election that is at once. The
   * signal passed to `work` aborts when the replica must stop.
   */
  runAsLeader?: (driverName: string, work: (signal: AbortSignal) => Promise<void>) => Promise<void>;
}

/** The driver name, handler and CSI client chosen at startup. */
interface DriverSetup {
  driverName: string;
  handler: Handler;
  reconcile: boolean;
  csi?: CsiClient;
}

async function setUpDriver(
  options: Options,
  deps: AttacherDeps,
  kube: KubeApi,
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
    onCall: deps.onCsiCall,
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
    deps.onDriverName?.(driverName);
    const caps = await getCapabilities(csi, clock);
    if (!caps.controllerService || !caps.publishUnpublish) {
      log.info("CSI driver does not support ControllerPublishUnpublish, using trivial handler", {
        driver: driverName,
      });
      return { driverName, handler: new TrivialHandler({ kube, log }), reconcile: false, csi };
    }
    const handler = new CsiHandler({ kube, csi, log, clock }, {
      driverName,
      timeoutMs: options.timeoutMs,
      supportsPublishReadOnly: caps.publishReadonly,
      supportsSingleNodeMultiWriter: caps.singleNodeMultiWriter,
      defaultFsType: options.defaultFsType,
      attachErrorCodes: options.featureGates.MutableCSINodeAllocatableCount,
      maxEntries: options.maxEntries,
    });
    return { driverName, handler, reconcile: caps.reconcile, csi };
  } catch (err) {
    csi.close();
    throw err;
  }
}

/**
 * Runs the attacher until `deps.signal` aborts, then waits for the work in flight.
 *
 * @throws {Error} for fatal startup failures (driver unreachable, probe failed, no name); the
 *   caller logs them and exits 1.
 */
export async function runAttacher(options: Options, deps: AttacherDeps): Promise<void> {
  const { log } = deps;
  const clock = deps.clock ?? realClock;
  const kube = deps.kube();
  const setup = await setUpDriver(options, deps, kube);
  const { driverName, handler } = setup;
  try {
    const work = async (signal: AbortSignal) => {
      const informerDeps = { api: kube, clock, log };
      const vaInformer = new Informer<VolumeAttachment>(informerDeps, {
        resource: VOLUME_ATTACHMENTS,
        resyncMs: options.resyncMs,
        name: "volumeattachments",
      });
      const pvInformer = new Informer<PersistentVolume>(informerDeps, {
        resource: PERSISTENT_VOLUMES,
        resyncMs: options.resyncMs,
        name: "persistentvolumes",
      });
      const csiNodeInformer = new Informer<CsiNode>(informerDeps, {
        resource: CSI_NODES,
        resyncMs: options.resyncMs,
        name: "csinodes",
      });
      const queue = (name: string) =>
        new RateLimitingWorkQueue({
          clock,
          metricsProvider: deps.queueMetrics,
          rateLimiter: new ItemExponentialFailureRateLimiter({
            baseMs: options.retryIntervalStartMs,
            maxMs: options.retryIntervalMaxMs,
          }),
        }, { name });
      const vaQueue = queue("csi-attacher-va");
      const pvQueue = queue("csi-attacher-pv");
      const controller = new AttachController({
        vaInformer,
        pvInformer,
        csiNodeStore: csiNodeInformer,
        vaQueue,
        pvQueue,
        handler,
        log,
        clock,
      }, {
        driverName,
        workers: options.workerThreads,
        reconcile: setup.reconcile,
        reconcileSyncMs: options.reconcileSyncMs,
      });
      const informers = Promise.all([
        vaInformer.run(signal),
        pvInformer.run(signal),
        csiNodeInformer.run(signal),
      ]);
      const ready = Promise.all([vaInformer.waitForSync(signal), pvInformer.waitForSync(signal)])
        .then(() => deps.onReady?.(), () => {});
      await Promise.all([controller.run(signal), informers, ready]);
    };
    if (deps.runAsLeader) {
      await deps.runAsLeader(driverName, work);
    } else {
      await work(deps.signal);
    }
  } finally {
    setup.csi?.close();
  }
}
