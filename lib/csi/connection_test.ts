import assert from "node:assert/strict";
import { type CallOptions, type CsiClient, CsiError } from "./api.ts";
import { realClock } from "../clock.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import {
  connect,
  getCapabilities,
  getDriverName,
  probeForever,
  STARTUP_CALL_TIMEOUT_MS,
} from "./connection.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { FakeCsiDriver, type FakeCsiDriverOptions } from "../../testkit/csi/fake_driver.ts";
import { startCsiDriverServer } from "../../testkit/csi/server.ts";

async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix: "csi_connection_test" });
  return { path, [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }) };
}

function startFake(dir: string, options: Omit<FakeCsiDriverOptions, "address"> = {}) {
  return FakeCsiDriver.start({ ...options, address: `${dir}/csi.sock` });
}

/** Resolves when `check` is true, polling real time; fails after `ms`. */
async function eventually(check: () => boolean, ms = 3000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Settles `promise` while firing FakeClock timers whenever the program waits on one. */
async function drive<T>(clock: FakeClock, promise: Promise<T>): Promise<T> {
  let settled = false;
  const tracked = promise.finally(() => settled = true);
  tracked.catch(() => {});
  while (!settled) {
    await new Promise((r) => setTimeout(r, 0));
    if (!settled) clock.advanceToNextTimer();
  }
  return tracked;
}

Deno.test("connect() connects to a listening driver and the client works", async () => {
  await using dir = await tempDir();
  const driver = await startFake(dir.path, { pluginName: "csi.example.com" });
  const client = await connect(driver.address, {
    log: nullLogger,
    clock: realClock,
    timeoutMs: 3000,
  });
  try {
    assert.equal(await getDriverName(client), "csi.example.com");
  } finally {
    client.close();
    await driver.close();
  }
});

Deno.test("connect() waits for a socket created late and logs Still connecting", async () => {
  await using dir = await tempDir();
  const clock = new FakeClock();
  const log = new FakeLogger(0);
  let connected = false;
  const pending = connect(`${dir.path}/csi.sock`, {
    log,
    clock,
    timeoutMs: 5000,
    logIntervalMs: 150,
    reconnectBackoffMs: 100,
  }).then((client) => {
    connected = true;
    return client;
  });
  pending.catch(() => {});
  const started = clock.now();
  let driver: FakeCsiDriver | undefined;
  try {
    // Four attempts fail on the missing socket; each waits its backoff on the clock (the
    // overall timeout, the log ticker and the retry are then pending).
    for (let attempt = 0; attempt < 4; attempt++) {
      await eventually(() => clock.pendingTimers() === 3);
      clock.advance(100);
    }
    assert.equal(connected, false, "returned before the socket existed");
    driver = await startFake(dir.path);
    const client = await drive(clock, pending);
    client.close();
    assert.ok(clock.now() - started >= 400, "connected only on a retry after the socket appeared");
    const still = log.withMessage("Still connecting to CSI driver");
    assert.ok(still.length >= 2, "Still connecting at 150 and 300 ms");
    assert.equal(still[0]!.fields.address, `${dir.path}/csi.sock`);
  } finally {
    await driver?.close();
  }
});

Deno.test("connect() gives up after its timeout when nothing listens", async () => {
  await using dir = await tempDir();
  const clock = new FakeClock();
  const started = clock.now();
  await assert.rejects(
    drive(
      clock,
      connect(`${dir.path}/csi.sock`, {
        log: nullLogger,
        clock,
        timeoutMs: 300,
        reconnectBackoffMs: 100,
      }),
    ),
    (err: Error) => {
      assert.match(err.message, /^timed out after 0\.3s waiting to connect to the CSI driver at /);
      return true;
    },
  );
  assert.equal(clock.now() - started, 300, "gave up at its timeout, retrying until then");
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("connect() timeout and Still connecting lines follow the injected clock", async () => {
  await using dir = await tempDir();
  const clock = new FakeClock();
  const log = new FakeLogger(0);
  const pending = connect(`${dir.path}/csi.sock`, { log, clock, reconnectBackoffMs: 100 });
  pending.catch(() => {});
  // The first attempt has failed and waits its backoff.
  await eventually(() => clock.pendingTimers() === 3);
  clock.advance(29_999);
  assert.equal(log.withMessage("Still connecting to CSI driver").length, 2, "at 10 s and 20 s");
  clock.advance(1);
  await assert.rejects(pending, /timed out after 30s/);
  assert.equal(clock.pendingTimers(), 0);
});

/**
 * Runs an {@link ExampleDriver} in a child process on `socket`, so that the test can make it
 * die the way a crashed driver does: the kernel closes its connections, without HTTP/2 GOAWAY.
 */
async function spawnDriverProcess(socket: string): Promise<Deno.ChildProcess> {
  const driverModule = new URL("../../testkit/csi/example_driver.ts", import.meta.url).href;
  const code = `import { ExampleDriver } from ${JSON.stringify(driverModule)};
    await new ExampleDriver().start(${JSON.stringify(socket)});
    console.log("listening");`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", code],
    cwd: new URL("../..", import.meta.url),
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  const first = await reader.read();
  reader.releaseLock();
  assert.match(new TextDecoder().decode(first.value), /listening/);
  await child.stdout.cancel();
  return child;
}

Deno.test("connect() calls onConnectionLoss once when the driver process dies", async () => {
  await using dir = await tempDir();
  const child = await spawnDriverProcess(`${dir.path}/csi.sock`);
  const clock = new FakeClock();
  let lost = 0;
  const client = await connect(`${dir.path}/csi.sock`, {
    log: nullLogger,
    clock,
    timeoutMs: 3000,
    onConnectionLoss: () => lost++,
  });
  let failures = 0;
  client.channel.onStateChange((state) => {
    if (state === "TRANSIENT_FAILURE") failures++;
  });
  try {
    assert.equal(await getDriverName(client), "example.csi.k8s.io");
    await client.probe({ timeoutMs: 3000 });
    assert.equal(lost, 0);
    child.kill("SIGKILL");
    await child.status;
    await eventually(() => lost > 0);
    // The channel dials again and again, each failed dial arming the backoff on the clock: the
    // loss is still reported once.
    client.channel.connect();
    for (let dials = 1; dials <= 3; dials++) {
      await eventually(() => failures >= dials);
      assert.ok(clock.advanceToNextTimer(), "the backoff before the next dial");
    }
    assert.equal(lost, 1, "reported once, although the channel keeps reconnecting");
  } finally {
    client.close();
  }
});

Deno.test("connect() calls onConnectionLoss once when the driver shuts down gracefully (GOAWAY) after calls", async () => {
  // grpc-js sends GOAWAY and, once the call in flight finished, closes the connection. This is
  // not the case that crashes grpc-js and connect-node on Deno's node:http2
  // (https://github.com/denoland/deno/issues/36788): that needs a session idle for about two
  // minutes before the driver's graceful stop; a GOAWAY shortly after calls, as here, does not.
  await using dir = await tempDir();
  let release = () => {};
  const held = new Promise<void>((r) => release = r);
  const server = await startCsiDriverServer({
    address: `${dir.path}/csi.sock`,
    identity: {
      getPluginInfo: () => Promise.resolve({ name: "csi.example.com", vendorVersion: "1" }),
      probe: async () => {
        probing = true;
        await held;
        return { ready: { value: true } };
      },
    },
  });
  let probing = false;
  let lost = 0;
  const client = await connect(server.address, {
    log: nullLogger,
    clock: new FakeClock(),
    timeoutMs: 3000,
    onConnectionLoss: () => lost++,
  });
  try {
    for (let i = 0; i < 3; i++) assert.equal(await getDriverName(client), "csi.example.com");
    const inFlight = client.probe({ timeoutMs: 5000 });
    await eventually(() => probing);
    const stopped = server.shutdown();
    await eventually(() => lost > 0);
    release();
    assert.deepEqual(await inFlight, { ready: true }, "the call in flight finished");
    await stopped;
    // Later calls find no driver: Unavailable, as grpc-go reports a failed dial.
    const err = await client.getPluginInfo({ timeoutMs: 1000 }).catch((e: unknown) => e);
    assert.ok(err instanceof CsiError && err.code === 14, String(err));
    assert.equal(lost, 1, "reported once, although the later call dialled again");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("connect() does not report a loss when the client itself is closed", async () => {
  await using dir = await tempDir();
  const driver = await startFake(dir.path);
  const clock = new FakeClock();
  let lost = 0;
  const client = await connect(driver.address, {
    log: nullLogger,
    clock,
    timeoutMs: 3000,
    onConnectionLoss: () => lost++,
  });
  const states: string[] = [];
  client.channel.onStateChange((state) => states.push(state));
  client.close();
  await driver.close();
  // Everything the close set off has run: the channel is shut down, with nothing left to fire.
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(states, ["SHUTDOWN"]);
  assert.equal(clock.pendingTimers(), 0);
  assert.equal(lost, 0);
});

/** A CsiClient whose probe answers from a script; other calls are not used here. */
function probeScript(
  results: (Partial<{ ready: boolean }> | Error)[],
): CsiClient & { probes: number[] } {
  const probes: number[] = [];
  const unused = () => Promise.reject(new Error("not used"));
  return {
    probes,
    probe(opts: CallOptions) {
      probes.push(opts.timeoutMs);
      const next = results.shift();
      if (next === undefined) return Promise.reject(new Error("probe script exhausted"));
      return next instanceof Error ? Promise.reject(next) : Promise.resolve(next);
    },
    getPluginInfo: unused,
    getPluginCapabilities: unused,
    controllerGetCapabilities: unused,
    controllerPublishVolume: unused,
    controllerUnpublishVolume: unused,
    listVolumes: unused,
    close() {},
  };
}

Deno.test("probeForever() waits while ready is false or the probe times out, every second", async () => {
  const clock = new FakeClock(0);
  const client = probeScript([
    { ready: false },
    new CsiError(4, "context deadline exceeded"),
    { ready: false },
    { ready: true },
  ]);
  const log = new FakeLogger(0);
  await drive(clock, probeForever(client, { timeoutMs: 15_000, clock, log }));
  assert.deepEqual(client.probes, [15_000, 15_000, 15_000, 15_000]);
  assert.equal(clock.now(), 3000, "probed at 0, 1, 2 and 3 s");
  assert.deepEqual(log.lines.map((l) => l.msg), [
    "Probing CSI driver for readiness",
    "CSI driver is not ready",
    "Probing CSI driver for readiness",
    "CSI driver probe timed out",
    "Probing CSI driver for readiness",
    "CSI driver is not ready",
    "Probing CSI driver for readiness",
  ]);
});

Deno.test("probeForever() is done at once when ready is absent", async () => {
  const clock = new FakeClock(0);
  const client = probeScript([{}]);
  await probeForever(client, { timeoutMs: 1000, clock, log: nullLogger });
  assert.equal(client.probes.length, 1);
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("probeForever() fails on any other gRPC error and on non-gRPC errors", async () => {
  const clock = new FakeClock(0);
  await assert.rejects(
    drive(
      clock,
      probeForever(probeScript([{ ready: false }, new CsiError(14, "connection refused")]), {
        timeoutMs: 1000,
        clock,
        log: nullLogger,
      }),
    ),
    (err: Error) => {
      assert.equal(
        err.message,
        "CSI driver probe failed: rpc error: code = Unavailable desc = connection refused",
      );
      assert.ok(err.cause instanceof CsiError);
      return true;
    },
  );
  await assert.rejects(
    probeForever(probeScript([new CsiError(undefined, "socket closed")]), {
      timeoutMs: 1000,
      clock,
      log: nullLogger,
    }),
    /^Error: CSI driver probe failed: socket closed$/,
  );
});

Deno.test("probeForever() stops waiting when its signal aborts", async () => {
  const clock = new FakeClock(0);
  const controller = new AbortController();
  const pending = probeForever(probeScript([{ ready: false }]), {
    timeoutMs: 1000,
    clock,
    log: nullLogger,
    signal: controller.signal,
  });
  await new Promise((r) => setTimeout(r, 0));
  controller.abort(new Error("shutting down"));
  await assert.rejects(pending, /gave up waiting for the CSI driver to become ready/);
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("probeForever() over gRPC: ready false, then true", async () => {
  await using dir = await tempDir();
  const driver = await startFake(dir.path, {
    script: [
      { method: "Probe", respond: { ready: { value: false } } },
      { method: "Probe", respond: { ready: { value: true } } },
    ],
  });
  const client = await connect(driver.address, {
    log: nullLogger,
    clock: realClock,
    timeoutMs: 3000,
  });
  try {
    const clock = new FakeClock(0);
    await drive(clock, probeForever(client, { timeoutMs: 3000, clock, log: nullLogger }));
    driver.assertDone();
    assert.equal(driver.callsOf("Probe").length, 2);
  } finally {
    client.close();
    await driver.close();
  }
});

Deno.test("getDriverName() returns the name and rejects an empty one", async () => {
  await using dir = await tempDir();
  const driver = await startFake(dir.path, {
    script: [
      { method: "GetPluginInfo", respond: { name: "csi.example.com", vendorVersion: "1" } },
      { method: "GetPluginInfo", respond: { name: "", vendorVersion: "1" } },
      { method: "GetPluginInfo", delayMs: STARTUP_CALL_TIMEOUT_MS + 1000 },
    ],
  });
  const clock = new FakeClock();
  const client = await connect(driver.address, { log: nullLogger, clock, timeoutMs: 3000 });
  try {
    assert.equal(await getDriverName(client), "csi.example.com");
    await assert.rejects(getDriverName(client), /^Error: driver name is empty$/);
    // The third answer comes too late: the call ends at the 1 s timeout, on the clock.
    let settled = false;
    const late = getDriverName(client).finally(() => settled = true);
    late.catch(() => {});
    await eventually(() => driver.calls.length === 3);
    clock.advance(STARTUP_CALL_TIMEOUT_MS - 1);
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(settled, false, "still waiting just before the timeout");
    clock.advance(1);
    await assert.rejects(late, (err: unknown) => err instanceof CsiError && err.code === 4);
  } finally {
    client.close();
    await driver.close();
  }
});

Deno.test("getCapabilities() maps controller capabilities", async () => {
  const cases: { rpcs: string[]; expected: Record<string, boolean> }[] = [
    {
      rpcs: [
        "PUBLISH_UNPUBLISH_VOLUME",
        "PUBLISH_READONLY",
        "SINGLE_NODE_MULTI_WRITER",
        "LIST_VOLUMES",
        "LIST_VOLUMES_PUBLISHED_NODES",
      ],
      expected: {
        controllerService: true,
        publishUnpublish: true,
        publishReadonly: true,
        singleNodeMultiWriter: true,
        listVolumes: true,
        listVolumesPublishedNodes: true,
        reconcile: true,
      },
    },
    {
      rpcs: ["PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES"],
      expected: {
        controllerService: true,
        publishUnpublish: true,
        publishReadonly: false,
        singleNodeMultiWriter: false,
        listVolumes: true,
        listVolumesPublishedNodes: false,
        reconcile: false,
      },
    },
    {
      rpcs: ["CREATE_DELETE_VOLUME", "LIST_VOLUMES_PUBLISHED_NODES"],
      expected: {
        controllerService: true,
        publishUnpublish: false,
        publishReadonly: false,
        singleNodeMultiWriter: false,
        listVolumes: false,
        listVolumesPublishedNodes: true,
        reconcile: false,
      },
    },
  ];
  await using dir = await tempDir();
  for (const { rpcs, expected } of cases) {
    const driver = await startFake(dir.path, { controllerCapabilities: rpcs });
    const client = await connect(driver.address, {
      log: nullLogger,
      clock: realClock,
      timeoutMs: 3000,
    });
    try {
      assert.deepEqual(await getCapabilities(client), expected, rpcs.join(","));
      assert.deepEqual(driver.calls.map((c) => c.method), [
        "GetPluginCapabilities",
        "ControllerGetCapabilities",
      ]);
    } finally {
      client.close();
      await driver.close();
    }
  }
});

Deno.test("getCapabilities() without CONTROLLER_SERVICE does not call ControllerGetCapabilities", async () => {
  await using dir = await tempDir();
  const driver = await startFake(dir.path, {
    pluginCapabilities: ["VOLUME_ACCESSIBILITY_CONSTRAINTS"],
    controllerCapabilities: ["PUBLISH_UNPUBLISH_VOLUME"],
  });
  const client = await connect(driver.address, {
    log: nullLogger,
    clock: realClock,
    timeoutMs: 3000,
  });
  try {
    assert.deepEqual(await getCapabilities(client), {
      controllerService: false,
      publishUnpublish: false,
      publishReadonly: false,
      singleNodeMultiWriter: false,
      listVolumes: false,
      listVolumesPublishedNodes: false,
      reconcile: false,
    });
    assert.deepEqual(driver.calls.map((c) => c.method), ["GetPluginCapabilities"]);
  } finally {
    client.close();
    await driver.close();
  }
});

Deno.test("getCapabilities() shares one 1 s budget between both calls", async () => {
  const clock = new FakeClock(0);
  const timeouts: number[] = [];
  const client = {
    ...probeScript([]),
    getPluginCapabilities(opts: CallOptions) {
      timeouts.push(opts.timeoutMs);
      clock.advance(700);
      return Promise.resolve(new Set(["CONTROLLER_SERVICE"]));
    },
    controllerGetCapabilities(opts: CallOptions) {
      timeouts.push(opts.timeoutMs);
      return Promise.resolve(new Set<string>());
    },
  };
  await getCapabilities(client, clock);
  assert.deepEqual(timeouts, [1000, 300]);
});

Deno.test("getCapabilities() passes on call errors", async () => {
  await using dir = await tempDir();
  const driver = await startFake(dir.path, {
    script: [{ method: "GetPluginCapabilities", error: { code: 12, message: "not here" } }],
  });
  const client = await connect(driver.address, {
    log: nullLogger,
    clock: realClock,
    timeoutMs: 3000,
  });
  try {
    await assert.rejects(
      getCapabilities(client),
      /rpc error: code = Unimplemented desc = not here/,
    );
  } finally {
    client.close();
    await driver.close();
  }
});
