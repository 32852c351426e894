import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import {
  createMetrics,
  CSI_OPERATION_BUCKETS,
  METRIC_HELP,
  UNKNOWN_DRIVER_NAME,
  WORKQUEUE_DURATION_BUCKETS,
} from "./metrics.ts";
import { ItemExponentialFailureRateLimiter } from "../workqueue/rate_limiters.ts";
import { LanedWorkQueue } from "../workqueue/lanes.ts";

const PUBLISH = "/csi.v1.Controller/ControllerPublishVolume";

/**
 * The samples of a text exposition, keyed `name{a="1",b="2"}` with the labels sorted by name,
 * so that the checks do not depend on the order the labels are written in.
 */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `malformed sample line: ${line}`);
    const labels = [...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)]
      .map(([, k, v]) => `${k}="${v}"`)
      .sort();
    const key = labels.length > 0 ? `${m[1]}{${labels.join(",")}}` : m[1]!;
    assert.ok(!out.has(key), `duplicate series ${key}`);
    out.set(key, Number(m[3]));
  }
  return out;
}

/** `name{labels}` with the labels sorted, as {@link samples} keys them. */
function series(name: string, labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).sort();
  return parts.length > 0 ? `${name}{${parts.join(",")}}` : name;
}

/** The `# HELP` and `# TYPE` lines of `name`. */
function header(text: string, name: string): string[] {
  return text.split("\n").filter((l) =>
    l.startsWith(`# HELP ${name} `) || l.startsWith(`# TYPE ${name} `)
  );
}

Deno.test("createMetrics() exposes csi_sidecar_operations_seconds with csi-lib-utils' labels and buckets", async () => {
  const metrics = createMetrics({ driverName: "csi.example.com", processStartTimeSeconds: 1234.5 });
  metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: 0.3 });
  metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: 12 });
  metrics.observeCsiCall({ method: PUBLISH, code: "DeadlineExceeded", seconds: 15 });
  metrics.observeCsiCall({ method: "/csi.v1.Identity/Probe", code: undefined, seconds: 0.01 });
  metrics.observeCsiCall({ method: PUBLISH, code: "Unavailable", seconds: 1000 });
  const text = await metrics.metricsText();
  const s = samples(text);

  assert.deepEqual(header(text, "csi_sidecar_operations_seconds"), [
    "# HELP csi_sidecar_operations_seconds [ALPHA] Container Storage Interface operation duration with gRPC error code status total",
    "# TYPE csi_sidecar_operations_seconds histogram",
  ]);
  const ok = { driver_name: "csi.example.com", grpc_status_code: "OK", method_name: PUBLISH };
  const buckets = [...CSI_OPERATION_BUCKETS.map(String), "+Inf"];
  assert.deepEqual(
    buckets.map((le) => s.get(series("csi_sidecar_operations_seconds_bucket", { ...ok, le }))),
    [0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2],
  );
  assert.equal(s.get(series("csi_sidecar_operations_seconds_sum", ok)), 12.3);
  assert.equal(s.get(series("csi_sidecar_operations_seconds_count", ok)), 2);
  const timeout = { ...ok, grpc_status_code: "DeadlineExceeded" };
  assert.equal(s.get(series("csi_sidecar_operations_seconds_bucket", { ...timeout, le: "10" })), 0);
  assert.equal(s.get(series("csi_sidecar_operations_seconds_bucket", { ...timeout, le: "15" })), 1);
  assert.equal(
    s.get(series("csi_sidecar_operations_seconds_count", {
      ...ok,
      grpc_status_code: "unknown-non-grpc",
      method_name: "/csi.v1.Identity/Probe",
    })),
    1,
  );
  const unavailable = { ...ok, grpc_status_code: "Unavailable" };
  assert.equal(
    s.get(series("csi_sidecar_operations_seconds_bucket", { ...unavailable, le: "600" })),
    0,
  );
  assert.equal(
    s.get(series("csi_sidecar_operations_seconds_bucket", { ...unavailable, le: "+Inf" })),
    1,
  );
  assert.ok(![...s.keys()].some((k) => k.includes("migrated=")), "no migrated label by default");
  // As client_golang writes it: labels by name, then le.
  assert.ok(
    text.includes(
      `\ncsi_sidecar_operations_seconds_bucket{driver_name="csi.example.com",grpc_status_code="OK",method_name="${PUBLISH}",le="0.5"} 1\n`,
    ),
    text,
  );

  assert.deepEqual(header(text, "process_start_time_seconds"), [
    "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
    "# TYPE process_start_time_seconds gauge",
  ]);
  assert.equal(s.get("process_start_time_seconds"), 1234.5);
  assert.equal(metrics.contentType, "text/plain; version=0.0.4; charset=utf-8");
});

Deno.test("createMetrics() reports unknown-driver until setDriverName()", async () => {
  const metrics = createMetrics();
  metrics.observeCsiCall({ method: "/csi.v1.Identity/GetPluginInfo", code: "OK", seconds: 0.001 });
  metrics.setDriverName("csi.example.com");
  metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: 0.001 });
  metrics.setDriverName("");
  metrics.observeCsiCall({ method: PUBLISH, code: "NotFound", seconds: 0.001 });
  const s = samples(await metrics.metricsText());
  const count = (driver: string, method: string, code: string) =>
    s.get(series("csi_sidecar_operations_seconds_count", {
      driver_name: driver,
      grpc_status_code: code,
      method_name: method,
    }));
  assert.equal(count(UNKNOWN_DRIVER_NAME, "/csi.v1.Identity/GetPluginInfo", "OK"), 1);
  assert.equal(count("csi.example.com", PUBLISH, "OK"), 1);
  assert.equal(count(UNKNOWN_DRIVER_NAME, PUBLISH, "NotFound"), 1);
  assert.equal(UNKNOWN_DRIVER_NAME, "unknown-driver");
});

Deno.test("createMetrics({ migrated: true }) adds the migrated label", async () => {
  const metrics = createMetrics({ driverName: "pd.csi.storage.gke.io", migrated: true });
  metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: 1, migrated: true });
  metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: 1 });
  const s = samples(await metrics.metricsText());
  const labels = {
    driver_name: "pd.csi.storage.gke.io",
    grpc_status_code: "OK",
    method_name: PUBLISH,
  };
  assert.equal(
    s.get(series("csi_sidecar_operations_seconds_count", { ...labels, migrated: "true" })),
    1,
  );
  assert.equal(
    s.get(series("csi_sidecar_operations_seconds_count", { ...labels, migrated: "false" })),
    1,
  );
  assert.equal(s.get(series("csi_sidecar_operations_seconds_count", labels)), undefined);
});

Deno.test("observeCsiCall() rejects durations that are not seconds", () => {
  const metrics = createMetrics();
  assert.throws(
    () => metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: -1 }),
    RangeError,
  );
  assert.throws(
    () => metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: NaN }),
    RangeError,
  );
});

Deno.test('createMetrics() exposes the leader-election metrics as the Go sidecar: name=""', async () => {
  const metrics = createMetrics();
  // Like client_golang, a family without series is not written at all.
  assert.ok(!(await metrics.metricsText()).includes("leader_election_master_status"));
  // csi-lib-utils sets no LeaderElectionConfig.Name: whatever the Lease, the series is name="".
  metrics.setLeader("external-attacher-leader-csi-example-com", false);
  let s = samples(await metrics.metricsText());
  assert.equal(s.get(series("leader_election_master_status", { name: "" })), 0);
  metrics.setLeader("external-attacher-leader-csi-example-com", true);
  metrics.slowpathExercised("external-attacher-leader-csi-example-com");
  metrics.slowpathExercised("external-attacher-leader-csi-example-com");
  const text = await metrics.metricsText();
  s = samples(text);
  assert.equal(s.get(series("leader_election_master_status", { name: "" })), 1);
  assert.equal(s.get(series("leader_election_slowpath_total", { name: "" })), 2);
  assert.ok(!text.includes("csi-example-com"), "no Lease name in a label");
  assert.deepEqual(header(text, "leader_election_master_status"), [
    `# HELP leader_election_master_status ${METRIC_HELP.leader_election_master_status}`,
    "# TYPE leader_election_master_status gauge",
  ]);
  assert.match(METRIC_HELP.leader_election_master_status!, /^\[ALPHA\] Gauge of if the reporting/);
});

Deno.test("createMetrics() gives independent registries", async () => {
  const a = createMetrics({ driverName: "a" });
  const b = createMetrics({ driverName: "b" });
  a.observeCsiCall({ method: PUBLISH, code: "OK", seconds: 1 });
  assert.ok((await a.metricsText()).includes('driver_name="a"'));
  assert.ok(!(await b.metricsText()).includes("driver_name="));
  assert.notEqual(a.registry, b.registry);
});

Deno.test("queueMetricsProvider records the workqueue metrics of a real LanedWorkQueue", async () => {
  const metrics = createMetrics();
  const clock = new FakeClock(0);
  const queue = new LanedWorkQueue({
    clock,
    metricsProvider: metrics.queueMetricsProvider,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 }),
  }, { name: "csi-attacher-va" });
  try {
    const name = { name: "csi-attacher-va" };
    // Like client-go, the series exist as soon as the queue does.
    let s = samples(await metrics.metricsText());
    for (
      const metric of [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_retries_total",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_queue_duration_seconds_count",
        "workqueue_work_duration_seconds_count",
      ]
    ) {
      assert.equal(s.get(series(metric, name)), 0, metric);
    }

    queue.add("va-1");
    queue.add("va-2");
    queue.add("va-1"); // folded: not an add
    clock.advance(2_000);
    const key = await queue.get();
    assert.equal(key, "va-1");
    clock.advance(500);
    queue.addRateLimited("va-1");
    queue.done("va-1");
    s = samples(await metrics.metricsText());
    assert.equal(s.get(series("workqueue_adds_total", name)), 2);
    assert.equal(s.get(series("workqueue_depth", name)), 1);
    assert.equal(s.get(series("workqueue_retries_total", name)), 1);
    assert.equal(s.get(series("workqueue_queue_duration_seconds_count", name)), 1);
    assert.equal(s.get(series("workqueue_queue_duration_seconds_sum", name)), 2);
    assert.equal(s.get(series("workqueue_work_duration_seconds_sum", name)), 0.5);
    const buckets = [...WORKQUEUE_DURATION_BUCKETS.map(String), "+Inf"];
    assert.deepEqual(
      buckets.map((le) =>
        s.get(series("workqueue_queue_duration_seconds_bucket", { ...name, le }))
      ),
      [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1],
    );
    assert.deepEqual(buckets.slice(0, 3), ["1e-8", "1e-7", "0.000001"]);

    // A key in processing shows up in the unfinished-work gauges at the next update.
    const second = await queue.get();
    assert.equal(second, "va-2");
    clock.advance(3_000);
    s = samples(await metrics.metricsText());
    assert.equal(s.get(series("workqueue_longest_running_processor_seconds", name)), 3);
    assert.equal(s.get(series("workqueue_unfinished_work_seconds", name)), 3);
    queue.done("va-2");

    const text = await metrics.metricsText();
    assert.deepEqual(header(text, "workqueue_depth"), [
      "# HELP workqueue_depth [ALPHA] Current depth of workqueue",
      "# TYPE workqueue_depth gauge",
    ]);
    assert.deepEqual(header(text, "workqueue_retries_total"), [
      "# HELP workqueue_retries_total [ALPHA] Total number of retries handled by workqueue",
      "# TYPE workqueue_retries_total counter",
    ]);
    assert.deepEqual(
      header(text, "workqueue_queue_duration_seconds")[1],
      "# TYPE workqueue_queue_duration_seconds histogram",
    );
  } finally {
    queue.shutDown();
  }
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("createMetrics() exposes the end-to-end attach and detach histograms with driver_name and the CSI buckets", async () => {
  const metrics = createMetrics({ driverName: "csi.example.com" });
  metrics.observeAttachDuration(0.3);
  metrics.observeAttachDuration(42);
  metrics.observeDetachDuration(700);
  const text = await metrics.metricsText();
  const s = samples(text);
  const labels = { driver_name: "csi.example.com" };
  const buckets = [...CSI_OPERATION_BUCKETS.map(String), "+Inf"];
  assert.deepEqual(
    buckets.map((le) =>
      s.get(series("csi_attacher_attach_duration_seconds_bucket", { ...labels, le }))
    ),
    [0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2],
  );
  assert.equal(s.get(series("csi_attacher_attach_duration_seconds_sum", labels)), 42.3);
  assert.equal(s.get(series("csi_attacher_detach_duration_seconds_count", labels)), 1);
  assert.equal(
    s.get(series("csi_attacher_detach_duration_seconds_bucket", { ...labels, le: "600" })),
    0,
  );
  assert.deepEqual(header(text, "csi_attacher_attach_duration_seconds"), [
    `# HELP csi_attacher_attach_duration_seconds ${METRIC_HELP.csi_attacher_attach_duration_seconds}`,
    "# TYPE csi_attacher_attach_duration_seconds histogram",
  ]);
});

Deno.test("createMetrics() reads the pending gauges from the source at each scrape, 0 without one", async () => {
  const metrics = createMetrics({});
  const gauge = (s: Map<string, number>, name: string, operation: string) =>
    s.get(series(name, { operation }));
  let s = samples(await metrics.metricsText());
  for (const op of ["attach", "detach"]) {
    assert.equal(gauge(s, "csi_attacher_pending_volumeattachments", op), 0);
    assert.equal(gauge(s, "csi_attacher_oldest_pending_seconds", op), 0);
  }
  let detaching = 3;
  metrics.setPendingSource(() => ({
    attach: { count: 1, oldestSeconds: 2.5 },
    detach: { count: detaching, oldestSeconds: 600 },
  }));
  s = samples(await metrics.metricsText());
  assert.equal(gauge(s, "csi_attacher_pending_volumeattachments", "attach"), 1);
  assert.equal(gauge(s, "csi_attacher_pending_volumeattachments", "detach"), 3);
  assert.equal(gauge(s, "csi_attacher_oldest_pending_seconds", "attach"), 2.5);
  assert.equal(gauge(s, "csi_attacher_oldest_pending_seconds", "detach"), 600);
  detaching = 0;
  s = samples(await metrics.metricsText());
  assert.equal(gauge(s, "csi_attacher_pending_volumeattachments", "detach"), 0);
  metrics.setPendingSource(undefined);
  s = samples(await metrics.metricsText());
  assert.equal(gauge(s, "csi_attacher_oldest_pending_seconds", "detach"), 0);
});

Deno.test("createMetrics() counts API request tries and retries as client-go's rest_client metrics", async () => {
  const metrics = createMetrics({});
  const host = "10.0.0.1:6443";
  metrics.observeApiRequest({ method: "PATCH", host, code: 429 });
  metrics.observeApiRetry({ method: "PATCH", host, code: 429 });
  metrics.observeApiRequest({ method: "PATCH", host, code: 429 });
  metrics.observeApiRetry({ method: "PATCH", host, code: 429 });
  metrics.observeApiRequest({ method: "PATCH", host, code: 200 });
  metrics.observeApiRequest({ method: "GET", host, code: 0 });
  metrics.observeApiRetry({ method: "GET", host, code: 0 });
  const text = await metrics.metricsText();
  const s = samples(text);
  assert.equal(
    s.get(series("rest_client_requests_total", { code: "429", host, method: "PATCH" })),
    2,
  );
  assert.equal(
    s.get(series("rest_client_requests_total", { code: "200", host, method: "PATCH" })),
    1,
  );
  assert.equal(
    s.get(series("rest_client_requests_total", { code: "<error>", host, method: "GET" })),
    1,
  );
  assert.equal(
    s.get(series("rest_client_request_retries_total", { code: "429", host, verb: "PATCH" })),
    2,
  );
  assert.equal(
    s.get(series("rest_client_request_retries_total", { code: "<error>", host, verb: "GET" })),
    1,
  );
  assert.deepEqual(header(text, "rest_client_request_retries_total"), [
    "# HELP rest_client_request_retries_total [ALPHA] Number of request retries, partitioned by status code, verb, and host.",
    "# TYPE rest_client_request_retries_total counter",
  ]);
});

Deno.test("addMigratedLabel() keeps the calls observed before, labelled migrated=false", async () => {
  const metrics = createMetrics();
  metrics.observeCsiCall({ method: "/csi.v1.Identity/Probe", code: "OK", seconds: 0.2 });
  metrics.observeCsiCall({ method: "/csi.v1.Identity/GetPluginInfo", code: "OK", seconds: 0.01 });
  metrics.setDriverName("pd.csi.storage.gke.io");
  metrics.addMigratedLabel();
  metrics.addMigratedLabel();
  metrics.observeCsiCall({ method: PUBLISH, code: "OK", seconds: 1, migrated: true });
  metrics.observeCsiCall({ method: "/csi.v1.Identity/Probe", code: "OK", seconds: 0.3 });
  const text = await metrics.metricsText();
  const s = samples(text);
  const count = (driver: string, method: string, migrated: string) =>
    s.get(series("csi_sidecar_operations_seconds_count", {
      driver_name: driver,
      grpc_status_code: "OK",
      method_name: method,
      migrated,
    }));
  assert.equal(count(UNKNOWN_DRIVER_NAME, "/csi.v1.Identity/Probe", "false"), 1);
  assert.equal(count(UNKNOWN_DRIVER_NAME, "/csi.v1.Identity/GetPluginInfo", "false"), 1);
  assert.equal(count("pd.csi.storage.gke.io", "/csi.v1.Identity/Probe", "false"), 1);
  assert.equal(count("pd.csi.storage.gke.io", PUBLISH, "true"), 1);
  assert.equal(
    s.get(series("csi_sidecar_operations_seconds_bucket", {
      driver_name: UNKNOWN_DRIVER_NAME,
      grpc_status_code: "OK",
      method_name: "/csi.v1.Identity/Probe",
      migrated: "false",
      le: "0.25",
    })),
    1,
  );
  assert.equal(header(text, "csi_sidecar_operations_seconds").length, 2, "one family");
  assert.ok(![...s.keys()].some((k) => k.startsWith("csi_sidecar_") && !k.includes("migrated=")));
});
