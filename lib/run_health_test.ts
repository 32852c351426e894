/**
 * `/healthz` of runAttacher(): ok on a healthy standby and on a leader whose caches synced;
 * failing on a leader whose informers cannot sync and once the driver's connection is lost.
 * `/healthz/leader-election` stays the leader-only signal.
 */

import assert from "node:assert/strict";
import { MemoryApiServer } from "../testkit/apiserver/server.ts";
import { FakeCsiDriver } from "../testkit/csi/fake_driver.ts";
import { FakeLogger } from "../testkit/fakes/fake_logger.ts";
import { parseOptions } from "./cli/options.ts";
import { componentSettings } from "./cli/settings.ts";
import { LEASES } from "./kube/api.ts";
import { KubeClient, type KubeRequestObserver } from "./kube/client.ts";
import { connectionFromKubeconfigs } from "./kube/config.ts";
import { DUMMY_DRIVER_NAME } from "./controller/names.ts";
import { leaseName } from "./leaderelection/config.ts";
import { runAttacher } from "./run.ts";

const LEADER_FLAGS = ["--leader-election", "--leader-election-namespace=default"];

/** Resolves once `check` gives a value, polling real time; fails after `ms`. */
async function eventually<T>(what: string, check: () => Promise<T | undefined>, ms = 5000) {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`${what} did not happen in ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Runs the attacher with `args` (and an HTTP endpoint) until the returned object is disposed. */
async function start(
  args: string[],
  opts: { exit?: () => void; before?: (server: MemoryApiServer) => void } = {},
) {
  const server = await MemoryApiServer.start();
  opts.before?.(server);
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const clients: KubeClient[] = [];
  const log = new FakeLogger(5);
  const stop = new AbortController();
  const parsed = parseOptions([...args, "--http-endpoint=127.0.0.1:0"]);
  assert.ok(parsed.ok);
  const run = runAttacher(componentSettings(parsed.options), {
    log,
    signal: stop.signal,
    kube: (observer: KubeRequestObserver) => {
      const client = new KubeClient({ connection, observer }, {});
      clients.push(client);
      return client;
    },
    env: {
      exit: opts.exit ?? (() => stop.abort()),
      writeTerminationMessage: () => {},
      hostname: () => "r1",
    },
  });
  run.catch(() => {});
  const port = await eventually("Serving HTTP", () =>
    Promise.resolve(
      log.withMessage("Serving HTTP")[0]?.fields.port as number | undefined,
    ));
  const get = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return `${res.status} ${await res.text()}`;
  };
  return {
    server,
    log,
    get,
    async [Symbol.asyncDispose]() {
      stop.abort();
      await run.catch(() => {});
      for (const client of clients) await client.close();
      await server.close();
    },
  };
}

/** A Lease of `driver` held by another replica, renewed now, for an hour. */
function heldLease(driver: string) {
  const now = new Date().toISOString().replace(/Z$/, "000Z"); // MicroTime
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: leaseName(driver), namespace: "default" },
    spec: {
      holderIdentity: "other-replica",
      leaseDurationSeconds: 3600,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0,
    },
  };
}

Deno.test("/healthz answers ok on a standby that waits for another replica's Lease", async () => {
  await using t = await start(["--dummy", ...LEADER_FLAGS], {
    before: (server) => server.create(LEASES, heldLease(DUMMY_DRIVER_NAME)),
  });
  await eventually("the standby to try the Lease", () =>
    Promise.resolve(
      t.log.withMessage("Attempting to acquire leader lease").length > 0 || undefined,
    ));
  assert.equal(await t.get("/healthz"), "200 ok");
  assert.equal(await t.get("/healthz/leader-election"), "200 ok");
  assert.equal(t.log.withMessage("Successfully acquired lease").length, 0, "it stayed a standby");
});

Deno.test("/healthz answers ok on a leader once its caches synced", async () => {
  await using t = await start(["--dummy", ...LEADER_FLAGS]);
  assert.equal(
    await eventually("/healthz ok", async () => {
      const answer = await t.get("/healthz");
      return answer === "200 ok" ? answer : undefined;
    }),
    "200 ok",
  );
  assert.equal(t.log.withMessage("Successfully acquired lease").length, 1);
  assert.equal(await t.get("/healthz/leader-election"), "200 ok");
});

Deno.test("/healthz fails on a leader whose informers cannot fill their caches", async () => {
  await using t = await start(["--dummy"], {
    before: (server) =>
      server.failNext({ resource: "volumeattachments", status: 500, times: Infinity }),
  });
  // Without leader election the controller runs at once; its VolumeAttachment list fails.
  await eventually(
    "the informer to run",
    () => Promise.resolve(t.log.withMessage("Starting informer").length > 0 || undefined),
  );
  assert.equal(
    await t.get("/healthz"),
    "500 unhealthy: the informers' caches have not synced yet\n",
  );
  t.server.clearFaults();
  await eventually("/healthz ok", async () => {
    const answer = await t.get("/healthz");
    return answer === "200 ok" ? answer : undefined;
  }, 15_000);
});

Deno.test("/healthz fails once the connection to the CSI driver is lost", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const driver = await FakeCsiDriver.start({ address: `${dir}/csi.sock`, pluginName: "csi/x" });
    let exited = false;
    // The process would exit here; the test keeps it, to read /healthz in between.
    await using t = await start([`--csi-address=${driver.address}`], { exit: () => exited = true });
    await eventually("/healthz ok", async () => {
      const answer = await t.get("/healthz");
      return answer === "200 ok" ? answer : undefined;
    });
    await driver.close();
    await eventually("the loss", () => Promise.resolve(exited || undefined));
    assert.equal(
      await t.get("/healthz"),
      "500 unhealthy: the connection to the CSI driver was lost\n",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
