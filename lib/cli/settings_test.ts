import assert from "node:assert/strict";
import { parseOptions, validateOptions } from "./options.ts";
import { type ComponentSettings, componentSettings, loggingSettings } from "./settings.ts";

/** The settings of a command line, failing the test when it does not parse. */
function settings(args: string[]): ComponentSettings {
  const result = parseOptions(args);
  if (!result.ok) assert.fail(`expected options, got ${JSON.stringify(result)}`);
  return componentSettings(result.options);
}

Deno.test("componentSettings() gives each component the defaults of its flags", () => {
  const { http, ...rest } = settings([]);
  assert.equal(http, undefined, "no HTTP endpoint by default");
  assert.deepEqual(rest, {
    logging: { verbosity: 0, format: "text" },
    kubeClient: { kubeconfig: "", qps: 5, burst: 10 },
    csi: {
      dummy: false,
      address: "/run/csi/socket",
      callTimeoutMs: 15_000,
      maxGrpcLogLength: -1,
    },
    controller: {
      resyncMs: 600_000,
      retry: { baseMs: 1_000, maxMs: 300_000 },
      workers: 10,
      attachWorkers: 10,
      detachWorkers: 10,
      reconcileSyncMs: 60_000,
      logBacklogIntervalMs: 30_000,
      handler: { defaultFsType: "", attachErrorCodes: true },
      reconciler: { timeoutMs: 15_000, maxEntries: 0 },
    },
    elector: undefined,
    events: { drainMs: 10_000 },
  });
});

Deno.test("componentSettings() carries every flag a component reads to that component", () => {
  const s = settings([
    "--kubeconfig=/k",
    "--kube-api-qps=20",
    "--kube-api-burst=40",
    "--csi-address=unix:///csi.sock",
    "--timeout=7s",
    "--max-grpc-log-length=100",
    "--resync=1m",
    "--retry-interval-start=2s",
    "--retry-interval-max=1m",
    "--worker-threads=3",
    "--detach-worker-threads=5",
    "--reconcile-sync=2m",
    "--reconcile-timeout=40s",
    "--max-entries=50",
    "--default-fstype=ext4",
    "--log-backlog-interval=0",
    "--feature-gates=MutableCSINodeAllocatableCount=false,ReleaseLeaderElectionOnExit=false",
    "--feature-gates=WarmStandby=false",
    "--leader-election",
    "--leader-election-namespace=ns",
    "--leader-election-lease-duration=30s",
    "--leader-election-renew-deadline=20s",
    "--leader-election-retry-period=4s",
    "--leader-election-labels=a:1",
    "--http-endpoint=:8080",
    "--metrics-path=/m",
    "--v=4",
    "--logging-format=json",
  ]);
  assert.deepEqual(s.logging, { verbosity: 4, format: "json" });
  assert.deepEqual(s.kubeClient, { kubeconfig: "/k", qps: 20, burst: 40 });
  assert.deepEqual(s.csi, {
    dummy: false,
    address: "unix:///csi.sock",
    callTimeoutMs: 7_000,
    maxGrpcLogLength: 100,
  });
  assert.deepEqual(s.controller, {
    resyncMs: 60_000,
    retry: { baseMs: 2_000, maxMs: 60_000 },
    workers: 3,
    attachWorkers: 3,
    detachWorkers: 5,
    reconcileSyncMs: 120_000,
    logBacklogIntervalMs: 0,
    handler: { defaultFsType: "ext4", attachErrorCodes: false },
    reconciler: { timeoutMs: 40_000, maxEntries: 50 },
  });
  assert.deepEqual(s.elector, {
    namespace: "ns",
    leaseDurationMs: 30_000,
    renewDeadlineMs: 20_000,
    retryPeriodMs: 4_000,
    labels: { a: "1" },
    releaseOnCancel: false,
    warmStandby: false,
  });
  assert.deepEqual(s.events, { drainMs: 20_000 });
  const { flags, ...http } = s.http!;
  assert.deepEqual(http, {
    address: ":8080",
    flag: "--http-endpoint",
    metricsPath: "/m",
    leaderHealth: true,
  });
  assert.deepEqual(flags.find((f) => f.name === "kube-api-qps"), {
    name: "kube-api-qps",
    value: "20",
  });
});

Deno.test("componentSettings() serves the leader-election health check on --http-endpoint only", () => {
  assert.equal(settings(["--http-endpoint=:8080"]).http?.leaderHealth, false);
  const metricsOnly = settings(["--leader-election", "--metrics-address=:9090"]).http;
  assert.equal(metricsOnly?.address, ":9090");
  assert.equal(metricsOnly?.leaderHealth, false);
  assert.equal(metricsOnly?.flag, "--metrics-address", "a busy port names the flag given");
  assert.equal(settings(["--dummy"]).csi.dummy, true);
});

Deno.test("loggingSettings() reports the verdict on options that validateOptions refuses", () => {
  const result = parseOptions(["--worker-threads=0", "--v=4", "--logging-format=json"]);
  assert.ok(result.ok);
  // What main.ts builds before it checks the options: the log's settings alone.
  assert.deepEqual(loggingSettings(result.options), { verbosity: 4, format: "json" });
  assert.match(validateOptions(result.options) ?? "", /worker-threads must be greater than zero/);
  assert.deepEqual(componentSettings(result.options).logging, loggingSettings(result.options));
});
