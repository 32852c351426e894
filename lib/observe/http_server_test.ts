import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { parseListenAddress, startHttpServer } from "./http_server.ts";
import { LeaderElector } from "../leaderelection/elector.ts";
import { nullLogger } from "./logger.ts";
import { createMetrics } from "./metrics.ts";
import { FakeLeaseStore } from "../../testkit/fakes/fake_lease_api.ts";

interface Answer {
  status: number;
  body: string;
  contentType: string | null;
}

async function get(port: number, path: string, method = "GET"): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
  return {
    status: res.status,
    body: await res.text(),
    contentType: res.headers.get("content-type"),
  };
}

Deno.test("startHttpServer() serves metrics, the leader-election check and /healthz; 404 otherwise", async () => {
  const metrics = createMetrics({ driverName: "csi.example.com" });
  metrics.observeCsiCall({
    method: "/csi.v1.Controller/ControllerPublishVolume",
    code: "OK",
    seconds: 1,
  });
  let leaderError: Error | undefined;
  let unhealthy: string | undefined = "the informers' caches have not synced yet";
  const server = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/custom/metrics",
    metrics,
    leaderHealth: () => leaderError,
    health: () => unhealthy,
    log: nullLogger,
  });
  try {
    assert.ok(server.port > 0);
    assert.equal(server.hostname, "127.0.0.1");

    const m = await get(server.port, "/custom/metrics");
    assert.equal(m.status, 200);
    assert.equal(m.contentType, metrics.contentType);
    assert.match(
      m.body,
      /csi_sidecar_operations_seconds_count\{driver_name="csi.example.com",grpc_status_code="OK",method_name="\/csi.v1.Controller\/ControllerPublishVolume"\} 1/,
    );
    assert.equal((await get(server.port, "/metrics")).status, 404, "only the configured path");

    assert.deepEqual(await get(server.port, "/healthz/leader-election"), {
      status: 200,
      body: "ok",
      contentType: "text/plain; charset=utf-8",
    });
    leaderError = new Error("failed election to renew leadership on lease lease-1");
    assert.deepEqual(await get(server.port, "/healthz/leader-election"), {
      status: 500,
      body: "internal server error: failed election to renew leadership on lease lease-1\n",
      contentType: "text/plain; charset=utf-8",
    });

    assert.deepEqual(await get(server.port, "/healthz"), {
      status: 500,
      body: "unhealthy: the informers' caches have not synced yet\n",
      contentType: "text/plain; charset=utf-8",
    });
    unhealthy = undefined;
    assert.deepEqual(await get(server.port, "/healthz"), {
      status: 200,
      body: "ok",
      contentType: "text/plain; charset=utf-8",
    });

    for (const path of ["/", "/healthz/", "/custom/metrics/", "/healthz/leader-election/x"]) {
      const a = await get(server.port, path);
      assert.equal(a.status, 404, path);
      assert.equal(a.body, "404 page not found\n");
    }
    assert.equal((await get(server.port, "/custom/metrics?x=1")).status, 200, "query ignored");
  } finally {
    await server.close();
  }
});

Deno.test("startHttpServer() without leaderHealth or metrics serves neither path", async () => {
  const server = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/metrics",
    log: nullLogger,
  });
  try {
    assert.equal((await get(server.port, "/metrics")).status, 404);
    assert.equal((await get(server.port, "/healthz/leader-election")).status, 404);
    assert.deepEqual(await get(server.port, "/healthz"), {
      status: 200,
      body: "ok",
      contentType: "text/plain; charset=utf-8",
    });
  } finally {
    await server.close();
    await server.close(); // idempotent
  }
});

Deno.test("startHttpServer() answers 500 when the metrics cannot be gathered", async () => {
  const server = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/metrics",
    metrics: {
      contentType: "text/plain",
      metricsText: () => Promise.reject(new Error("collector exploded")),
    },
    log: nullLogger,
  });
  try {
    const a = await get(server.port, "/metrics");
    assert.equal(a.status, 500);
    assert.match(a.body, /collector exploded/);
  } finally {
    await server.close();
  }
});

Deno.test("startHttpServer() serves a real elector's health check", async () => {
  const clock = new FakeClock(1_700_000_000_000);
  const api = new FakeLeaseStore().client();
  const elector = new LeaderElector({ kube: api, clock, log: nullLogger }, {
    name: "lease-1",
    namespace: "ns",
    identity: "me",
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 5_000,
    releaseOnCancel: false,
  });
  const shutdown = new AbortController();
  let stopped = 0;
  const running = elector.run(shutdown.signal, {
    onStartedLeading: (signal) =>
      new Promise((resolve) => signal.addEventListener("abort", () => resolve())),
    onStoppedLeading: () => stopped++,
  });
  const server = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/metrics",
    leaderHealth: () => elector.healthCheck(),
    log: nullLogger,
  });
  try {
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(elector.isLeader(), true);
    assert.equal((await get(server.port, "/healthz/leader-election")).body, "ok");
    // The API goes away: the lease is lost after the renew deadline; the check fails 20 s
    // after the lease would have expired.
    api.onRequest = () => new Error("connection refused");
    for (let i = 0; i < 30; i++) {
      clock.advance(1_000);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    assert.equal(stopped, 1);
    assert.equal((await get(server.port, "/healthz/leader-election")).body, "ok");
    clock.advance(10_000);
    const a = await get(server.port, "/healthz/leader-election");
    assert.deepEqual([a.status, a.body], [
      500,
      "internal server error: failed election to renew leadership on lease lease-1\n",
    ]);
  } finally {
    await server.close();
    shutdown.abort();
    await running;
  }
});

Deno.test("startHttpServer() rejects when the address is taken or malformed", async () => {
  const first = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/metrics",
    log: nullLogger,
  });
  try {
    await assert.rejects(
      startHttpServer({
        address: `127.0.0.1:${first.port}`,
        flag: "--http-endpoint",
        metricsPath: "/metrics",
        log: nullLogger,
      }),
      {
        // The address and the flag, in the words of the Go sidecar's net.Listen error.
        message: `--http-endpoint=127.0.0.1:${first.port}: listen tcp 127.0.0.1:${first.port}: ` +
          "bind: address already in use",
      },
    );
  } finally {
    await first.close();
  }
  await assert.rejects(
    startHttpServer({ address: "8080", metricsPath: "/metrics", log: nullLogger }),
    { name: "TypeError", message: "address 8080: missing port in address" },
  );
  await assert.rejects(
    startHttpServer({ address: "127.0.0.1:0", metricsPath: "metrics", log: nullLogger }),
    TypeError,
  );
});

Deno.test("parseListenAddress() splits Go listen addresses", () => {
  assert.deepEqual(parseListenAddress(":8080"), { hostname: "", port: 8080 });
  assert.deepEqual(parseListenAddress("127.0.0.1:0"), { hostname: "127.0.0.1", port: 0 });
  assert.deepEqual(parseListenAddress("[::1]:9000"), { hostname: "::1", port: 9000 });
  assert.deepEqual(parseListenAddress("[::]:80"), { hostname: "::", port: 80 });
  assert.deepEqual(parseListenAddress("localhost:65535"), { hostname: "localhost", port: 65535 });
  const bad: Array<[string, string]> = [
    ["8080", "address 8080: missing port in address"],
    ["::1:80", "address ::1:80: too many colons in address"],
    ["[::1]", "address [::1]: missing port in address"],
    ["[::1:80", "address [::1:80: missing ']' in address"],
    ["[::1]x:80", "address [::1]x:80: unexpected characters after ']' in address"],
    [":http", 'address :http: invalid port "http"'],
    [":65536", 'address :65536: invalid port "65536"'],
    ["host:", 'address host:: invalid port ""'],
  ];
  for (const [address, message] of bad) {
    assert.throws(() => parseListenAddress(address), { name: "TypeError", message }, address);
  }
});

Deno.test("startHttpServer() serves /statusz and /flagz as text for people, 406 for machines", async () => {
  const metrics = createMetrics({ driverName: "csi.example.com" });
  let uptime = 61_000;
  const server = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/metrics",
    metrics,
    leaderHealth: () => undefined,
    zpages: {
      component: "csi-attacher",
      binaryVersion: "v0.1.0",
      runtimeVersion: "deno 2.9.6",
      startTimeMs: Date.UTC(2026, 10, 28, 5, 0, 0),
      uptimeMs: () => uptime,
      flags: [{ name: "v", value: "5" }, { name: "csi-address", value: "/csi/csi.sock" }],
    },
    log: nullLogger,
  });
  try {
    const status = await get(server.port, "/statusz");
    assert.equal(status.status, 200);
    assert.equal(status.contentType, "text/plain; charset=utf-8");
    assert.match(status.body, /^\ncsi-attacher statusz\nWarning: This endpoint is not meant/);
    assert.match(status.body, /\nStarted: Sat Nov 28 05:00:00 UTC 2026\nUp: 0 hr 01 min 01 sec\n/);
    assert.match(status.body, /\nRuntime version: deno 2.9.6\nBinary version: v0.1.0\n/);
    assert.match(
      status.body,
      /\nPaths: \/flagz \/healthz \/healthz\/leader-election \/metrics \/statusz\n$/,
    );
    uptime = 3_600_000;
    assert.match((await get(server.port, "/statusz")).body, /\nUp: 1 hr 00 min 00 sec\n/);

    const flags = await get(server.port, "/flagz");
    assert.equal(flags.status, 200);
    assert.match(
      flags.body,
      /^\ncsi-attacher flags\nWarning: .*\n\ncsi-address=\/csi\/csi.sock\nv=5\n$/,
    );

    const json = await fetch(`http://127.0.0.1:${server.port}/statusz`, {
      headers: { accept: "application/json;v=v1alpha1;g=config.k8s.io;as=Statusz" },
    });
    assert.equal(json.status, 406);
    assert.equal(await json.text(), "media type not acceptable, must be: text/plain\n");
  } finally {
    await server.close();
  }
  const bare = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/metrics",
    log: nullLogger,
  });
  try {
    assert.equal((await get(bare.port, "/statusz")).status, 404, "only when given z-pages");
    assert.equal((await get(bare.port, "/flagz")).status, 404);
  } finally {
    await bare.close();
  }
});
