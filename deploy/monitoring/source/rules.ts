/**
 * The Prometheus recording and alerting rules of the attacher, as one object from which both
 * `deploy/monitoring/csi-attacher.rules.yaml` (a plain rule file) and `prometheusrule.yaml` (the
 * same groups in a Prometheus Operator `PrometheusRule`) are written by `generate.ts`.
 *
 * Thresholds and `for` durations are {@link RuleSettings}: the shipped files use
 * {@link DEFAULT_RULE_SETTINGS}; the end-to-end suite writes a rule file with short ones.
 *
 * Metric names, labels and units are those of `lib/observe/metrics.ts` (README "Metrics and
 * health"). Which of them the Go csi-attacher also exports is said per rule in
 * {@link ALERT_ORIGINS} and in `deploy/monitoring/README.md`.
 *
 * @module
 */

/** What the rules can be tuned with; durations are Prometheus durations (`5m`, `30s`). */
export interface RuleSettings {
  /**
   * Label matchers that select the attacher's scrape targets; "" (the default):
   * `container="<container>"`, the target label the Prometheus Operator's PodMonitor sets, which
   * finds the attacher as its own Deployment and as a container of the driver's controller pod
   * alike (where job and pod are shared with the driver and other sidecars). Generic metrics
   * (`up`, `process_*`, `rest_client_*`) are exported by every Kubernetes component, so every
   * expression carries these matchers.
   */
  selector: string;
  /**
   * Where this repository's files are read on the web, e.g. `https://github.com/<org>/<repo>/blob/v0.1.0`;
   * the runbook is `<runbookBaseUrl>/deploy/monitoring/RUNBOOK.md`.
   */
  runbookBaseUrl: string;
  /** The runbook's whole address, when it is not under {@link runbookBaseUrl}; "": there. */
  runbookUrl: string;
  /** Range of the `rate()` windows. */
  rateWindow: string;
  /** How long no replica may hold a Lease a replica held within {@link leaderMemory}. */
  noLeaderFor: string;
  /** How far back a Lease name counts as one that should have a leader. */
  leaderMemory: string;
  /** Age (seconds) of the oldest VolumeAttachment waiting to attach that alerts. */
  attachPendingSeconds: number;
  attachPendingFor: string;
  /** Age (seconds) of the oldest VolumeAttachment waiting to detach that alerts. */
  detachPendingSeconds: number;
  detachPendingFor: string;
  /** Share (0-1) of ControllerPublishVolume or ControllerUnpublishVolume calls failing with one code. */
  errorRatio: number;
  errorFor: string;
  /** How long a target may be down. */
  downFor: string;
  /** Process starts within {@link restartWindow} above which the attacher is restarting. */
  restarts: number;
  restartWindow: string;
  /** 90th percentile (seconds) of the waits for the client-side rate limiter that alerts. */
  throttledSeconds: number;
  throttledFor: string;
  /** Resident memory as a share (0-1) of the container's memory limit that alerts. */
  memoryRatio: number;
  memoryFor: string;
  /**
   * The attacher's container name: the target label `container` the default selector matches,
   * and its memory limit in kube-state-metrics.
   */
  container: string;
}

/**
 * The project's repository on the web. A placeholder: the project has no public address yet;
 * generate with `--runbook-base-url` where your readers open this repository.
 */
export const REPOSITORY_URL = "https://github.com/csi-attacher-deno/csi-attacher";

/** The settings of the shipped rule files. */
export const DEFAULT_RULE_SETTINGS: Readonly<RuleSettings> = Object.freeze({
  selector: "",
  runbookBaseUrl: `${REPOSITORY_URL}/blob/main`,
  runbookUrl: "",
  rateWindow: "5m",
  noLeaderFor: "5m",
  leaderMemory: "1h",
  attachPendingSeconds: 300,
  attachPendingFor: "2m",
  detachPendingSeconds: 600,
  detachPendingFor: "2m",
  errorRatio: 0.1,
  errorFor: "15m",
  downFor: "5m",
  restarts: 2,
  restartWindow: "30m",
  throttledSeconds: 1,
  throttledFor: "10m",
  memoryRatio: 0.9,
  memoryFor: "10m",
  container: "csi-attacher",
});

/** A recording rule. */
export interface RecordingRule {
  record: string;
  expr: string;
}

/** An alerting rule. */
export interface AlertingRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: { summary: string; description: string; runbook_url: string };
}

/** A rule group, as a Prometheus rule file and a `PrometheusRule` spec hold it. */
export interface RuleGroup {
  name: string;
  rules: (RecordingRule | AlertingRule)[];
}

/** Names of the alerts. */
export const ALERTS = [
  "CSIAttacherNoLeader",
  "CSIAttacherAttachStuck",
  "CSIAttacherDetachStuck",
  "CSIAttacherDriverErrors",
  "CSIAttacherDown",
  "CSIAttacherRestarting",
  "CSIAttacherClientThrottled",
  "CSIAttacherMemoryNearLimit",
] as const;

/** An alert's name. */
export type AlertName = typeof ALERTS[number];

/**
 * Which attacher exports what an alert reads: `both` (the Go csi-attacher v4.13 exports the same
 * metric names and labels) or `deno` (metrics beyond the Go attacher).
 */
export const ALERT_ORIGINS: Readonly<Record<AlertName, "both" | "deno">> = Object.freeze({
  CSIAttacherNoLeader: "both",
  CSIAttacherAttachStuck: "deno",
  CSIAttacherDetachStuck: "deno",
  CSIAttacherDriverErrors: "both",
  CSIAttacherDown: "both",
  CSIAttacherRestarting: "both",
  CSIAttacherClientThrottled: "deno",
  CSIAttacherMemoryNearLimit: "both",
});

/** The labels that locate a scrape target (kept where the rules aggregate). */
const TARGET = "namespace, pod, instance, job";

/** The method names of the calls the error-ratio alert watches. */
const PUBLISH_METHODS = "/csi.v1.Controller/Controller(Un)?PublishVolume";

/** `where` in a description: the target's pod when known, else its address. */
const WHERE = "{{ with $labels.pod }}pod {{ $labels.namespace }}/{{ . }}, {{ end }}" +
  "target {{ $labels.instance }} (job {{ $labels.job }})";

/** Names of the recording rules, which include the rate window. */
export function recordNames(s: RuleSettings): { calls: string; errors: string; throttle: string } {
  return {
    calls: `csi_attacher:controller_publish_calls:rate${s.rateWindow}`,
    errors: `csi_attacher:controller_publish_errors:ratio_rate${s.rateWindow}`,
    throttle: `csi_attacher:rest_client_rate_limiter_wait_seconds:p90_rate${s.rateWindow}`,
  };
}

/** Formats a number as PromQL and the annotations read it (no exponent, no trailing zeros). */
function num(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError(`Cannot write a threshold: ${n} is not finite`);
  return String(Math.round(n * 1e6) / 1e6);
}

/** A duration in seconds as the annotations print it (`5m`, `90s`). */
function seconds(n: number): string {
  return n % 60 === 0 ? `${n / 60}m` : `${n}s`;
}

/** The rule groups for `settings` (default: the shipped ones). */
export function ruleGroups(settings: Partial<RuleSettings> = {}): RuleGroup[] {
  const s: RuleSettings = { ...DEFAULT_RULE_SETTINGS, ...settings };
  const sel = s.selector || `container="${s.container}"`;
  const rec = recordNames(s);
  const runbookUrl = s.runbookUrl || `${s.runbookBaseUrl}/deploy/monitoring/RUNBOOK.md`;
  const runbook = (alert: AlertName) => `${runbookUrl}#${alert.toLowerCase()}`;
  const alert = (
    name: AlertName,
    expr: string,
    forDuration: string,
    severity: string,
    summary: string,
    description: string,
  ): AlertingRule => ({
    alert: name,
    expr,
    ...(forDuration === "0s" ? {} : { for: forDuration }),
    labels: { severity },
    annotations: { summary, description, runbook_url: runbook(name) },
  });
  // Both attachers report `name=""` (csi-lib-utils sets no LeaderElectionConfig.Name); grouped by
  // it all the same, for other programs' series, and the selector keeps those out.
  const leaseSeries = `leader_election_master_status{${sel}}`;
  return [
    {
      name: "csi-attacher.rules",
      rules: [
        {
          record: rec.calls,
          expr: `sum by (driver_name, method_name, grpc_status_code) (\n` +
            `  rate(csi_sidecar_operations_seconds_count{${sel}, method_name=~"${PUBLISH_METHODS}"}[${s.rateWindow}])\n)`,
        },
        {
          record: rec.errors,
          expr:
            `sum by (driver_name, method_name, grpc_status_code) (${rec.calls}{grpc_status_code!="OK"})\n` +
            `/ on (driver_name, method_name) group_left ()\n` +
            `sum by (driver_name, method_name) (${rec.calls})`,
        },
        {
          record: rec.throttle,
          expr: `histogram_quantile(0.9, sum by (${TARGET}, le) (\n` +
            `  rate(rest_client_rate_limiter_duration_seconds_bucket{${sel}}[${s.rateWindow}])\n))`,
        },
      ],
    },
    {
      name: "csi-attacher.alerts",
      rules: [
        alert(
          "CSIAttacherNoLeader",
          `group by (namespace, job, name) (max_over_time(${leaseSeries}[${s.leaderMemory}]))\n` +
            `unless on (namespace, job, name)\n` +
            `max by (namespace, job, name) (${leaseSeries} == 1)`,
          s.noLeaderFor,
          "critical",
          "No csi-attacher replica leads{{ with $labels.name }} on the Lease {{ . }}{{ end }}",
          `No replica of job {{ $labels.job }} in namespace {{ $labels.namespace }} has led` +
            `{{ with $labels.name }} (Lease {{ . }}){{ end }} for ${s.noLeaderFor}, while replicas reported ` +
            `within the last ${s.leaderMemory}: no VolumeAttachment of this driver is attached or ` +
            `detached until one leads.`,
        ),
        alert(
          "CSIAttacherAttachStuck",
          `max by (${TARGET}, operation) (csi_attacher_oldest_pending_seconds{${sel}, operation="attach"})\n` +
            `> ${num(s.attachPendingSeconds)}`,
          s.attachPendingFor,
          "warning",
          "A VolumeAttachment has waited {{ $value | humanizeDuration }} to attach",
          `The oldest VolumeAttachment of the driver served by ${WHERE} that is not attached ` +
            `was created {{ $value | humanizeDuration }} ago (threshold ` +
            `${seconds(s.attachPendingSeconds)}): a Pod waits for its volume.`,
        ),
        alert(
          "CSIAttacherDetachStuck",
          `max by (${TARGET}, operation) (csi_attacher_oldest_pending_seconds{${sel}, operation="detach"})\n` +
            `> ${num(s.detachPendingSeconds)}`,
          s.detachPendingFor,
          "warning",
          "A VolumeAttachment has waited {{ $value | humanizeDuration }} to detach",
          `The oldest VolumeAttachment of the driver served by ${WHERE} that is being deleted ` +
            `and not yet detached was deleted {{ $value | humanizeDuration }} ago (threshold ` +
            `${seconds(s.detachPendingSeconds)}): its volume cannot attach to another node.`,
        ),
        alert(
          "CSIAttacherDriverErrors",
          `${rec.errors} > ${num(s.errorRatio)}`,
          s.errorFor,
          "warning",
          "{{ $labels.method_name }} fails with {{ $labels.grpc_status_code }} for " +
            "{{ $value | humanizePercentage }} of calls",
          `The CSI driver {{ $labels.driver_name }} answered {{ $value | humanizePercentage }} ` +
            `of the {{ $labels.method_name }} calls of the last ${s.rateWindow} with gRPC code ` +
            `{{ $labels.grpc_status_code }} (threshold ${num(s.errorRatio * 100)}%, for ` +
            `${s.errorFor}).`,
        ),
        alert(
          "CSIAttacherDown",
          `up{${sel}} == 0`,
          s.downFor,
          "warning",
          "csi-attacher target {{ $labels.instance }} is down",
          `Prometheus could not scrape ${WHERE} for ${s.downFor}: the process is not running, ` +
            `not ready to serve --http-endpoint, or unreachable.`,
        ),
        alert(
          "CSIAttacherRestarting",
          `changes(process_start_time_seconds{${sel}}[${s.restartWindow}]) > ${num(s.restarts)}`,
          "0s",
          "warning",
          "csi-attacher restarted {{ $value }} times in " + s.restartWindow,
          `The attacher process of ${WHERE} started {{ $value }} times within the last ` +
            `${s.restartWindow} (threshold ${num(s.restarts)}).`,
        ),
        alert(
          "CSIAttacherClientThrottled",
          `${rec.throttle} > ${num(s.throttledSeconds)}`,
          s.throttledFor,
          "warning",
          "API requests wait {{ $value | humanizeDuration }} on the client-side rate limiter",
          `One in ten API requests of ${WHERE} waited {{ $value | humanizeDuration }} or longer ` +
            `for the attacher's own rate limiter over the last ${s.rateWindow} (threshold ` +
            `${num(s.throttledSeconds)}s, for ${s.throttledFor}): --kube-api-qps and ` +
            `--kube-api-burst limit how fast VolumeAttachments are processed.`,
        ),
        alert(
          "CSIAttacherMemoryNearLimit",
          `max by (namespace, pod) (process_resident_memory_bytes{${sel}})\n` +
            `/ on (namespace, pod)\n` +
            `max by (namespace, pod) (kube_pod_container_resource_limits{resource="memory", ` +
            `container="${s.container}"})\n` +
            `> ${num(s.memoryRatio)}`,
          s.memoryFor,
          "warning",
          "csi-attacher {{ $labels.namespace }}/{{ $labels.pod }} uses " +
            "{{ $value | humanizePercentage }} of its memory limit",
          `The resident memory of the attacher in pod {{ $labels.namespace }}/{{ $labels.pod }} ` +
            `has been {{ $value | humanizePercentage }} of the memory limit of its container ` +
            `${s.container} for ${s.memoryFor} (threshold ${num(s.memoryRatio * 100)}%); the ` +
            `kernel kills it at the limit.`,
        ),
      ],
    },
  ];
}
