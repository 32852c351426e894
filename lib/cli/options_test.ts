import assert from "node:assert/strict";
import { type Options, parseOptions, type ParseResult, validateOptions } from "./options.ts";

/** The usage text `-help` returns (Go's `flag.Usage`), for `program`. */
function usageText(program?: string): string {
  const result = parseOptions(["-help"], program === undefined ? {} : { program });
  assert.ok("help" in result);
  return result.usage;
}

/** Parses `args` and returns the options, failing the test on any other outcome. */
function options(args: string[]): Options {
  const result = parseOptions(args);
  if (!result.ok) assert.fail(`expected options, got ${JSON.stringify(result)}`);
  return result.options;
}

/** Asserts a command-line (exit 2) error with `message`, and that the usage comes with it. */
function assertUsageError(result: ParseResult, message: string): void {
  assert.ok("exitCode" in result && result.exitCode === 2, JSON.stringify(result));
  assert.equal(result.error, message);
  assert.ok(result.usage.startsWith("Usage of csi-attacher:\n"));
}

Deno.test("parseOptions() defaults equal the Go attacher's (cmd/csi-attacher/main.go)", () => {
  const { flagValues: _, ...parsed } = options([]);
  assert.deepEqual(parsed, {
    kubeconfig: "",
    csiAddress: "/run/csi/socket",
    timeoutMs: 15_000,
    reconcileTimeoutMs: 15_000,
    workerThreads: 10,
    attachWorkerThreads: 10,
    detachWorkerThreads: 10,
    logBacklogIntervalMs: 30_000,
    retryIntervalStartMs: 1_000,
    retryIntervalMaxMs: 300_000,
    resyncMs: 600_000,
    reconcileSyncMs: 60_000,
    maxEntries: 0,
    defaultFsType: "",
    maxGrpcLogLength: -1,
    featureGates: {
      ReleaseLeaderElectionOnExit: true,
      MutableCSINodeAllocatableCount: true,
      WarmStandby: true,
    },
    leaderElection: false,
    leaderElectionNamespace: "",
    leaderElectionLeaseDurationMs: 15_000,
    leaderElectionRenewDeadlineMs: 10_000,
    leaderElectionRetryPeriodMs: 5_000,
    leaderElectionLabels: {},
    kubeApiQps: 5,
    kubeApiBurst: 10,
    httpEndpoint: "",
    metricsAddress: "",
    metricsPath: "/metrics",
    automaxprocs: false,
    verbosity: 0,
    vmodule: "",
    loggingFormat: "text",
    logFlushFrequencyMs: 5_000,
    logTextSplitStream: false,
    logTextInfoBufferSize: "0",
    logJsonSplitStream: false,
    logJsonInfoBufferSize: "0",
    dummy: false,
    args: [],
  });
});

Deno.test("parseOptions() reads the shipped deployment's command line", () => {
  const o = options([
    "--v=5",
    "--csi-address=/csi/csi.sock",
    "--leader-election",
    "--http-endpoint=:8080",
  ]);
  assert.equal(o.verbosity, 5);
  assert.equal(o.csiAddress, "/csi/csi.sock");
  assert.equal(o.leaderElection, true);
  assert.equal(o.httpEndpoint, ":8080");
});

Deno.test("parseOptions() sets every flag, in single-dash and separate-value forms", () => {
  const o = options([
    "-kubeconfig",
    "/etc/kube.conf",
    "-csi-address",
    "/csi.sock",
    "-timeout",
    "1m30s",
    "-worker-threads",
    "3",
    "-retry-interval-start",
    "500ms",
    "-retry-interval-max",
    "1h",
    "-resync",
    "0",
    "-reconcile-sync",
    "2m",
    "-reconcile-timeout",
    "10m",
    "-max-entries",
    "100",
    "-default-fstype",
    "xfs",
    "-max-grpc-log-length",
    "200",
    "-feature-gates",
    "ReleaseLeaderElectionOnExit=true",
    "-leader-election=true",
    "-leader-election-namespace",
    "kube-system",
    "-leader-election-lease-duration",
    "30s",
    "-leader-election-renew-deadline",
    "20s",
    "-leader-election-retry-period",
    "2s",
    "-leader-election-labels",
    "app:attacher",
    "-kube-api-qps",
    "20.5",
    "-kube-api-burst",
    "40",
    "-metrics-address",
    ":9090",
    "-metrics-path",
    "/m",
    "-automaxprocs",
    "-v",
    "4",
    "-vmodule",
    "controller=5",
    "-logging-format",
    "text",
    "-log-flush-frequency",
    "1s",
    "-log-text-split-stream",
    "-log-text-info-buffer-size",
    "64Ki",
    "-log-json-split-stream=true",
    "-log-json-info-buffer-size",
    "1M",
    "-dummy",
    "rest",
  ]);
  const { flagValues, ...parsed } = o;
  assert.equal(flagValues.find((f) => f.name === "vmodule")?.value, "controller=5");
  assert.equal(flagValues.find((f) => f.name === "metrics-address")?.value, ":9090");
  assert.deepEqual(parsed, {
    kubeconfig: "/etc/kube.conf",
    csiAddress: "/csi.sock",
    timeoutMs: 90_000,
    reconcileTimeoutMs: 600_000,
    workerThreads: 3,
    attachWorkerThreads: 3,
    detachWorkerThreads: 3,
    logBacklogIntervalMs: 30_000,
    retryIntervalStartMs: 500,
    retryIntervalMaxMs: 3_600_000,
    resyncMs: 0,
    reconcileSyncMs: 120_000,
    maxEntries: 100,
    defaultFsType: "xfs",
    maxGrpcLogLength: 200,
    featureGates: {
      ReleaseLeaderElectionOnExit: true,
      MutableCSINodeAllocatableCount: true,
      WarmStandby: true,
    },
    leaderElection: true,
    leaderElectionNamespace: "kube-system",
    leaderElectionLeaseDurationMs: 30_000,
    leaderElectionRenewDeadlineMs: 20_000,
    leaderElectionRetryPeriodMs: 2_000,
    leaderElectionLabels: { app: "attacher" },
    kubeApiQps: 20.5,
    kubeApiBurst: 40,
    httpEndpoint: "",
    metricsAddress: ":9090",
    metricsPath: "/m",
    automaxprocs: true,
    verbosity: 4,
    vmodule: "controller=5",
    loggingFormat: "text",
    logFlushFrequencyMs: 1_000,
    logTextSplitStream: true,
    logTextInfoBufferSize: "64Ki",
    logJsonSplitStream: true,
    logJsonInfoBufferSize: "1M",
    dummy: true,
    args: ["rest"],
  });
});

Deno.test("parseOptions() treats `--leader-election false` as enabled and stops there", () => {
  const o = options(["--leader-election", "false", "--timeout=1s"]);
  assert.equal(o.leaderElection, true);
  assert.equal(o.timeoutMs, 15_000);
  assert.deepEqual(o.args, ["false", "--timeout=1s"]);
  assert.equal(options(["--leader-election=false"]).leaderElection, false);
});

Deno.test("parseOptions() stops at `--`", () => {
  const o = options(["--v=2", "--", "--v=9"]);
  assert.equal(o.verbosity, 2);
  assert.deepEqual(o.args, ["--v=9"]);
});

Deno.test("parseOptions() reports command-line errors with exit code 2 and the usage", () => {
  assertUsageError(parseOptions(["--bogus"]), "flag provided but not defined: -bogus");
  assertUsageError(parseOptions(["--csi-address"]), "flag needs an argument: -csi-address");
  assertUsageError(
    parseOptions(["--timeout=abc"]),
    'invalid value "abc" for flag -timeout: parse error',
  );
  assertUsageError(
    parseOptions(["--worker-threads=-1"]),
    'invalid value "-1" for flag -worker-threads: parse error',
  );
  assertUsageError(
    parseOptions(["--kube-api-qps=x"]),
    'invalid value "x" for flag -kube-api-qps: parse error',
  );
  assertUsageError(
    parseOptions(["--kube-api-burst=1.5"]),
    'invalid value "1.5" for flag -kube-api-burst: parse error',
  );
  assertUsageError(
    parseOptions(["--leader-election=yes"]),
    'invalid boolean value "yes" for -leader-election: parse error',
  );
  assertUsageError(
    parseOptions(["--v=-1"]),
    'invalid value "-1" for flag -v: strconv.ParseUint: parsing "-1": invalid syntax',
  );
  assertUsageError(
    parseOptions(["--v=2147483648"]),
    'invalid value "2147483648" for flag -v: strconv.ParseUint: parsing "2147483648": ' +
      "value out of range",
  );
  assertUsageError(
    parseOptions(["--vmodule=controller"]),
    'invalid value "controller" for flag -vmodule: "controller" does not have the pattern=N format',
  );
  assertUsageError(
    parseOptions(["--vmodule=c=x"]),
    'invalid value "c=x" for flag -vmodule: parsing verbosity in "c=x": ' +
      'strconv.ParseUint: parsing "x": invalid syntax',
  );
  assertUsageError(
    parseOptions(["--log-json-info-buffer-size=lots"]),
    'invalid value "lots" for flag -log-json-info-buffer-size: quantities must match the ' +
      "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
  );
  assertUsageError(parseOptions(["---v=1"]), "bad flag syntax: ---v=1");
});

Deno.test("parseOptions() returns the same usage for -h, -help and --help", () => {
  for (const arg of ["-h", "--help"]) {
    const result = parseOptions([arg]);
    assert.ok("help" in result, arg);
    assert.equal(result.usage, usageText());
  }
});

Deno.test("parseOptions() returns a version request for --version", () => {
  assert.deepEqual(parseOptions(["--version"]), { ok: false, version: true });
  assert.deepEqual(parseOptions(["-version", "--worker-threads=0"]), { ok: false, version: true });
});

Deno.test("parseOptions() reads --feature-gates as a merged name=bool map", () => {
  assert.deepEqual(
    options([
      "--feature-gates=ReleaseLeaderElectionOnExit=true,MutableCSINodeAllocatableCount=false",
    ])
      .featureGates,
    { ReleaseLeaderElectionOnExit: true, MutableCSINodeAllocatableCount: false, WarmStandby: true },
  );
  assert.deepEqual(
    options([
      "--feature-gates",
      " ReleaseLeaderElectionOnExit = t ,",
      "--feature-gates=MutableCSINodeAllocatableCount=0",
    ]).featureGates,
    { ReleaseLeaderElectionOnExit: true, MutableCSINodeAllocatableCount: false, WarmStandby: true },
  );
  assert.deepEqual(options(["--feature-gates="]).featureGates, {
    ReleaseLeaderElectionOnExit: true,
    MutableCSINodeAllocatableCount: true,
    WarmStandby: true,
  });
});

Deno.test("parseOptions() rejects malformed --feature-gates text as a command-line error", () => {
  assertUsageError(
    parseOptions(["--feature-gates=ReleaseLeaderElectionOnExit"]),
    'invalid value "ReleaseLeaderElectionOnExit" for flag -feature-gates: ' +
      "malformed pair, expect string=bool",
  );
  assertUsageError(
    parseOptions(["--feature-gates=ReleaseLeaderElectionOnExit=yes"]),
    'invalid value "ReleaseLeaderElectionOnExit=yes" for flag -feature-gates: invalid value of ' +
      'ReleaseLeaderElectionOnExit: yes, err: strconv.ParseBool: parsing "yes": invalid syntax',
  );
});

Deno.test("parseOptions() rejects an unknown feature gate after parsing, with exit code 1", () => {
  const result = parseOptions(["--feature-gates=Bogus=true"]);
  assert.ok("exitCode" in result && result.exitCode === 1, JSON.stringify(result));
  assert.equal(result.error, "failed to store flag gates");
  assert.equal(result.cause.message, "unrecognized feature gate: Bogus");
});

Deno.test("parseOptions() reads --leader-election-labels as merged k:v pairs", () => {
  assert.deepEqual(
    options(["--leader-election-labels=a:1,b:2", "--leader-election-labels", "c:,a:3"])
      .leaderElectionLabels,
    { a: "3", b: "2", c: "" },
  );
  for (const bad of ["a", "a:1:2", "a:1,", ""]) {
    const item = bad === "a:1," ? "" : bad;
    assertUsageError(
      parseOptions([`--leader-election-labels=${bad}`]),
      `invalid value ${JSON.stringify(bad)} for flag -leader-election-labels: ` +
        `malformed item in list of labels: ${item}`,
    );
  }
});

Deno.test("parseOptions() rejects an unknown --logging-format after parsing, with exit code 1", () => {
  assert.equal(options(["--logging-format=json"]).loggingFormat, "json");
  const result = parseOptions(["--logging-format=xml"]);
  assert.ok("exitCode" in result && result.exitCode === 1, JSON.stringify(result));
  assert.equal(result.error, "LoggingConfiguration is invalid");
  assert.equal(
    result.cause.message,
    'format: Unsupported value: "xml": supported values: "json", "text"',
  );
  const vmodule = parseOptions(["--logging-format=json", "--vmodule=a=1"]);
  assert.ok("exitCode" in vmodule && vmodule.exitCode === 1, JSON.stringify(vmodule));
});

Deno.test("parseOptions() checks the logging configuration before --version, like Go", () => {
  const result = parseOptions(["--version", "--logging-format=xml"]);
  assert.ok("exitCode" in result && result.exitCode === 1);
});

Deno.test("parseOptions() joins repeated --vmodule values", () => {
  assert.equal(options(["--vmodule=a=1", "--vmodule=b*=2,"]).vmodule, "a=1,b*=2,");
});

Deno.test("parseOptions() sizes the attach and detach workers from --worker-threads unless set", () => {
  const sized = options(["--worker-threads=4"]);
  assert.equal(sized.attachWorkerThreads, 4);
  assert.equal(sized.detachWorkerThreads, 4);
  const own = options([
    "--worker-threads=4",
    "--attach-worker-threads=2",
    "-detach-worker-threads",
    "7",
  ]);
  assert.equal(own.attachWorkerThreads, 2);
  assert.equal(own.detachWorkerThreads, 7);
  assertUsageError(
    parseOptions(["--detach-worker-threads=-1"]),
    'invalid value "-1" for flag -detach-worker-threads: parse error',
  );
});

Deno.test("parseOptions() reads --log-backlog-interval; 0 disables, negative or bad is exit 2", () => {
  assert.equal(options(["--log-backlog-interval=1m30s"]).logBacklogIntervalMs, 90_000);
  assert.equal(options(["--log-backlog-interval", "0"]).logBacklogIntervalMs, 0);
  assertUsageError(
    parseOptions(["--log-backlog-interval=-5s"]),
    'invalid value "-5s" for flag -log-backlog-interval: must not be negative',
  );
  assertUsageError(
    parseOptions(["--log-backlog-interval=often"]),
    'invalid value "often" for flag -log-backlog-interval: parse error',
  );
});

Deno.test("validateOptions() accepts the defaults", () => {
  assert.equal(validateOptions(options([])), undefined);
});

Deno.test("validateOptions() rejects --metrics-address together with --http-endpoint", () => {
  assert.equal(
    validateOptions(options(["--metrics-address=:8080", "--http-endpoint=:8081"])),
    "Only one of `--metrics-address` and `--http-endpoint` can be set",
  );
  assert.equal(validateOptions(options(["--metrics-address=:8080"])), undefined);
});

Deno.test("validateOptions() rejects zero worker threads", () => {
  assert.equal(
    validateOptions(options(["--worker-threads=0"])),
    "Option -worker-threads must be greater than zero",
  );
});

Deno.test("the usage lists every flag with its type and non-zero default", () => {
  const usage = usageText();
  assert.ok(usage.startsWith("Usage of csi-attacher:\n"));
  const expected: Array<[string, string | undefined]> = [
    ["  -attach-worker-threads uint\n", undefined],
    ["  -automaxprocs\n", undefined],
    ["  -csi-address string\n", '(default "/run/csi/socket")'],
    ["  -default-fstype string\n", undefined],
    ["  -detach-worker-threads uint\n", undefined],
    ["  -dummy\n", undefined],
    ["  -feature-gates value\n", undefined],
    ["  -http-endpoint :8080\n", undefined],
    ["  -kube-api-burst int\n", "(default 10)"],
    ["  -kube-api-qps float\n", "(default 5)"],
    ["  -kubeconfig string\n", undefined],
    ["  -leader-election\n", undefined],
    ["  -leader-election-labels value\n", undefined],
    ["  -leader-election-lease-duration duration\n", "(default 15s)"],
    ["  -leader-election-namespace string\n", undefined],
    ["  -leader-election-renew-deadline duration\n", "(default 10s)"],
    ["  -leader-election-retry-period duration\n", "(default 5s)"],
    ["  -log-backlog-interval duration\n", "(default 30s)"],
    ["  -log-flush-frequency duration\n", "(default 5s)"],
    ["  -log-json-info-buffer-size value\n", undefined],
    ["  -log-json-split-stream\n", undefined],
    ["  -log-text-info-buffer-size value\n", undefined],
    ["  -log-text-split-stream\n", undefined],
    ["  -logging-format string\n", '(default "text")'],
    ["  -max-entries int\n", undefined],
    ["  -max-grpc-log-length int\n", "(default -1)"],
    ["  -metrics-address :8080\n", undefined],
    ["  -metrics-path /metrics\n", '(default "/metrics")'],
    ["  -reconcile-sync duration\n", "(default 1m0s)"],
    ["  -reconcile-timeout duration\n", undefined],
    ["  -resync duration\n", "(default 10m0s)"],
    ["  -retry-interval-max duration\n", "(default 5m0s)"],
    ["  -retry-interval-start duration\n", "(default 1s)"],
    ["  -timeout duration\n", "(default 15s)"],
    ["  -v value\n", undefined],
    ["  -version\n", undefined],
    ["  -vmodule value\n", undefined],
    ["  -worker-threads uint\n", "(default 10)"],
  ];
  // Split the usage into one entry per flag, in order.
  const entries = usage.slice("Usage of csi-attacher:\n".length).split(/(?=^ {2}-)/m);
  assert.equal(entries.length, expected.length);
  expected.forEach(([head, defaultText], i) => {
    const entry = entries[i]!;
    assert.ok(entry.startsWith(head), `entry ${i}: ${JSON.stringify(entry)} !~ ${head}`);
    if (defaultText === undefined) assert.ok(!entry.includes("(default "), entry);
    else assert.ok(entry.trimEnd().endsWith(defaultText), entry);
  });
  assert.match(usage, /ReleaseLeaderElectionOnExit=true\|false \(ALPHA - default=true\)/);
  assert.match(usage, /MutableCSINodeAllocatableCount=true\|false \(GA - default=true\)/);
  assert.match(usage, /WarmStandby=true\|false \(BETA - default=true\)/);
  assert.match(usage, /-metrics-address[^]*DEPRECATED: use --http-endpoint/);
  assert.match(usage, /-automaxprocs\n[^\n]*\n {4}\tNo effect: /);
});

Deno.test("the usage names the program given", () => {
  assert.ok(usageText("/csi-attacher").startsWith("Usage of /csi-attacher:\n"));
  const result = parseOptions(["--bogus"], { program: "/bin/x" });
  assert.ok("usage" in result && result.usage.startsWith("Usage of /bin/x:\n"));
});

Deno.test("parseOptions() reads --reconcile-timeout; 0 or unset means --timeout, negative or bad is exit 2", () => {
  assert.equal(options([]).reconcileTimeoutMs, 15_000);
  assert.equal(options(["--timeout=30s"]).reconcileTimeoutMs, 30_000, "follows --timeout");
  assert.equal(options(["--timeout=30s", "--reconcile-timeout=0"]).reconcileTimeoutMs, 30_000);
  const o = options(["--timeout=5s", "--reconcile-timeout=2m"]);
  assert.equal(o.reconcileTimeoutMs, 120_000);
  assert.equal(o.timeoutMs, 5_000, "--timeout keeps bounding each publish and unpublish");
  assertUsageError(
    parseOptions(["--reconcile-timeout=-1s"]),
    'invalid value "-1s" for flag -reconcile-timeout: must not be negative',
  );
  assertUsageError(
    parseOptions(["--reconcile-timeout=soon"]),
    'invalid value "soon" for flag -reconcile-timeout: parse error',
  );
  assert.match(
    usageText(),
    /-reconcile-timeout duration\n[^\n]*--timeout[^\n]*external-attacher\/issues\/356/,
    "--help names upstream external-attacher#356",
  );
});

Deno.test("parseOptions() lists every flag with its value as Go prints it, for /flagz", () => {
  const text = (args: string[]) => options(args).flagValues.map((f) => `${f.name}=${f.value}`);
  const defaults = text([]);
  assert.deepEqual(
    defaults.map((line) => line.slice(0, line.indexOf("="))),
    [...usageText().matchAll(/^ {2}-([a-z0-9-]+)/gm)].map((m) => m[1]!),
    "every flag of the usage, in its order",
  );
  for (
    const line of [
      "csi-address=/run/csi/socket",
      "kubeconfig=",
      "timeout=15s",
      "resync=10m0s",
      "reconcile-sync=1m0s",
      "reconcile-timeout=0s",
      "log-backlog-interval=30s",
      "kube-api-qps=5",
      "kube-api-burst=10",
      "leader-election=false",
      "feature-gates=",
      "max-grpc-log-length=-1",
      "v=0",
    ]
  ) assert.ok(defaults.includes(line), line);
  const set = text([
    "--kubeconfig=/etc/kube/config",
    "--timeout=90s",
    "--reconcile-timeout=2m",
    "--kube-api-qps=7.5",
    "--feature-gates=ReleaseLeaderElectionOnExit=false",
    "--leader-election-labels=b:2,a:1",
    "--v=5",
  ]);
  for (
    const line of [
      "kubeconfig=/etc/kube/config",
      "timeout=1m30s",
      "reconcile-timeout=2m0s",
      "kube-api-qps=7.5",
      "feature-gates=ReleaseLeaderElectionOnExit=false",
      "leader-election-labels=a:1,b:2",
      "v=5",
    ]
  ) assert.ok(set.includes(line), line);
});
