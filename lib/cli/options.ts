/**
 * The attacher's command line: every flag of the Go `csi-attacher` (its own flags, csi-lib-utils'
 * common sidecar flags and component-base's logging flags) with the same names, defaults and
 * syntax, parsed into a typed {@link Options} object.
 *
 * Exit codes follow the Go binary: a command-line syntax error (unknown flag, bad value) is
 * status 2 with the usage text; an invalid logging configuration or unknown feature gate is
 * status 1 (Go checks those after parsing); `--version` and `--help` end the program with 0.
 * Cross-flag checks that Go makes later during startup are in {@link validateOptions}.
 *
 * @module
 */

import { type Flag, FlagError, FlagSet, goQuote, parseGoBool } from "./flags.ts";
import { type FeatureGates, featureGatesUsage, resolveFeatureGates } from "./feature_gates.ts";
import { formatGoDuration, parseGoDuration } from "../go_duration.ts";
import { errorText } from "../errors.ts";
import { COMPONENT_NAME } from "../component.ts";

/** Log output formats (`--logging-format`). */
export type LoggingFormat = "text" | "json";

/**
 * Everything the command line sets. Durations are milliseconds. Flags that are accepted for
 * compatibility but have no effect here are kept so that callers can log them.
 */
export interface Options {
  /** `--kubeconfig`: kubeconfig path; empty means the in-cluster configuration. */
  kubeconfig: string;
  /** `--csi-address`: CSI endpoint; a path starting with `/` is a unix socket. */
  csiAddress: string;
  /** `--timeout`: per-call timeout of ControllerPublish/Unpublish and Probe. */
  timeoutMs: number;
  /**
   * `--reconcile-timeout` (beyond the Go attacher, external-attacher#356): timeout of one whole
   * ListVolumes reconcile pass, every page included; the flag's 0 means {@link timeoutMs},
   * resolved here.
   */
  reconcileTimeoutMs: number;
  /** `--worker-threads`: VolumeAttachment workers, and as many PersistentVolume workers. */
  workerThreads: number;
  /**
   * `--attach-worker-threads` (beyond the Go attacher): workers that sync VolumeAttachments not
   * being deleted; the flag's 0 means {@link workerThreads}, resolved here.
   */
  attachWorkerThreads: number;
  /**
   * `--detach-worker-threads` (beyond the Go attacher): workers that sync VolumeAttachments being
   * deleted; the flag's 0 means {@link workerThreads}, resolved here.
   */
  detachWorkerThreads: number;
  /**
   * `--log-backlog-interval` (beyond the Go attacher): period of the backlog log line; 0
   * disables it.
   */
  logBacklogIntervalMs: number;
  /** `--retry-interval-start`: first per-item backoff; doubles on each failure. */
  retryIntervalStartMs: number;
  /** `--retry-interval-max`: cap of the per-item backoff. */
  retryIntervalMaxMs: number;
  /** `--resync`: informer resync period. */
  resyncMs: number;
  /** `--reconcile-sync`: period of the ListVolumes reconciliation. */
  reconcileSyncMs: number;
  /** `--max-entries`: `max_entries` per ListVolumes page; 0 means no limit. */
  maxEntries: number;
  /** `--default-fstype`: fsType used when the PersistentVolume has none. */
  defaultFsType: string;
  /** `--max-grpc-log-length`: cap in characters on logged gRPC responses; ≤ 0 means none. */
  maxGrpcLogLength: number;
  /** `--feature-gates`, resolved against {@link KNOWN_FEATURE_GATES}. */
  featureGates: FeatureGates;
  /** `--leader-election`: enable Lease leader election. */
  leaderElection: boolean;
  /** `--leader-election-namespace`: empty means the pod's namespace. */
  leaderElectionNamespace: string;
  /** `--leader-election-lease-duration`. */
  leaderElectionLeaseDurationMs: number;
  /** `--leader-election-renew-deadline`. */
  leaderElectionRenewDeadlineMs: number;
  /** `--leader-election-retry-period`. */
  leaderElectionRetryPeriodMs: number;
  /** `--leader-election-labels`: labels put on the Lease while this replica leads. */
  leaderElectionLabels: Record<string, string>;
  /** `--kube-api-qps`: client-side request rate towards the API server. */
  kubeApiQps: number;
  /** `--kube-api-burst`: client-side burst towards the API server. */
  kubeApiBurst: number;
  /** `--http-endpoint`: address of the metrics and `/healthz/leader-election` server. */
  httpEndpoint: string;
  /** `--metrics-address` (deprecated): address of a metrics-only server. */
  metricsAddress: string;
  /** `--metrics-path`: HTTP path of the metrics. */
  metricsPath: string;
  /** `--automaxprocs`: accepted for compatibility; no effect in this implementation. */
  automaxprocs: boolean;
  /** `--v`: log verbosity. */
  verbosity: number;
  /** `--vmodule`: accepted (and syntax-checked) for compatibility; ignored. */
  vmodule: string;
  /** `--logging-format`. */
  loggingFormat: LoggingFormat;
  /** `--log-flush-frequency`: accepted; lines are written unbuffered, so no effect. */
  logFlushFrequencyMs: number;
  /** `--log-text-split-stream`: accepted; ignored (every log line goes to stderr). */
  logTextSplitStream: boolean;
  /** `--log-text-info-buffer-size`: accepted (a Kubernetes quantity); ignored. */
  logTextInfoBufferSize: string;
  /** `--log-json-split-stream`: accepted; ignored (every log line goes to stderr). */
  logJsonSplitStream: boolean;
  /** `--log-json-info-buffer-size`: accepted (a Kubernetes quantity); ignored. */
  logJsonInfoBufferSize: string;
  /** `--dummy`: no CSI driver; driver name `csi/dummy` and the trivial handler (attacher v1). */
  dummy: boolean;
  /** Arguments left after the flags (Go ignores them; so does the attacher). */
  args: string[];
  /**
   * Every flag, sorted by name, with its value as the command line left it (the default when
   * not given), as Go's `flag.Value.String()` writes it: what `/flagz` shows. No flag of the
   * attacher holds a credential (`--kubeconfig` is a path; the file is never read for this).
   */
  flagValues: readonly FlagValue[];
}

/** One flag and its value as text (see {@link Options.flagValues}). */
export interface FlagValue {
  name: string;
  value: string;
}

/** The outcome of {@link parseOptions}. Nothing is printed and the process is never exited. */
export type ParseResult =
  /** Run with these options (after {@link validateOptions}). */
  | { readonly ok: true; readonly options: Options }
  /** `-h`/`-help`/`--help`: print `usage` to stderr and exit 0, like Go. */
  | { readonly ok: false; readonly help: true; readonly usage: string }
  /** `--version`: print `<argv0> <version>` to stdout and exit 0. */
  | { readonly ok: false; readonly version: true }
  /** A command-line syntax error: print `error`, then `usage`, to stderr and exit 2. */
  | { readonly ok: false; readonly error: string; readonly usage: string; readonly exitCode: 2 }
  /**
   * A configuration error Go reports after parsing (logging configuration, feature gates):
   * log `error` with `cause` as an error line and exit 1.
   */
  | { readonly ok: false; readonly error: string; readonly cause: Error; readonly exitCode: 1 };

/** Parses a decimal unsigned integer that fits in 31 bits, like `strconv.ParseUint(s, 10, 31)`. */
function parseUint31(text: string): number {
  if (!/^[0-9]+$/.test(text)) {
    throw new Error(`strconv.ParseUint: parsing ${goQuote(text)}: invalid syntax`);
  }
  const value = Number(text);
  if (value > 2 ** 31 - 1) {
    throw new Error(`strconv.ParseUint: parsing ${goQuote(text)}: value out of range`);
  }
  return value;
}

/** A Kubernetes resource quantity such as `512`, `1K`, `2Ki`, `3M`, `1e3`. */
const QUANTITY =
  /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$/;

function parseQuantity(text: string): string {
  if (!QUANTITY.test(text)) {
    throw new Error(
      "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
  }
  return text;
}

/** `--feature-gates` text: `A=true,B=false`, merged over earlier occurrences (`MapStringBool`). */
function parseFeatureGateMap(
  text: string,
  current: Readonly<Record<string, boolean>>,
): Record<string, boolean> {
  const result = { ...current };
  for (const item of text.split(",")) {
    if (item.trim() === "") continue;
    const eq = item.indexOf("=");
    if (eq < 0) throw new Error("malformed pair, expect string=bool");
    const key = item.slice(0, eq).trim();
    const value = item.slice(eq + 1).trim();
    try {
      result[key] = parseGoBool(value);
    } catch (err) {
      const reason = errorText(err);
      throw new Error(`invalid value of ${key}: ${value}, err: ${reason}`, { cause: err });
    }
  }
  return result;
}

/** `--leader-election-labels` text: `k:v,k2:v2`, merged over earlier occurrences. */
function parseLabels(
  text: string,
  current: Readonly<Record<string, string>>,
): Record<string, string> {
  const result = { ...current };
  for (const item of text.split(",")) {
    const parts = item.split(":");
    if (parts.length !== 2) throw new Error(`malformed item in list of labels: ${item}`);
    result[parts[0]!] = parts[1]!;
  }
  return result;
}

/** `--vmodule` text: `pattern=N,...`; checked like klog, then kept as text. */
function parseVmodule(text: string, current: string): string {
  for (const pattern of text.split(",")) {
    if (pattern === "") continue;
    const parts = pattern.split("=");
    if (parts.length !== 2 || parts[0] === "" || parts[1] === "") {
      throw new Error(`${goQuote(pattern)} does not have the pattern=N format`);
    }
    try {
      parseUint31(parts[1]!);
    } catch (err) {
      const reason = errorText(err);
      throw new Error(`parsing verbosity in ${goQuote(pattern)}: ${reason}`, { cause: err });
    }
  }
  return current === "" ? text : `${current},${text}`;
}

/** Every flag of the attacher, defined on one {@link FlagSet}. */
interface AttacherFlags {
  set: FlagSet;
  kubeconfig: Flag<string>;
  csiAddress: Flag<string>;
  timeout: Flag<number>;
  workerThreads: Flag<number>;
  attachWorkerThreads: Flag<number>;
  detachWorkerThreads: Flag<number>;
  logBacklogInterval: Flag<number>;
  retryIntervalStart: Flag<number>;
  retryIntervalMax: Flag<number>;
  resync: Flag<number>;
  reconcileSync: Flag<number>;
  reconcileTimeout: Flag<number>;
  maxEntries: Flag<number>;
  defaultFsType: Flag<string>;
  maxGrpcLogLength: Flag<number>;
  featureGates: Flag<Record<string, boolean>>;
  version: Flag<boolean>;
  leaderElection: Flag<boolean>;
  leaderElectionNamespace: Flag<string>;
  leaderElectionLeaseDuration: Flag<number>;
  leaderElectionRenewDeadline: Flag<number>;
  leaderElectionRetryPeriod: Flag<number>;
  leaderElectionLabels: Flag<Record<string, string>>;
  kubeApiQps: Flag<number>;
  kubeApiBurst: Flag<number>;
  httpEndpoint: Flag<string>;
  metricsAddress: Flag<string>;
  metricsPath: Flag<string>;
  automaxprocs: Flag<boolean>;
  v: Flag<number>;
  vmodule: Flag<string>;
  loggingFormat: Flag<string>;
  logFlushFrequency: Flag<number>;
  logTextSplitStream: Flag<boolean>;
  logTextInfoBufferSize: Flag<string>;
  logJsonSplitStream: Flag<boolean>;
  logJsonInfoBufferSize: Flag<string>;
  dummy: Flag<boolean>;
}

/** Default of `--log-backlog-interval`. */
const BACKLOG_INTERVAL_DEFAULT_MS = 30_000;

/**
 * A Go duration that is not negative, in ms. An unparsable one is Go's `errParse`, whose text
 * is exactly "parse error" (the detail is dropped, as Go's flag package drops it).
 */
function parseNonNegativeDuration(text: string): number {
  let ms: number;
  try {
    ms = parseGoDuration(text);
  } catch {
    throw new Error("parse error");
  }
  if (ms < 0) throw new Error("must not be negative");
  return ms;
}

const ALL_LOGS_TO_STDERR = "every log line is written to stderr, unbuffered";
const BUFFER_SIZE_USAGE =
  "the info messages can be buffered for a while to increase performance. The default value " +
  "of zero bytes disables buffering. The size can be specified as number of bytes (512), " +
  "multiples of 1000 (1K), multiples of 1024 (2Ki), or powers of those (3M, 4G, 5Mi, 6Gi).";

/** Defines every attacher flag on a new flag set named `program`. */
function defineFlags(program: string): AttacherFlags {
  const fs = new FlagSet({ name: program });
  return {
    set: fs,
    // cmd/csi-attacher/main.go
    kubeconfig: fs.string(
      "kubeconfig",
      "",
      "Absolute path to the kubeconfig file. Required only when running out of cluster.",
    ),
    resync: fs.duration("resync", 600_000, "Resync interval of the controller."),
    csiAddress: fs.string(
      "csi-address",
      "/run/csi/socket",
      "The gRPC endpoint for Target CSI Volume.",
    ),
    version: fs.bool("version", false, "Show version."),
    timeout: fs.duration(
      "timeout",
      15_000,
      "Timeout for waiting for attaching or detaching the volume.",
    ),
    workerThreads: fs.uint("worker-threads", 10, "Number of attacher worker threads"),
    maxEntries: fs.int(
      "max-entries",
      0,
      "Max entries per each page in volume lister call, 0 means no limit.",
    ),
    retryIntervalStart: fs.duration(
      "retry-interval-start",
      1_000,
      "Initial retry interval of failed create volume or deletion. It doubles with each failure, " +
        "up to retry-interval-max.",
    ),
    retryIntervalMax: fs.duration(
      "retry-interval-max",
      300_000,
      "Maximum retry interval of failed create volume or deletion.",
    ),
    leaderElection: fs.bool("leader-election", false, "Enable leader election."),
    leaderElectionNamespace: fs.string(
      "leader-election-namespace",
      "",
      "Namespace where the leader election resource lives. Defaults to the pod namespace if not set.",
    ),
    leaderElectionLeaseDuration: fs.duration(
      "leader-election-lease-duration",
      15_000,
      "Duration, in seconds, that non-leader candidates will wait to force acquire leadership. " +
        "Defaults to 15 seconds.",
    ),
    leaderElectionRenewDeadline: fs.duration(
      "leader-election-renew-deadline",
      10_000,
      "Duration, in seconds, that the acting leader will retry refreshing leadership before " +
        "giving up. Defaults to 10 seconds.",
    ),
    leaderElectionRetryPeriod: fs.duration(
      "leader-election-retry-period",
      5_000,
      "Duration, in seconds, the LeaderElector clients should wait between tries of actions. " +
        "Defaults to 5 seconds.",
    ),
    leaderElectionLabels: fs.custom<Record<string, string>>(
      "leader-election-labels",
      {},
      "List of labels to add to lease when given replica becomes leader. Formatted as a comma " +
        "separated list of key:value labels. " +
        "Example: 'my-label:my-value,my-second-label:my-second-value'",
      {
        parse: parseLabels,
        format: (labels) => Object.entries(labels).sort().map(([k, v]) => `${k}:${v}`).join(","),
      },
    ),
    defaultFsType: fs.string(
      "default-fstype",
      "",
      "The default filesystem type of the volume to publish. Defaults to empty string",
    ),
    reconcileSync: fs.duration(
      "reconcile-sync",
      60_000,
      "Resync interval of the VolumeAttachment reconciler.",
    ),
    metricsAddress: fs.string(
      "metrics-address",
      "",
      "(deprecated) The TCP network address where the prometheus metrics endpoint will listen " +
        "(example: `:8080`). The default is empty string, which means metrics endpoint is " +
        "disabled. Only one of `--metrics-address` and `--http-endpoint` can be set.",
      { deprecated: "use --http-endpoint, which also serves /healthz/leader-election." },
    ),
    httpEndpoint: fs.string(
      "http-endpoint",
      "",
      "The TCP network address where the HTTP server for diagnostics, including metrics and " +
        "leader election health check, will listen (example: `:8080`). The default is empty " +
        "string, which means the server is disabled. Only one of `--metrics-address` and " +
        "`--http-endpoint` can be set.",
    ),
    metricsPath: fs.string(
      "metrics-path",
      "/metrics",
      "The HTTP path where prometheus metrics will be exposed. Default is `/metrics`.",
    ),
    kubeApiQps: fs.float(
      "kube-api-qps",
      5,
      "QPS to use while communicating with the kubernetes apiserver. Defaults to 5.0.",
    ),
    kubeApiBurst: fs.int(
      "kube-api-burst",
      10,
      "Burst to use while communicating with the kubernetes apiserver. Defaults to 10.",
    ),
    maxGrpcLogLength: fs.int(
      "max-grpc-log-length",
      -1,
      "The maximum amount of characters logged for every grpc responses. Defaults to no limit",
    ),
    featureGates: fs.custom<Record<string, boolean>>("feature-gates", {}, featureGatesUsage(), {
      parse: parseFeatureGateMap,
    }),
    // csi-lib-utils standardflags.AddAutomaxprocs
    automaxprocs: fs.custom<boolean>(
      "automaxprocs",
      false,
      "automatically set GOMAXPROCS to match Linux container CPU quota",
      {
        parse: (text) => parseGoBool(text),
        isBool: true,
        typeName: "",
        ignored: "accepted for compatibility with the Go sidecar; the runtime sizes itself.",
      },
    ),
    // component-base logsapi.AddGoFlags
    v: fs.custom<number>("v", 0, "number for the log level verbosity", {
      parse: (text) => parseUint31(text),
    }),
    vmodule: fs.custom<string>(
      "vmodule",
      "",
      "comma-separated list of pattern=N settings for file-filtered logging (only works for text " +
        "log format)",
      {
        parse: parseVmodule,
        ignored: "accepted and syntax-checked for compatibility; --v applies to every line.",
      },
    ),
    loggingFormat: fs.string(
      "logging-format",
      "text",
      'Sets the log format. Permitted formats: "json", "text".',
    ),
    logFlushFrequency: fs.duration(
      "log-flush-frequency",
      5_000,
      "Maximum number of seconds between log flushes",
      { ignored: "log lines are written unbuffered." },
    ),
    logTextSplitStream: fs.bool(
      "log-text-split-stream",
      false,
      "[Alpha] In text format, write error messages to stderr and info messages to stdout.",
      { ignored: ALL_LOGS_TO_STDERR },
    ),
    logTextInfoBufferSize: fs.custom<string>(
      "log-text-info-buffer-size",
      "0",
      `[Alpha] In text format with split output streams, ${BUFFER_SIZE_USAGE}`,
      { parse: parseQuantity, ignored: ALL_LOGS_TO_STDERR },
    ),
    logJsonSplitStream: fs.bool(
      "log-json-split-stream",
      false,
      "[Alpha] In JSON format, write error messages to stderr and info messages to stdout.",
      { ignored: ALL_LOGS_TO_STDERR },
    ),
    logJsonInfoBufferSize: fs.custom<string>(
      "log-json-info-buffer-size",
      "0",
      `[Alpha] In JSON format with split output streams, ${BUFFER_SIZE_USAGE}`,
      { parse: parseQuantity, ignored: ALL_LOGS_TO_STDERR },
    ),
    // Beyond the Go attacher: https://github.com/kubernetes-csi/external-attacher/issues/761
    attachWorkerThreads: fs.uint(
      "attach-worker-threads",
      0,
      "Number of workers that attach volumes (VolumeAttachments not being deleted), apart from " +
        "the detach workers so that detaches never delay attaches. 0 means --worker-threads.",
    ),
    detachWorkerThreads: fs.uint(
      "detach-worker-threads",
      0,
      "Number of workers that detach volumes (VolumeAttachments being deleted). 0 means " +
        "--worker-threads.",
    ),
    // Beyond the Go attacher: https://github.com/kubernetes-csi/external-attacher/issues/356
    reconcileTimeout: fs.custom<number>(
      "reconcile-timeout",
      0,
      "Timeout of one ListVolumes reconcile pass, all its pages included. 0 means the value of " +
        "--timeout, which keeps bounding each ControllerPublish/ControllerUnpublish call. " +
        "See https://github.com/kubernetes-csi/external-attacher/issues/356.",
      { parse: parseNonNegativeDuration, typeName: "duration", format: formatGoDuration },
    ),
    // Beyond the Go attacher: https://github.com/kubernetes-csi/external-attacher/issues/706
    logBacklogInterval: fs.custom<number>(
      "log-backlog-interval",
      BACKLOG_INTERVAL_DEFAULT_MS,
      "How often to log the work queues that have items waiting longer than this interval, with " +
        "their depth and the oldest waiting item and its age. 0 disables it.",
      {
        parse: parseNonNegativeDuration,
        typeName: "duration",
        defaultText: formatGoDuration(BACKLOG_INTERVAL_DEFAULT_MS),
        format: formatGoDuration,
      },
    ),
    // From attacher v1 (removed from the Go attacher in v2.0): the controller runs without a
    // driver, its handler the trivial one (lib/controller/build.ts, `DUMMY_DRIVER`): the process
    // tests run the attacher this way where a driver would add nothing.
    dummy: fs.bool(
      "dummy",
      false,
      "Run without a CSI driver: the driver name is csi/dummy and every VolumeAttachment of " +
        "that driver is marked attached (the trivial handler).",
    ),
  };
}

/** The exit-1 result for a logging configuration Go's `ValidateAndApply` rejects. */
function invalidLogging(reason: string): ParseResult {
  return {
    ok: false,
    error: "LoggingConfiguration is invalid",
    cause: new Error(reason),
    exitCode: 1,
  };
}

/**
 * Parses the attacher's command line (without the program name), in the Go binary's order:
 * flags (errors: exit 2 with usage), then the logging configuration and the feature gates
 * (errors: exit 1), then `--version`.
 *
 * Never prints and never exits; see {@link ParseResult} for what the caller does with each
 * outcome. Cross-flag checks made later in the Go startup are in {@link validateOptions}.
 *
 * @param args the arguments after the program name
 * @param options.program the name shown in the usage text (default `csi-attacher`)
 */
export function parseOptions(
  args: readonly string[],
  options: { program?: string } = {},
): ParseResult {
  const flags = defineFlags(options.program ?? COMPONENT_NAME);
  let rest: string[];
  try {
    const parsed = flags.set.parse(args);
    if (parsed.helpRequested) return { ok: false, help: true, usage: flags.set.usage() };
    rest = parsed.args;
  } catch (err) {
    if (err instanceof FlagError) {
      return { ok: false, error: err.message, usage: flags.set.usage(), exitCode: 2 };
    }
    throw err;
  }

  // component-base's ValidateAndApply, which Go runs right after parsing.
  const loggingFormat = flags.loggingFormat.value;
  if (loggingFormat !== "text" && loggingFormat !== "json") {
    const reason = `format: Unsupported value: ${
      goQuote(loggingFormat)
    }: supported values: "json", "text"`;
    return invalidLogging(reason);
  }
  if (loggingFormat !== "text" && flags.vmodule.value !== "") {
    return invalidLogging("vmodule: Forbidden: only supported for text log format");
  }

  let featureGates: FeatureGates;
  try {
    featureGates = resolveFeatureGates(flags.featureGates.value);
  } catch (err) {
    const cause = err instanceof Error ? err : new Error(String(err));
    return { ok: false, error: "failed to store flag gates", cause, exitCode: 1 };
  }

  if (flags.version.value) return { ok: false, version: true };

  return { ok: true, options: optionsOf(flags, { loggingFormat, featureGates, args: rest }) };
}

/**
 * The {@link Options} of parsed flags, with the values parsing checked apart and the zero
 * values that mean another flag's resolved.
 */
function optionsOf(
  flags: AttacherFlags,
  checked: { loggingFormat: LoggingFormat; featureGates: FeatureGates; args: string[] },
): Options {
  return {
    kubeconfig: flags.kubeconfig.value,
    csiAddress: flags.csiAddress.value,
    timeoutMs: flags.timeout.value,
    reconcileTimeoutMs: flags.reconcileTimeout.value || flags.timeout.value,
    workerThreads: flags.workerThreads.value,
    attachWorkerThreads: flags.attachWorkerThreads.value || flags.workerThreads.value,
    detachWorkerThreads: flags.detachWorkerThreads.value || flags.workerThreads.value,
    logBacklogIntervalMs: flags.logBacklogInterval.value,
    retryIntervalStartMs: flags.retryIntervalStart.value,
    retryIntervalMaxMs: flags.retryIntervalMax.value,
    resyncMs: flags.resync.value,
    reconcileSyncMs: flags.reconcileSync.value,
    maxEntries: flags.maxEntries.value,
    defaultFsType: flags.defaultFsType.value,
    maxGrpcLogLength: flags.maxGrpcLogLength.value,
    featureGates: checked.featureGates,
    leaderElection: flags.leaderElection.value,
    leaderElectionNamespace: flags.leaderElectionNamespace.value,
    leaderElectionLeaseDurationMs: flags.leaderElectionLeaseDuration.value,
    leaderElectionRenewDeadlineMs: flags.leaderElectionRenewDeadline.value,
    leaderElectionRetryPeriodMs: flags.leaderElectionRetryPeriod.value,
    leaderElectionLabels: { ...flags.leaderElectionLabels.value },
    kubeApiQps: flags.kubeApiQps.value,
    kubeApiBurst: flags.kubeApiBurst.value,
    httpEndpoint: flags.httpEndpoint.value,
    metricsAddress: flags.metricsAddress.value,
    metricsPath: flags.metricsPath.value,
    automaxprocs: flags.automaxprocs.value,
    verbosity: flags.v.value,
    vmodule: flags.vmodule.value,
    loggingFormat: checked.loggingFormat,
    logFlushFrequencyMs: flags.logFlushFrequency.value,
    logTextSplitStream: flags.logTextSplitStream.value,
    logTextInfoBufferSize: flags.logTextInfoBufferSize.value,
    logJsonSplitStream: flags.logJsonSplitStream.value,
    logJsonInfoBufferSize: flags.logJsonInfoBufferSize.value,
    dummy: flags.dummy.value,
    args: checked.args,
    flagValues: flags.set.flags().map((f) => ({ name: f.name, value: f.valueText() })),
  };
}

/**
 * The cross-flag checks the Go attacher makes during startup, which end it with status 1 (not
 * the usage error status 2), in Go's order. The caller logs the message as an error line
 * (without an `err` value) and exits 1.
 *
 * @returns the first problem's message, or undefined when the options are usable
 */
export function validateOptions(options: Options): string | undefined {
  if (options.metricsAddress !== "" && options.httpEndpoint !== "") {
    return "Only one of `--metrics-address` and `--http-endpoint` can be set";
  }
  if (options.workerThreads === 0) {
    return "Option -worker-threads must be greater than zero";
  }
  return undefined;
}
