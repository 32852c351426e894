/**
 * runAttacher() in-process against the in-memory API server (dummy mode: no driver): it owns the
 * API clients it builds and closes every one of them on every way out, and at exit it posts the
 * Events still queued (the leader's "stopped leading").
 */

import assert from "node:assert/strict";
import { MemoryApiServer } from "../testkit/apiserver/server.ts";
import { ExampleDriver } from "../testkit/csi/example_driver.ts";
import { FakeCsiDriver } from "../testkit/csi/fake_driver.ts";
import { csiNode, DRIVER, pv, va } from "../testkit/harness/fixtures.ts";
import { parseOptions } from "./cli/options.ts";
import { componentSettings } from "./cli/settings.ts";
import { CSI_NODES, EVENTS, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "./kube/api.ts";
import { KubeClient, type KubeRequestObserver } from "./kube/client.ts";
import { type ClusterConnection, connectionFromKubeconfigs } from "./kube/config.ts";
import type { KubeObject } from "./kube/types.ts";
import { nullLogger } from "./observe/logger.ts";
import { FakeLogger } from "../testkit/fakes/fake_logger.ts";
import { runAttacher } from "./run.ts";

/** A KubeClient that counts its close() calls. */
class CountedClient extends KubeClient {
  closed = 0;
  override close(): Promise<void> {
    this.closed++;
    return super.close();
  }
}

async function setUp() {
  const server = await MemoryApiServer.start();
  const connection: ClusterConnection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const clients: CountedClient[] = [];
  return {
    server,
    clients,
    kube: (observer: KubeRequestObserver) => {
      const client = new CountedClient({ connection, observer }, {});
      clients.push(client);
      return client;
    },
    async [Symbol.asyncDispose]() {
      for (const client of clients) await client.close();
      await server.close();
    },
  };
}

function parseOptionsOk(args: string[]) {
  const parsed = parseOptions(args);
  assert.ok(parsed.ok);
  return componentSettings(parsed.options);
}

function options(args: string[]) {
  return parseOptionsOk(["--dummy", ...args]);
}

Deno.test("runAttacher() closes every API client it built when it stops, after posting the queued Events", async () => {
  await using t = await setUp();
  const stop = new AbortController();
  await runAttacher(options(["--leader-election", "--leader-election-namespace=default"]), {
    log: nullLogger,
    signal: stop.signal,
    kube: t.kube,
    env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
    onReady: () => stop.abort(),
  });
  assert.equal(t.clients.length, 3, "the informers', the Events' and the Lease's clients");
  assert.deepEqual(t.clients.map((c) => c.closed), [1, 1, 1]);
  const messages = t.server.list<KubeObject & { message: string }>(EVENTS, "default").items
    .map((e) => e.message).sort();
  assert.deepEqual(messages, ["r1 became leader", "r1 stopped leading"]);
});

Deno.test("runAttacher() starts the PersistentVolumes' initial list once the VolumeAttachments' is read", async () => {
  await using t = await setUp();
  t.server.create(PERSISTENT_VOLUMES, pv(null));
  t.server.create(VOLUME_ATTACHMENTS, va(false));
  // The VolumeAttachments' watch list is held back: a PersistentVolume watch started beside it
  // would reach the server meanwhile.
  t.server.failNext({ verb: "watch", resource: "volumeattachments", delayMs: 300 });
  const requestsWhenSent = new Map<string, number>();
  t.server.onWatchListSent((resource) => {
    if (!requestsWhenSent.has(resource)) requestsWhenSent.set(resource, t.server.requests.length);
  });
  const stop = new AbortController();
  await runAttacher(options([]), {
    log: nullLogger,
    signal: stop.signal,
    kube: t.kube,
    env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
    onReady: () => stop.abort(),
  });
  const watches = t.server.requests.map((r, i) => ({ ...r, i }))
    .filter((r) => r.verb === "watch" && r.query.sendInitialEvents === "true");
  const vaSent = requestsWhenSent.get("volumeattachments");
  assert.ok(vaSent !== undefined, "the VolumeAttachments' watch list was sent");
  const pvWatch = watches.find((r) => r.resource === "persistentvolumes");
  assert.ok(pvWatch !== undefined, "the PersistentVolumes were listed by a watch list");
  assert.ok(
    pvWatch.i >= vaSent,
    `the PersistentVolume watch (request ${pvWatch.i}) came before the VolumeAttachments' list ` +
      `was read (${vaSent} requests then)`,
  );
  assert.ok(watches.some((r) => r.resource === "csinodes"), "the CSINodes were watched too");
});

Deno.test("runAttacher() closes the API clients it built when startup fails", async () => {
  await using t = await setUp();
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const stop = new AbortController();
  await assert.rejects(
    runAttacher(options([`--http-endpoint=127.0.0.1:${taken.addr.port}`]), {
      log: nullLogger,
      signal: stop.signal,
      kube: t.kube,
      env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
    }),
  );
  assert.ok(t.clients.length >= 1);
  assert.deepEqual(t.clients.map((c) => c.closed), t.clients.map(() => 1));
});

Deno.test("runAttacher() bounds each publish by --timeout and the ListVolumes pass by --reconcile-timeout", async () => {
  await using t = await setUp();
  const dir = await Deno.makeTempDir();
  const example = new ExampleDriver({}, { name: DRIVER });
  example.createVolume("handle1");
  await using driver = await FakeCsiDriver.start({
    address: `${dir}/csi.sock`,
    pluginName: DRIVER,
    controllerCapabilities: ExampleDriver.CONTROLLER_CAPABILITIES,
    permissive: example,
  });
  t.server.create(CSI_NODES, csiNode());
  t.server.create(PERSISTENT_VOLUMES, pv(null));
  t.server.create(VOLUME_ATTACHMENTS, va(false));
  const stop = new AbortController();
  const done = (): boolean =>
    driver.callsOf("ListVolumes").length > 0 &&
    driver.callsOf("ControllerPublishVolume").length > 0;
  const run = runAttacher(
    parseOptionsOk([
      `--csi-address=${driver.address}`,
      "--timeout=7s",
      "--reconcile-timeout=40s",
      "--reconcile-sync=100ms",
    ]),
    {
      log: nullLogger,
      signal: stop.signal,
      kube: t.kube,
      env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
    },
  );
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 25));
  stop.abort();
  await run;
  await Deno.remove(dir, { recursive: true });
  const publish = driver.callsOf("ControllerPublishVolume")[0];
  const list = driver.callsOf("ListVolumes")[0];
  assert.ok(publish && list, "a publish and a ListVolumes pass happened");
  assert.ok(publish.timeoutMs > 5_000 && publish.timeoutMs <= 7_000, `${publish.timeoutMs}`);
  assert.ok(list.timeoutMs > 35_000 && list.timeoutMs <= 40_000, `${list.timeoutMs}`);
});

/** The value of one sample line of `text`, or undefined when there is none. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    const open = line.indexOf("{");
    if (line.slice(0, open) !== name) continue;
    const close = line.lastIndexOf("}");
    const got = line.slice(open + 1, close).split(",");
    if (wanted.length === got.length && wanted.every((l) => got.includes(l))) {
      return Number(line.slice(close + 2));
    }
  }
  return undefined;
}

/**
 * The start-up calls' series in /metrics of an attacher whose driver is named `driverName`:
 * `calls(driver, method)` is the count of one OK series; `migrated` is the label's value (every
 * series has it when the driver is a CSI-migration target, none otherwise).
 */
async function startUpSeries(driverName: string) {
  await using t = await setUp();
  const dir = await Deno.makeTempDir();
  await using driver = await FakeCsiDriver.start({
    address: `${dir}/csi.sock`,
    pluginName: driverName,
  });
  const log = new FakeLogger(0);
  const stop = new AbortController();
  const ready = Promise.withResolvers<void>();
  const run = runAttacher(
    parseOptionsOk([`--csi-address=${driver.address}`, "--http-endpoint=127.0.0.1:0"]),
    {
      log,
      signal: stop.signal,
      kube: t.kube,
      env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
      onReady: () => ready.resolve(),
    },
  );
  let text: string;
  try {
    await ready.promise;
    const port = log.withMessage("Serving HTTP")[0]?.fields.port;
    text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  } finally {
    stop.abort();
    await run;
    await Deno.remove(dir, { recursive: true });
  }
  const host = new URL(t.server.url).host;
  assert.ok(
    (sample(text, "rest_client_requests_total", { code: "200", host, method: "GET" }) ?? 0) >= 2,
  );
  return (series: string, method: string, migrated?: string) =>
    sample(text, "csi_sidecar_operations_seconds_count", {
      driver_name: series,
      grpc_status_code: "OK",
      method_name: method,
      ...(migrated === undefined ? {} : { migrated }),
    });
}

Deno.test("runAttacher() keeps the start-up observations of a CSI-migration driver in /metrics", async () => {
  const migrationDriver = "pd.csi.storage.gke.io";
  const calls = await startUpSeries(migrationDriver);
  // Made before the driver's name was known, so under the name of no driver.
  assert.equal(calls("unknown-driver", "/csi.v1.Identity/Probe", "false"), 1);
  assert.equal(calls("unknown-driver", "/csi.v1.Identity/GetPluginInfo", "false"), 1);
  assert.equal(calls(migrationDriver, "/csi.v1.Identity/GetPluginCapabilities", "false"), 1);
  assert.equal(calls(migrationDriver, "/csi.v1.Controller/ControllerGetCapabilities", "false"), 1);
});

Deno.test("runAttacher() labels the capability calls with the driver's name, as cmd/csi-attacher/main.go does", async () => {
  // The Go sidecar calls SetDriverName before GetPluginCapabilities and ControllerGetCapabilities
  // (when it serves metrics); only Probe and GetPluginInfo come before the name is known.
  const calls = await startUpSeries(DRIVER);
  assert.equal(calls("unknown-driver", "/csi.v1.Identity/Probe"), 1);
  assert.equal(calls("unknown-driver", "/csi.v1.Identity/GetPluginInfo"), 1);
  assert.equal(calls(DRIVER, "/csi.v1.Identity/GetPluginCapabilities"), 1);
  assert.equal(calls(DRIVER, "/csi.v1.Controller/ControllerGetCapabilities"), 1);
  assert.equal(calls("unknown-driver", "/csi.v1.Controller/ControllerGetCapabilities"), undefined);
});

Deno.test("runAttacher() reads the host name once, for the Events' host and the elector's identity", async () => {
  await using t = await setUp();
  const stop = new AbortController();
  let reads = 0;
  await runAttacher(options(["--leader-election", "--leader-election-namespace=default"]), {
    log: nullLogger,
    signal: stop.signal,
    kube: t.kube,
    env: {
      exit: () => stop.abort(),
      writeTerminationMessage: () => {},
      // A host name that changes between reads would split the identity.
      hostname: () => `r${++reads}`,
    },
    onReady: () => stop.abort(),
  });
  assert.equal(reads, 1);
  // The elector's identity (its Events and the Lease) is the one the Event path was given.
  const messages = t.server.list<KubeObject & { message: string }>(EVENTS, "default").items
    .map((e) => e.message).sort();
  assert.deepEqual(messages, ["r1 became leader", "r1 stopped leading"]);
});
