import assert from "node:assert/strict";
import { type AccessModeName, type ControllerPublishVolumeRequest, CsiError } from "./api.ts";
import { FencedError } from "../lease_fence.ts";
import { GRPC_CODE_NAMES } from "../wire/grpc/status.ts";
import { type CsiCallInfo, csiTarget, GrpcCsiClient, type GrpcCsiClientOptions } from "./client.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import type { Clock } from "../clock.ts";
import { FakeCsiDriver, type FakeCsiDriverOptions } from "../../testkit/csi/fake_driver.ts";

interface Env {
  driver: FakeCsiDriver;
  client: GrpcCsiClient;
  calls: CsiCallInfo[];
  log: FakeLogger;
}

/** Runs `fn` with a fake driver on a unix socket in a temp dir and a client connected to it. */
async function withDriver(
  options: Omit<FakeCsiDriverOptions, "address">,
  fn: (env: Env) => Promise<void>,
  clientOptions: Partial<GrpcCsiClientOptions> = {},
  clock?: Clock,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "csi_client_test" });
  const driver = await FakeCsiDriver.start({ ...options, address: `${dir}/csi.sock` });
  const calls: CsiCallInfo[] = [];
  const log = new FakeLogger(5);
  const client = new GrpcCsiClient({ log, ...(clock && { clock }) }, {
    address: driver.address,
    observer: { observeCsiCall: (info) => calls.push(info) },
    ...clientOptions,
  });
  try {
    await fn({ driver, client, calls, log });
  } finally {
    client.close();
    await driver.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const T = { timeoutMs: 5000 };

function publishRequest(
  over: Partial<ControllerPublishVolumeRequest> = {},
): ControllerPublishVolumeRequest {
  return {
    volumeId: "vol-1",
    nodeId: "node-1",
    volumeCapability: {
      mount: { fsType: "ext4", mountFlags: ["noatime", "discard"], volumeMountGroup: "2000" },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
    readonly: true,
    secrets: { user: "admin", password: "s3cr3t" },
    volumeContext: { pool: "fast", "storage.example.com/zone": "z1" },
    ...over,
  };
}

Deno.test("csiTarget() turns paths into unix:// targets and keeps other addresses", () => {
  assert.equal(csiTarget("/run/csi/socket"), "unix:///run/csi/socket");
  assert.equal(csiTarget("unix:///run/csi/socket"), "unix:///run/csi/socket");
  assert.equal(csiTarget("unix:/run/csi/socket"), "unix:/run/csi/socket");
  assert.equal(csiTarget("127.0.0.1:10000"), "127.0.0.1:10000");
});

Deno.test("GrpcCsiClient.controllerPublishVolume() sends every request field and returns the publish context", async () => {
  const req = publishRequest();
  await withDriver({
    script: [{
      method: "ControllerPublishVolume",
      expect: { ...req },
      respond: { publishContext: { devicePath: "/dev/x", lun: "3" } },
    }],
  }, async ({ driver, client }) => {
    const res = await client.controllerPublishVolume(req, T);
    assert.deepEqual(res, { publishContext: { devicePath: "/dev/x", lun: "3" } });
    driver.assertDone();
    // What the driver decoded, field by field.
    assert.deepEqual(driver.calls[0]!.request, {
      volumeId: "vol-1",
      nodeId: "node-1",
      volumeCapability: {
        mount: { fsType: "ext4", mountFlags: ["noatime", "discard"], volumeMountGroup: "2000" },
        accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
      },
      readonly: true,
      secrets: { user: "admin", password: "s3cr3t" },
      volumeContext: { pool: "fast", "storage.example.com/zone": "z1" },
    });
  });
});

Deno.test("GrpcCsiClient.controllerPublishVolume() round-trips block capabilities and every access mode", async () => {
  const modes: AccessModeName[] = [
    "SINGLE_NODE_WRITER",
    "SINGLE_NODE_READER_ONLY",
    "MULTI_NODE_READER_ONLY",
    "MULTI_NODE_SINGLE_WRITER",
    "MULTI_NODE_MULTI_WRITER",
    "SINGLE_NODE_SINGLE_WRITER",
    "SINGLE_NODE_MULTI_WRITER",
  ];
  const reqs = modes.map((mode, i) =>
    publishRequest({
      volumeId: `vol-${i}`,
      volumeCapability: { block: {}, accessMode: { mode } },
      readonly: false,
      secrets: {},
      volumeContext: {},
    })
  );
  await withDriver({
    script: reqs.map((req) => ({ method: "ControllerPublishVolume" as const, expect: { ...req } })),
  }, async ({ driver, client }) => {
    for (const req of reqs) {
      assert.deepEqual(await client.controllerPublishVolume(req, T), { publishContext: {} });
    }
    driver.assertDone();
    assert.deepEqual(
      driver.calls.map((c) => c.request.volumeCapability),
      modes.map((mode) => ({ block: {}, accessMode: { mode } })),
    );
  });
});

Deno.test("GrpcCsiClient.controllerUnpublishVolume() sends volume, node and secrets", async () => {
  await withDriver({
    script: [{
      method: "ControllerUnpublishVolume",
      expect: { volumeId: "vol-1", nodeId: "node-1", secrets: { token: "t0k" } },
    }],
  }, async ({ driver, client }) => {
    const res = await client.controllerUnpublishVolume(
      { volumeId: "vol-1", nodeId: "node-1", secrets: { token: "t0k" } },
      T,
    );
    assert.equal(res, undefined);
    driver.assertDone();
  });
});

Deno.test("GrpcCsiClient.listVolumes() pages and skips entries without volume or status", async () => {
  await withDriver({
    script: [
      {
        method: "ListVolumes",
        expect: { maxEntries: 2, startingToken: "" },
        respond: {
          entries: [
            {
              volume: { volumeId: "a", capacityBytes: "5" },
              status: { publishedNodeIds: ["n1", "n2"] },
            },
            { volume: { volumeId: "b" }, status: {} },
            { volume: { volumeId: "no-status" } },
            { status: { publishedNodeIds: ["n3"] } },
          ],
          nextToken: "2",
        },
      },
      { method: "ListVolumes", expect: { maxEntries: 2, startingToken: "2" }, respond: {} },
    ],
  }, async ({ driver, client }) => {
    assert.deepEqual(await client.listVolumes({ maxEntries: 2, startingToken: "" }, T), {
      entries: [{ volumeId: "a", publishedNodeIds: ["n1", "n2"] }, {
        volumeId: "b",
        publishedNodeIds: [],
      }],
      nextToken: "2",
      // The message on the wire, the entry without volume or status included.
      bytes: 54,
    });
    assert.deepEqual(await client.listVolumes({ maxEntries: 2, startingToken: "2" }, T), {
      entries: [],
      nextToken: "",
      bytes: 0,
    });
    driver.assertDone();
  });
});

Deno.test("GrpcCsiClient.listVolumes() receives a 3 MB page from grpc-js through small HTTP/2 windows", async () => {
  const entries = Array.from({ length: 20_000 }, (_, i) => ({
    volume: { volumeId: `volume-${i}-${"x".repeat(100)}`, capacityBytes: String(i) },
    status: { publishedNodeIds: [`node-${i % 7}`, `node-${i % 11}`] },
  }));
  await withDriver({
    script: [{ method: "ListVolumes", respond: { entries, nextToken: "more" } }],
  }, async ({ driver, client }) => {
    const page = await client.listVolumes({ maxEntries: 0, startingToken: "" }, T);
    assert.equal(page.entries.length, 20_000);
    assert.equal(page.nextToken, "more");
    assert.deepEqual(page.entries[12_345], {
      volumeId: `volume-12345-${"x".repeat(100)}`,
      publishedNodeIds: ["node-4", "node-3"],
    });
    driver.assertDone();
  }, { http2: { initialWindowSize: 65_535, connectionWindowSize: 65_535 } });
});

Deno.test("GrpcCsiClient identity calls map responses: ready, name, capability sets", async () => {
  await withDriver({
    script: [
      { method: "Probe", respond: {} },
      { method: "Probe", respond: { ready: { value: false } } },
      { method: "Probe", respond: { ready: { value: true } } },
      {
        method: "GetPluginInfo",
        respond: { name: "csi.example.com", vendorVersion: "1.2.3", manifest: { a: "b" } },
      },
      {
        method: "GetPluginCapabilities",
        respond: {
          capabilities: [
            { service: { type: "CONTROLLER_SERVICE" } },
            { volumeExpansion: { type: "ONLINE" } },
            {},
            { service: { type: "VOLUME_ACCESSIBILITY_CONSTRAINTS" } },
          ],
        },
      },
      {
        method: "ControllerGetCapabilities",
        respond: {
          capabilities: [
            { rpc: { type: "PUBLISH_UNPUBLISH_VOLUME" } },
            {},
            { rpc: { type: "SINGLE_NODE_MULTI_WRITER" } },
            { rpc: { type: "GET_SNAPSHOT" } },
          ],
        },
      },
    ],
  }, async ({ driver, client }) => {
    assert.deepEqual(await client.probe(T), {});
    assert.deepEqual(await client.probe(T), { ready: false });
    assert.deepEqual(await client.probe(T), { ready: true });
    assert.deepEqual(await client.getPluginInfo(T), {
      name: "csi.example.com",
      vendorVersion: "1.2.3",
    });
    assert.deepEqual(
      await client.getPluginCapabilities(T),
      new Set(["CONTROLLER_SERVICE", "VOLUME_ACCESSIBILITY_CONSTRAINTS"]),
    );
    assert.deepEqual(
      await client.controllerGetCapabilities(T),
      new Set(["PUBLISH_UNPUBLISH_VOLUME", "SINGLE_NODE_MULTI_WRITER", "GET_SNAPSHOT"]),
    );
    driver.assertDone();
  });
});

Deno.test("GrpcCsiClient gives code 4 'context deadline exceeded' when the deadline expires", async () => {
  const clock = new FakeClock();
  await withDriver(
    {
      script: [{ method: "ControllerPublishVolume", delayMs: 2000 }],
    },
    async ({ driver, client, calls }) => {
      let settled = false;
      const pending = client.controllerPublishVolume(publishRequest(), {
        timeoutMs: 150,
        migrated: true,
      })
        .then(() => undefined, (e: unknown) => e)
        .finally(() => settled = true);
      // The driver holds the call for 2 s of real time; the deadline is on the client's clock.
      for (let i = 0; i < 500 && driver.calls.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(driver.calls.length, 1, "the call reached the driver");
      clock.advance(149);
      await new Promise((r) => setTimeout(r, 0));
      assert.equal(settled, false, "still waiting just before the deadline");
      clock.advance(1);
      const err = await pending;
      assert.ok(err instanceof CsiError, String(err));
      assert.equal(err.code, 4);
      assert.equal(err.details, "context deadline exceeded");
      assert.equal(
        err.message,
        "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
      );
      assert.equal(calls.length, 1);
      assert.equal(calls[0]!.code, "DeadlineExceeded");
      assert.equal(calls[0]!.migrated, true);
      assert.equal(calls[0]!.seconds, 0.15);
    },
    {},
    clock,
  );
});

Deno.test("GrpcCsiClient maps every gRPC error code with its Go name and the driver's message", async () => {
  const codes = Array.from({ length: 16 }, (_, i) => i + 1);
  await withDriver({
    script: codes.map((code) => ({
      method: "ControllerUnpublishVolume" as const,
      error: { code, message: `failure ${code}` },
    })),
  }, async ({ driver, client, calls }) => {
    for (const code of codes) {
      const err = await client.controllerUnpublishVolume({
        volumeId: "v",
        nodeId: "n",
        secrets: {},
      }, T)
        .then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof CsiError);
      assert.equal(err.code, code);
      assert.equal(err.details, `failure ${code}`);
      assert.equal(
        err.message,
        `rpc error: code = ${GRPC_CODE_NAMES[code]} desc = failure ${code}`,
      );
    }
    assert.deepEqual(calls.map((c) => c.code), codes.map((c) => GRPC_CODE_NAMES[c]));
    assert.ok(calls.every((c) => c.method === "/csi.v1.Controller/ControllerUnpublishVolume"));
    assert.ok(calls.every((c) => !("migrated" in c)));
    driver.assertDone();
  });
});

Deno.test("GrpcCsiClient reports OK to its observer with the full method name", async () => {
  await withDriver({}, async ({ client, calls }) => {
    await client.probe({ timeoutMs: 5000, migrated: false });
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.method, "/csi.v1.Identity/Probe");
    assert.equal(calls[0]!.code, "OK");
    assert.equal(calls[0]!.migrated, false);
  });
});

Deno.test("GrpcCsiClient gives code undefined and unknown-non-grpc for a non-gRPC failure", async () => {
  await withDriver({}, async ({ client, calls }) => {
    client.close();
    const err = await client.probe(T).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof CsiError, String(err));
    assert.equal(err.code, undefined);
    assert.equal(err.message, err.details);
    assert.deepEqual(calls.map((c) => c.code), ["unknown-non-grpc"]);
  });
});

Deno.test("GrpcCsiClient logs calls at V(5) without secrets and caps responses", async () => {
  await withDriver({
    script: [
      {
        method: "ControllerPublishVolume",
        respond: { publishContext: { devicePath: "/dev/" + "y".repeat(200) } },
      },
      { method: "ControllerUnpublishVolume", error: { code: 5, message: "volume gone" } },
    ],
  }, async ({ client, log }) => {
    await client.controllerPublishVolume(publishRequest(), T);
    await client.controllerUnpublishVolume({
      volumeId: "vol-1",
      nodeId: "node-1",
      secrets: { password: "s3cr3t" },
    }, T)
      .catch(() => {});
    assert.deepEqual(log.lines.map((l) => l.msg), [
      "GRPC call",
      "GRPC response",
      "GRPC call",
      "GRPC error",
    ]);
    const text = log.text();
    assert.equal(text.includes("s3cr3t"), false, "secret value logged");
    assert.equal(text.includes("admin"), false, "secret value logged");
    assert.match(String(log.lines[0]!.fields.request), /"secrets":"\*\*\*stripped\*\*\*"/);
    assert.match(String(log.lines[0]!.fields.request), /"volumeContext":\{"pool":"fast"/);
    const response = String(log.lines[1]!.fields.response);
    assert.equal(response.length, 64 + " [response body too large, log capped to 64 chars]".length);
    assert.ok(response.endsWith(" [response body too large, log capped to 64 chars]"));
    assert.equal(log.lines[3]!.fields.err, "rpc error: code = NotFound desc = volume gone");
  }, { maxGrpcLogLength: 64 });
});

Deno.test("GrpcCsiClient fails fast with Unavailable when no driver listens", async () => {
  const dir = await Deno.makeTempDir({ prefix: "csi_client_test" });
  const client = new GrpcCsiClient({ log: nullLogger }, { address: `${dir}/missing.sock` });
  try {
    const err = await client.probe(T).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof CsiError, String(err));
    assert.equal(err.code, 14);
  } finally {
    client.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("GrpcCsiClient: a call whose fence says no is not written; the next call goes through", async () => {
  const req = publishRequest();
  await withDriver({
    script: [{
      method: "ControllerPublishVolume",
      expect: { ...req },
      respond: { publishContext: {} },
    }],
  }, async ({ driver, client, calls }) => {
    await client.probe(T); // connected: the fenced call below is refused at the write
    calls.length = 0;
    let asked = 0;
    await assert.rejects(
      client.controllerPublishVolume(req, {
        ...T,
        fence: {
          valid: () => {
            asked++;
            return false;
          },
        },
      }),
      (err: unknown) => err instanceof FencedError,
    );
    assert.equal(asked, 1);
    assert.deepEqual(driver.calls.map((c) => c.method), ["Probe"]);
    assert.deepEqual(calls, [], "a call never sent is not in the call metrics");
    await client.controllerPublishVolume(req, { ...T, fence: { valid: () => ++asked > 0 } });
    assert.deepEqual(driver.calls.map((c) => c.method), ["Probe", "ControllerPublishVolume"]);
    assert.equal(asked, 2);
  });
});

Deno.test("GrpcCsiClient quotes a driver's error text safe: controls escaped, UTF-8 unchanged", async () => {
  const message = "ボリューム vol-1 は使用中 — \x1b[31mbusy\x00\nnext line";
  await withDriver({
    script: [{ method: "ControllerUnpublishVolume" as const, error: { code: 9, message } }],
  }, async ({ driver, client }) => {
    const err = await client.controllerUnpublishVolume(
      { volumeId: "v", nodeId: "n", secrets: {} },
      T,
    )
      .then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof CsiError);
    assert.equal(err.details, "ボリューム vol-1 は使用中 — \\x1b[31mbusy\\x00\\x0anext line");
    assert.equal(
      err.message,
      "rpc error: code = FailedPrecondition desc = ボリューム vol-1 は使用中 — \\x1b[31mbusy\\x00\\x0anext line",
    );
    driver.assertDone();
  });
});
