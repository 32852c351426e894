/**
 * One typed configuration per component of the attacher, built once from the command line's
 * {@link Options} by {@link componentSettings}: Kubernetes components are configured this way
 * (one struct per component, filled from flags and passed down whole, as `componentconfig`
 * does), where the Go attacher's `cmd/csi-attacher/main.go` reads its flag variables wherever
 * it builds something. `main.ts` builds the settings; `lib/run.ts` gives each component its
 * part; no other module reads {@link Options}.
 *
 * The metrics registry has no settings: its driver-dependent parts (the `driver_name` label, the
 * `migrated` label of a CSI-migration driver) come from the driver at start-up, and where it is
 * served is the HTTP endpoint's {@link HttpEndpointSettings.metricsPath}.
 *
 * @module
 */

import type { FlagValue, LoggingFormat, Options } from "./options.ts";

/** The log (`--v`, `--logging-format`). */
export interface LoggingSettings {
  verbosity: number;
  format: LoggingFormat;
}

/** How each API client is made (`--kubeconfig`, `--kube-api-qps`, `--kube-api-burst`). */
export interface KubeClientSettings {
  /** The kubeconfig path; "" means in-cluster, else `KUBECONFIG` or `~/.kube/config`. */
  kubeconfig: string;
  /** Requests per second of each client's rate limiter. */
  qps: number;
  /** Burst of each client's rate limiter. */
  burst: number;
}

/** The driver's connection (`--csi-address`, `--timeout`, `--max-grpc-log-length`, `--dummy`). */
export interface CsiConnectionSettings {
  /** No driver at all: the driver name is `csi/dummy` and the trivial handler runs. */
  dummy: boolean;
  /** Where the driver listens: a path, a `unix:` URI or `host:port`. */
  address: string;
  /**
   * `--timeout`: the bound of each call that may take long (Probe, ControllerPublishVolume,
   * ControllerUnpublishVolume), and so of the work in flight at a stop.
   */
  callTimeoutMs: number;
  /** Cap in characters on logged gRPC responses; ≤ 0 means none. */
  maxGrpcLogLength: number;
}

/** The CSI handler's part of the {@link ControllerSettings}. */
export interface HandlerSettings {
  /** `--default-fstype`: the fsType of a PersistentVolume that names none. */
  defaultFsType: string;
  /** Feature gate `MutableCSINodeAllocatableCount`: `status.attachError.errorCode` is written. */
  attachErrorCodes: boolean;
}

/** The ListVolumes reconciler's part of the {@link ControllerSettings}. */
export interface ReconcilerSettings {
  /** `--reconcile-timeout` (0 there: `--timeout`): the bound of one pass, all its pages. */
  timeoutMs: number;
  /** `--max-entries`: `max_entries` per ListVolumes page; 0 means none. */
  maxEntries: number;
}

/** The informers, the queues and their workers, the handler and the reconciler. */
export interface ControllerSettings {
  /** `--resync`: the informers' resync period. */
  resyncMs: number;
  /** `--retry-interval-start` and `--retry-interval-max`: each queue's per-item backoff. */
  retry: { baseMs: number; maxMs: number };
  /** `--worker-threads`: the PersistentVolume workers. */
  workers: number;
  /** `--attach-worker-threads` (0 there: `--worker-threads`). */
  attachWorkers: number;
  /** `--detach-worker-threads` (0 there: `--worker-threads`). */
  detachWorkers: number;
  /** `--reconcile-sync`: the period of the ListVolumes reconciliation. */
  reconcileSyncMs: number;
  /** `--log-backlog-interval`: the period of the backlog line; 0 means none. */
  logBacklogIntervalMs: number;
  handler: HandlerSettings;
  reconciler: ReconcilerSettings;
}

/** Leader election over a Lease (`--leader-election-*`). */
export interface ElectorSettings {
  /** `--leader-election-namespace`; "" means the pod's namespace. */
  namespace: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** Labels put on the Lease while this replica leads. */
  labels: Record<string, string>;
  /** Feature gate `ReleaseLeaderElectionOnExit`: give the Lease up when stopped. */
  releaseOnCancel: boolean;
  /** Feature gate `WarmStandby`: the informers run from the start, not only in the term. */
  warmStandby: boolean;
}

/** The one Event path. */
export interface EventSettings {
  /**
   * How long, at most, the attacher waits at exit for the Events still queued (the leader's
   * "stopped leading" among them) to be posted: the leader election's renew deadline, the bound
   * each of its own requests has.
   */
  drainMs: number;
}

/** The HTTP endpoint (`--http-endpoint`, or the deprecated `--metrics-address`). */
export interface HttpEndpointSettings {
  /** A Go listen address, `host:port`. */
  address: string;
  /** The flag that set {@link address}, for the error when it cannot be bound. */
  flag: "--http-endpoint" | "--metrics-address";
  /** `--metrics-path`. */
  metricsPath: string;
  /**
   * Serve `/healthz/leader-election`: with `--leader-election` and `--http-endpoint` (not
   * `--metrics-address`), as csi-lib-utils does.
   */
  leaderHealth: boolean;
  /** Every flag and its value, as `/flagz` shows them. */
  flags: readonly FlagValue[];
}

/** Every component's settings; see the module documentation. */
export interface ComponentSettings {
  logging: LoggingSettings;
  kubeClient: KubeClientSettings;
  csi: CsiConnectionSettings;
  controller: ControllerSettings;
  /** Absent without `--leader-election`. */
  elector: ElectorSettings | undefined;
  events: EventSettings;
  /** Absent when neither `--http-endpoint` nor `--metrics-address` is set. */
  http: HttpEndpointSettings | undefined;
}

/**
 * The log's settings alone: what reports the verdict of
 * {@link import("./options.ts").validateOptions}, before any other setting is built.
 */
export function loggingSettings(options: Options): LoggingSettings {
  return { verbosity: options.verbosity, format: options.loggingFormat };
}

/**
 * The settings of every component. It checks nothing: run them only once
 * {@link import("./options.ts").validateOptions} has accepted the options (the logging settings
 * serve to report what it found).
 *
 * @example
 * ```ts
 * import { parseOptions } from "./options.ts";
 * import { componentSettings } from "./settings.ts";
 * const parsed = parseOptions(["--leader-election", "--http-endpoint=:8080"]);
 * if (parsed.ok) {
 *   const settings = componentSettings(parsed.options);
 *   settings.elector?.renewDeadlineMs; // 10000
 *   settings.http?.leaderHealth; // true
 * }
 * ```
 */
export function componentSettings(options: Options): ComponentSettings {
  return {
    logging: loggingSettings(options),
    kubeClient: {
      kubeconfig: options.kubeconfig,
      qps: options.kubeApiQps,
      burst: options.kubeApiBurst,
    },
    csi: {
      dummy: options.dummy,
      address: options.csiAddress,
      callTimeoutMs: options.timeoutMs,
      maxGrpcLogLength: options.maxGrpcLogLength,
    },
    controller: controllerSettings(options),
    elector: options.leaderElection ? electorSettings(options) : undefined,
    events: { drainMs: options.leaderElectionRenewDeadlineMs },
    http: httpEndpointSettings(options),
  };
}

function controllerSettings(options: Options): ControllerSettings {
  return {
    resyncMs: options.resyncMs,
    retry: { baseMs: options.retryIntervalStartMs, maxMs: options.retryIntervalMaxMs },
    workers: options.workerThreads,
    attachWorkers: options.attachWorkerThreads,
    detachWorkers: options.detachWorkerThreads,
    reconcileSyncMs: options.reconcileSyncMs,
    logBacklogIntervalMs: options.logBacklogIntervalMs,
    handler: {
      defaultFsType: options.defaultFsType,
      attachErrorCodes: options.featureGates.MutableCSINodeAllocatableCount,
    },
    reconciler: { timeoutMs: options.reconcileTimeoutMs, maxEntries: options.maxEntries },
  };
}

function electorSettings(options: Options): ElectorSettings {
  return {
    namespace: options.leaderElectionNamespace,
    leaseDurationMs: options.leaderElectionLeaseDurationMs,
    renewDeadlineMs: options.leaderElectionRenewDeadlineMs,
    retryPeriodMs: options.leaderElectionRetryPeriodMs,
    labels: { ...options.leaderElectionLabels },
    releaseOnCancel: options.featureGates.ReleaseLeaderElectionOnExit,
    warmStandby: options.featureGates.WarmStandby,
  };
}

function httpEndpointSettings(options: Options): HttpEndpointSettings | undefined {
  const address = options.httpEndpoint || options.metricsAddress;
  if (address === "") return undefined;
  return {
    address,
    flag: options.httpEndpoint !== "" ? "--http-endpoint" : "--metrics-address",
    metricsPath: options.metricsPath,
    leaderHealth: options.leaderElection && options.httpEndpoint !== "",
    flags: options.flagValues,
  };
}
