/**
 * The attacher's Prometheus metrics on a {@link Registry} of its own
 * (`../wire/prometheus/registry.ts`), with the
 * names, help texts, labels and buckets the Go sidecar exposes:
 *
 * - csi-lib-utils' `csi_sidecar_operations_seconds` histogram of CSI calls;
 * - client_golang's process metrics (`process_cpu_seconds_total`, `process_*_memory_bytes`,
 *   `process_open_fds`, `process_max_fds`, `process_start_time_seconds`), read at each scrape
 *   (`process_metrics.ts`);
 * - component-base's workqueue metrics (`workqueue_*{name}`), fed by the queues through
 *   {@link Metrics.queueMetricsProvider};
 * - component-base's leader-election metrics (`leader_election_master_status{name}`,
 *   `leader_election_slowpath_total{name}`);
 * - client-go's REST client counters `rest_client_requests_total{code,host,method}` (every try)
 *   and `rest_client_request_retries_total{code,host,verb}` (every retry), and its histograms
 *   `rest_client_request_duration_seconds{verb,host}` (every request, retries included) and
 *   `rest_client_rate_limiter_duration_seconds{verb,host}` (every wait for the client's rate
 *   limiter), fed by the API client.
 *
 * Beyond the Go attacher (README "Metrics and health"):
 * - `csi_attacher_attach_duration_seconds{driver_name}` and
 *   `csi_attacher_detach_duration_seconds{driver_name}`: end-to-end latency, with the buckets of
 *   `csi_sidecar_operations_seconds`;
 * - `csi_attacher_pending_volumeattachments{operation}` and
 *   `csi_attacher_oldest_pending_seconds{operation}` (`attach`, `detach`): the backlog in the
 *   informer cache, computed at each scrape from {@link Metrics.setPendingSource}.
 *
 * Metrics that component-base registers carry its stability marker at the start of their help
 * text (`[ALPHA] `), exactly as the Go binary prints them. There is no module-level registry: it
 * would be shared by every test. The Go runtime's `go_*` family has no meaning here; the JavaScript
 * heap is served in its place as `deno_heap_used_bytes`, `deno_heap_total_bytes` and
 * `deno_heap_external_bytes` (`process_metrics.ts`).
 *
 * @module
 */

import { Counter, Gauge, Histogram, Registry } from "../wire/prometheus/registry.ts";
import type { QueueMetricsProvider } from "../workqueue/metrics.ts";
import { type ProcessMetrics, registerProcessMetrics } from "./process_metrics.ts";

/** The `driver_name` label value until {@link Metrics.setDriverName} gives a name. */
export const UNKNOWN_DRIVER_NAME = "unknown-driver";

/** The `grpc_status_code` label value of a call that failed without a gRPC status. */
export const UNKNOWN_NON_GRPC_CODE = "unknown-non-grpc";

/**
 * Buckets (seconds) of client-go's REST client latency histograms, as component-base defines them
 * (`metrics/prometheus/restclient/metrics.go`).
 */
export const REST_CLIENT_LATENCY_BUCKETS: readonly number[] = Object.freeze([
  0.005,
  0.025,
  0.1,
  0.25,
  0.5,
  1,
  2,
  4,
  8,
  15,
  30,
  60,
]);

/** Buckets (seconds) of `csi_sidecar_operations_seconds`, as csi-lib-utils defines them. */
export const CSI_OPERATION_BUCKETS: readonly number[] = Object.freeze([
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  15,
  25,
  50,
  120,
  300,
  600,
]);

/**
 * Buckets (seconds) of the workqueue duration histograms: client-go's
 * `ExponentialBuckets(10e-9, 10, 10)`, i.e. 10 ns up to 10 s.
 */
export const WORKQUEUE_DURATION_BUCKETS: readonly number[] = Object.freeze([
  1e-8,
  1e-7,
  1e-6,
  1e-5,
  1e-4,
  1e-3,
  1e-2,
  1e-1,
  1,
  10,
]);

/** The stability marker component-base puts in front of the help text of alpha metrics. */
const ALPHA = "[ALPHA] ";

/** Help texts of every metric, by metric name. */
export const METRIC_HELP: Readonly<Record<string, string>> = Object.freeze({
  csi_sidecar_operations_seconds: ALPHA +
    "Container Storage Interface operation duration with gRPC error code status total",
  workqueue_depth: ALPHA + "Current depth of workqueue",
  workqueue_adds_total: ALPHA + "Total number of adds handled by workqueue",
  workqueue_queue_duration_seconds: ALPHA +
    "How long in seconds an item stays in workqueue before being requested.",
  workqueue_work_duration_seconds: ALPHA +
    "How long in seconds processing an item from workqueue takes.",
  workqueue_unfinished_work_seconds: ALPHA +
    "How many seconds of work has done that is in progress and hasn't been observed by " +
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck " +
    "threads by observing the rate at which this increases.",
  workqueue_longest_running_processor_seconds: ALPHA +
    "How many seconds has the longest running processor for workqueue been running.",
  workqueue_retries_total: ALPHA + "Total number of retries handled by workqueue",
  leader_election_master_status: ALPHA +
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, " +
    "1 indicates master. 'name' is the string used to identify the lease. Please make sure " +
    "to group by name.",
  rest_client_requests_total: ALPHA +
    "Number of HTTP requests, partitioned by status code, method, and host.",
  rest_client_request_retries_total: ALPHA +
    "Number of request retries, partitioned by status code, verb, and host.",
  rest_client_request_duration_seconds: ALPHA +
    "Request latency in seconds. Broken down by verb, and host.",
  rest_client_rate_limiter_duration_seconds: ALPHA +
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
  leader_election_slowpath_total: ALPHA +
    "Total number of slow path exercised in renewing leader leases. 'name' is the string " +
    "used to identify the lease. Please make sure to group by name.",
  csi_attacher_attach_duration_seconds:
    "Time from a VolumeAttachment's creation (or when the attacher first saw it, if later) " +
    "until the attacher marked it attached",
  csi_attacher_detach_duration_seconds:
    "Time from a VolumeAttachment's deletion (or when the attacher first saw it deleted, if " +
    "later) until the attacher removed its finalizer",
  csi_attacher_pending_volumeattachments:
    "VolumeAttachments of this driver waiting for the attacher: operation=attach not yet " +
    "attached, operation=detach being deleted and not yet detached",
  csi_attacher_oldest_pending_seconds:
    "Age of the oldest pending VolumeAttachment of this driver, per operation: since its " +
    "creation (attach) or deletion (detach); 0 when none is pending",
});

/** The operations of the pending-VolumeAttachment gauges. */
export type PendingOperation = "attach" | "detach";

/** The backlog of one operation. */
export interface PendingFigures {
  /** How many VolumeAttachments wait for it. */
  count: number;
  /** Age of the oldest of them, seconds; 0 when none. */
  oldestSeconds: number;
}

/** The backlog, as {@link Metrics.setPendingSource} reads it at each scrape. */
export type PendingVolumeAttachments = Record<PendingOperation, PendingFigures>;

/** Options of {@link createMetrics}. */
export interface MetricsOptions {
  /** The CSI driver name; empty or absent means {@link UNKNOWN_DRIVER_NAME} until set. */
  driverName?: string;
  /**
   * Add the `migrated` label to `csi_sidecar_operations_seconds`, as the Go attacher does for
   * drivers that are CSI-migration targets.
   */
  migrated?: boolean;
  /** Value of `process_start_time_seconds`; defaults to this process's start time. */
  processStartTimeSeconds?: number;
}

/** One finished CSI call, for {@link Metrics.observeCsiCall}. */
export interface CsiCallObservation {
  /** The full gRPC method, e.g. `/csi.v1.Controller/ControllerPublishVolume`. */
  method: string;
  /**
   * The outcome: the Go name of the gRPC status code (`OK`, `DeadlineExceeded`, `Code(17)`, as
   * the caller spells it), or undefined when the call failed without a gRPC status
   * ({@link UNKNOWN_NON_GRPC_CODE}).
   */
  code: string | undefined;
  /** How long the call took, in seconds. */
  seconds: number;
  /**
   * Whether the call was for a migrated in-tree volume; only recorded (as "true"/"false") when
   * the metrics were created with {@link MetricsOptions.migrated}.
   */
  migrated?: boolean;
}

/** One try of an API request, or one retry, for {@link Metrics.observeApiRequest}. */
export interface ApiRequestObservation {
  /** HTTP method, e.g. `PATCH`. */
  method: string;
  /** `host:port` of the API server. */
  host: string;
  /** HTTP status code; 0 when no answer came (written `<error>`, as client-go does). */
  code: number;
}

/** One duration of an API request, for the REST client histograms. */
export interface ApiLatencyObservation {
  /** HTTP method, e.g. `PATCH` (client-go's `verb` label). */
  method: string;
  /** `host:port` of the API server. */
  host: string;
  /** The duration in seconds. */
  seconds: number;
}

/** The attacher's metrics; see the module documentation. */
export interface Metrics {
  /** The registry holding every metric below; nothing else is registered in it. */
  readonly registry: Registry;
  /** Content type of {@link metricsText} (Prometheus text format 0.0.4). */
  readonly contentType: string;
  /** Creates the `workqueue_*` metrics of each queue, labelled with the queue name. */
  readonly queueMetricsProvider: QueueMetricsProvider;
  /** Sets the `driver_name` of later observations; "" means {@link UNKNOWN_DRIVER_NAME}. */
  setDriverName(name: string): void;
  /**
   * Adds the `migrated` label to `csi_sidecar_operations_seconds`, as the Go attacher does for a
   * driver that is a CSI-migration target (csi-lib-utils `WithMigration()`), once its name shows
   * that it is one. The calls observed before keep their series, labelled `migrated="false"`;
   * later calls are labelled with their own {@link CsiCallObservation.migrated}.
   */
  addMigratedLabel(): void;
  /**
   * Records one CSI call in `csi_sidecar_operations_seconds`.
   *
   * @throws {RangeError} when `seconds` is negative or not a finite number.
   */
  observeCsiCall(call: CsiCallObservation): void;
  /** Records one end-to-end attach in `csi_attacher_attach_duration_seconds`. */
  observeAttachDuration(seconds: number): void;
  /** Records one end-to-end detach in `csi_attacher_detach_duration_seconds`. */
  observeDetachDuration(seconds: number): void;
  /**
   * Sets where the pending-VolumeAttachment gauges come from (read at each scrape); undefined:
   * they read 0 (e.g. while not leading).
   */
  setPendingSource(source: (() => PendingVolumeAttachments) | undefined): void;
  /**
   * Sets `leader_election_master_status{name=""}` to 1 (leading) or 0. The label is client-go's
   * `LeaderElectionConfig.Name`, which csi-lib-utils leaves empty (`leaderelection.go`), so the Go
   * sidecar's series is `name=""`: the Lease name given here is not written, for dashboards and
   * rules that select the Go series.
   */
  setLeader(leaseName: string, leading: boolean): void;
  /** Counts a renewal that took the slow path in `leader_election_slowpath_total{name=""}`. */
  slowpathExercised(leaseName: string): void;
  /** Counts one try of an API request in `rest_client_requests_total`. */
  observeApiRequest(req: ApiRequestObservation): void;
  /** Counts one retry of an API request in `rest_client_request_retries_total`. */
  observeApiRetry(req: ApiRequestObservation): void;
  /** Records one API request's duration in `rest_client_request_duration_seconds`. */
  observeApiRequestDuration(obs: ApiLatencyObservation): void;
  /** Records one wait for the API client's rate limiter in `rest_client_rate_limiter_duration_seconds`. */
  observeRateLimiterWait(obs: ApiLatencyObservation): void;
  /** The text exposition of every metric. */
  metricsText(): Promise<string>;
}

/**
 * Creates the attacher's metrics in a new registry. Each call gives independent metrics, so
 * tests may create as many as they like.
 *
 * @example
 * ```ts
 * const metrics = createMetrics({ driverName: "csi.example.com" });
 * metrics.observeCsiCall({
 *   method: "/csi.v1.Controller/ControllerPublishVolume",
 *   code: "OK",
 *   seconds: 0.3,
 * });
 * const text = await metrics.metricsText();
 * // text contains csi_sidecar_operations_seconds_bucket{driver_name="csi.example.com",...,le="0.5"} 1
 * ```
 */
export function createMetrics(opts: MetricsOptions = {}): Metrics {
  return new AttacherMetrics(opts);
}

/** The one implementation of {@link Metrics}: every family made once, in one registry. */
/**
 * The `name` of the leader-election series: client-go's `LeaderElectionConfig.Name`, which
 * csi-lib-utils' `leaderelection.go` never sets, so the Go sidecar writes `name=""`.
 */
export const LEADER_ELECTION_METRIC_NAME = "";

class AttacherMetrics implements Metrics {
  readonly registry: Registry = new Registry();
  readonly contentType: string = this.registry.contentType;
  readonly queueMetricsProvider: QueueMetricsProvider = createQueueMetricsProvider(this.registry);
  #driverName: string;
  #csiOperations: Histogram;
  #migratedLabel = false;
  readonly #processMetrics: ProcessMetrics;
  readonly #leaderStatus: Gauge;
  readonly #leaderSlowpath: Counter;
  readonly #attachDuration: Histogram;
  readonly #detachDuration: Histogram;
  #pendingSource: (() => PendingVolumeAttachments) | undefined;
  readonly #restClient: RestClientFamilies;

  constructor(opts: MetricsOptions) {
    const registry = this.registry;
    this.#driverName = driverNameOrUnknown(opts.driverName ?? "");
    this.#csiOperations = csiOperationsHistogram(registry, false);
    if (opts.migrated === true) this.addMigratedLabel();
    this.#processMetrics = registerProcessMetrics(
      registry,
      opts.processStartTimeSeconds ?? performance.timeOrigin / 1000,
    );
    this.#leaderStatus = new Gauge({
      ...family("leader_election_master_status", ["name"]),
      registry,
    });
    this.#leaderSlowpath = new Counter({
      ...family("leader_election_slowpath_total", ["name"]),
      registry,
    });
    this.#attachDuration = operationHistogram(registry, "csi_attacher_attach_duration_seconds");
    this.#detachDuration = operationHistogram(registry, "csi_attacher_detach_duration_seconds");
    const pending = () => this.#pendingSource?.();
    pendingGauge(registry, "csi_attacher_pending_volumeattachments", pending, (f) => f.count);
    pendingGauge(registry, "csi_attacher_oldest_pending_seconds", pending, (f) => f.oldestSeconds);
    this.#restClient = restClientFamilies(registry);
  }

  setDriverName(name: string): void {
    this.#driverName = driverNameOrUnknown(name);
  }

  addMigratedLabel(): void {
    if (this.#migratedLabel) return;
    const before = this.#csiOperations;
    this.registry.unregister(before.name);
    this.#csiOperations = csiOperationsHistogram(this.registry, true);
    this.#csiOperations.addFrom(before, { migrated: "false" });
    this.#migratedLabel = true;
  }

  observeCsiCall(call: CsiCallObservation): void {
    if (!Number.isFinite(call.seconds) || call.seconds < 0) {
      throw new RangeError(
        `Cannot record CSI call ${call.method}: duration must be a non-negative number of seconds: current value is ${call.seconds}`,
      );
    }
    const labels: Record<string, string> = {
      driver_name: this.#driverName,
      grpc_status_code: codeLabel(call.code),
      method_name: call.method,
    };
    if (this.#migratedLabel) labels.migrated = call.migrated === true ? "true" : "false";
    this.#csiOperations.observe(labels, call.seconds);
  }

  observeAttachDuration(seconds: number): void {
    this.#attachDuration.observe({ driver_name: this.#driverName }, seconds);
  }

  observeDetachDuration(seconds: number): void {
    this.#detachDuration.observe({ driver_name: this.#driverName }, seconds);
  }

  setPendingSource(source: (() => PendingVolumeAttachments) | undefined): void {
    this.#pendingSource = source;
  }

  setLeader(_leaseName: string, leading: boolean): void {
    this.#leaderStatus.set({ name: LEADER_ELECTION_METRIC_NAME }, leading ? 1 : 0);
  }

  slowpathExercised(_leaseName: string): void {
    this.#leaderSlowpath.inc({ name: LEADER_ELECTION_METRIC_NAME });
  }

  observeApiRequest(req: ApiRequestObservation): void {
    const labels = { code: httpCodeLabel(req.code), host: req.host, method: req.method };
    this.#restClient.requests.inc(labels);
  }

  observeApiRetry(req: ApiRequestObservation): void {
    const labels = { code: httpCodeLabel(req.code), host: req.host, verb: req.method };
    this.#restClient.retries.inc(labels);
  }

  observeApiRequestDuration(obs: ApiLatencyObservation): void {
    this.#restClient.duration.observe(
      { verb: obs.method, host: obs.host },
      Math.max(0, obs.seconds),
    );
  }

  observeRateLimiterWait(obs: ApiLatencyObservation): void {
    const labels = { verb: obs.method, host: obs.host };
    this.#restClient.rateLimiterWait.observe(labels, Math.max(0, obs.seconds));
  }

  metricsText(): Promise<string> {
    try {
      this.#processMetrics.refresh();
      return Promise.resolve(this.registry.metricsText());
    } catch (e) {
      return Promise.reject(e);
    }
  }
}

/** The name, help text and labels of the family `name` (help from {@link METRIC_HELP}). */
function family(name: string, labelNames: string[]): {
  name: string;
  help: string;
  labelNames: string[];
} {
  return { name, help: METRIC_HELP[name]!, labelNames };
}

/** `csi_sidecar_operations_seconds`, with the `migrated` label or without. */
function csiOperationsHistogram(registry: Registry, migrated: boolean): Histogram {
  const labelNames = ["driver_name", "grpc_status_code", "method_name"];
  return new Histogram({
    ...family(
      "csi_sidecar_operations_seconds",
      migrated ? [...labelNames, "migrated"] : labelNames,
    ),
    buckets: [...CSI_OPERATION_BUCKETS],
    registry,
  });
}

/** An end-to-end attach or detach histogram, with the buckets of the CSI operations. */
function operationHistogram(registry: Registry, name: string): Histogram {
  return new Histogram({
    ...family(name, ["driver_name"]),
    buckets: [...CSI_OPERATION_BUCKETS],
    registry,
  });
}

/** A backlog gauge per operation, read from `read` at each scrape (0 without a source). */
function pendingGauge(
  registry: Registry,
  name: string,
  read: () => PendingVolumeAttachments | undefined,
  pick: (figures: PendingFigures) => number,
): void {
  new Gauge({
    ...family(name, ["operation"]),
    registry,
    collect(gauge) {
      const pending = read();
      for (const operation of ["attach", "detach"] as const) {
        gauge.set({ operation }, pending === undefined ? 0 : pick(pending[operation]));
      }
    },
  });
}

/** client-go's REST client families. */
interface RestClientFamilies {
  requests: Counter;
  retries: Counter;
  duration: Histogram;
  rateLimiterWait: Histogram;
}

function restClientFamilies(registry: Registry): RestClientFamilies {
  const histogram = (name: string) =>
    new Histogram({
      ...family(name, ["verb", "host"]),
      buckets: [...REST_CLIENT_LATENCY_BUCKETS],
      registry,
    });
  return {
    requests: new Counter({
      ...family("rest_client_requests_total", ["code", "host", "method"]),
      registry,
    }),
    retries: new Counter({
      ...family("rest_client_request_retries_total", ["code", "host", "verb"]),
      registry,
    }),
    duration: histogram("rest_client_request_duration_seconds"),
    rateLimiterWait: histogram("rest_client_rate_limiter_duration_seconds"),
  };
}

/**
 * The component-base workqueue metrics provider. Like client-go's `WithLabelValues`, each
 * `new*Metric(name)` call makes the queue's series appear at once (with value 0), before anything
 * is recorded.
 */
function createQueueMetricsProvider(registry: Registry): QueueMetricsProvider {
  const labelNames = ["name"];
  const depth = new Gauge({
    name: "workqueue_depth",
    help: METRIC_HELP.workqueue_depth!,
    labelNames,
    registry,
  });
  const adds = new Counter({
    name: "workqueue_adds_total",
    help: METRIC_HELP.workqueue_adds_total!,
    labelNames,
    registry,
  });
  const latency = new Histogram({
    name: "workqueue_queue_duration_seconds",
    help: METRIC_HELP.workqueue_queue_duration_seconds!,
    labelNames,
    buckets: [...WORKQUEUE_DURATION_BUCKETS],
    registry,
  });
  const workDuration = new Histogram({
    name: "workqueue_work_duration_seconds",
    help: METRIC_HELP.workqueue_work_duration_seconds!,
    labelNames,
    buckets: [...WORKQUEUE_DURATION_BUCKETS],
    registry,
  });
  const unfinished = new Gauge({
    name: "workqueue_unfinished_work_seconds",
    help: METRIC_HELP.workqueue_unfinished_work_seconds!,
    labelNames,
    registry,
  });
  const longestRunning = new Gauge({
    name: "workqueue_longest_running_processor_seconds",
    help: METRIC_HELP.workqueue_longest_running_processor_seconds!,
    labelNames,
    registry,
  });
  const retries = new Counter({
    name: "workqueue_retries_total",
    help: METRIC_HELP.workqueue_retries_total!,
    labelNames,
    registry,
  });

  return {
    newDepthMetric: (name) => depth.labels({ name }),
    newAddsMetric: (name) => adds.labels({ name }),
    newLatencyMetric: (name) => latency.labels({ name }),
    newWorkDurationMetric: (name) => workDuration.labels({ name }),
    newUnfinishedWorkSecondsMetric: (name) => unfinished.labels({ name }),
    newLongestRunningProcessorSecondsMetric: (name) => longestRunning.labels({ name }),
    newRetriesMetric: (name) => retries.labels({ name }),
  };
}

function driverNameOrUnknown(name: string): string {
  return name === "" ? UNKNOWN_DRIVER_NAME : name;
}

/** client-go's `code` label: the status code, or `<error>` when no answer came. */
function httpCodeLabel(code: number): string {
  return code > 0 ? String(code) : "<error>";
}

function codeLabel(code: string | undefined): string {
  return code ?? UNKNOWN_NON_GRPC_CODE;
}
