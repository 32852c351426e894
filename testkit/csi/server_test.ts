import assert from "node:assert/strict";
import { CsiError } from "../../lib/csi/api.ts";
import { GrpcCsiClient } from "../../lib/csi/client.ts";
import { CsiStatusError, type DriverPublishRequest, startCsiDriverServer } from "./server.ts";
import { nullLogger } from "../../lib/observe/logger.ts";

const T = { timeoutMs: 5000 };

Deno.test("CsiStatusError carries a gRPC error code and rejects non-error codes", () => {
  const err = new CsiStatusError(5, "volume not found");
  assert.equal(err.code, 5);
  assert.equal(err.message, "volume not found");
  assert.equal(err.name, "CsiStatusError");
  assert.throws(() => new CsiStatusError(0, "ok is not an error"), RangeError);
  assert.throws(() => new CsiStatusError(17, "unknown"), RangeError);
  assert.throws(() => new CsiStatusError(2.5, "fraction"), RangeError);
});

Deno.test("startCsiDriverServer() serves handlers on 127.0.0.1:0 and reports the bound port", async () => {
  let received: DriverPublishRequest | undefined;
  const server = await startCsiDriverServer({
    address: "127.0.0.1:0",
    identity: {
      getPluginInfo: () => Promise.resolve({ name: "tcp.csi.io", vendorVersion: "2" }),
    },
    controller: {
      controllerPublishVolume: (req) => {
        received = req;
        return Promise.resolve({ publishContext: { a: "b" } });
      },
    },
  });
  assert.match(server.address, /^127\.0\.0\.1:[1-9]\d*$/);
  const client = new GrpcCsiClient({ log: nullLogger }, { address: server.address });
  try {
    assert.deepEqual(await client.getPluginInfo(T), { name: "tcp.csi.io", vendorVersion: "2" });
    const res = await client.controllerPublishVolume({
      volumeId: "v",
      nodeId: "n",
      volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
      readonly: false,
      secrets: {},
      volumeContext: {},
    }, T);
    assert.deepEqual(res, { publishContext: { a: "b" } });
    // Handlers get every field, defaults included, and no virtual oneof property.
    assert.deepEqual(received, {
      volumeId: "v",
      nodeId: "n",
      volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
      readonly: false,
      secrets: {},
      volumeContext: {},
    });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("startCsiDriverServer() answers Unimplemented for missing handlers and Unknown for plain errors", async () => {
  const dir = await Deno.makeTempDir({ prefix: "csi_driver_server_test" });
  const server = await startCsiDriverServer({
    address: `${dir}/csi.sock`,
    identity: {
      probe: () => Promise.reject(new Error("disk on fire")),
      getPluginInfo: () => {
        throw new CsiStatusError(9, "thrown synchronously");
      },
    },
  });
  const client = new GrpcCsiClient({ log: nullLogger }, { address: server.address });
  try {
    const codeOf = (p: Promise<unknown>) =>
      p.then(() => "ok", (e: unknown) => e instanceof CsiError ? e.message : String(e));
    assert.equal(await codeOf(client.probe(T)), "rpc error: code = Unknown desc = disk on fire");
    assert.equal(
      await codeOf(client.getPluginInfo(T)),
      "rpc error: code = FailedPrecondition desc = thrown synchronously",
    );
    assert.match(
      await codeOf(client.getPluginCapabilities(T)),
      /^rpc error: code = Unimplemented /,
    );
    assert.match(
      await codeOf(client.controllerGetCapabilities(T)),
      /^rpc error: code = Unimplemented /,
    );
  } finally {
    client.close();
    await server.close();
    await server.close(); // idempotent
    await Deno.remove(dir, { recursive: true });
  }
});

/** A process that listens on `path` and is killed leaves the socket file behind. */
async function leaveStaleSocket(path: string): Promise<void> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `const l = Deno.listen({ transport: "unix", path: ${JSON.stringify(path)} });
       console.log("up");
       await l.accept();`,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  await reader.read();
  reader.releaseLock();
  await child.stdout.cancel();
  child.kill("SIGKILL");
  await child.status;
}

Deno.test("startCsiDriverServer() replaces a stale socket but not a regular file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "csi_driver_server_test" });
  try {
    const path = `${dir}/csi.sock`;
    await leaveStaleSocket(path);
    assert.equal((await Deno.lstat(path)).isSocket, true);
    const server = await startCsiDriverServer({
      address: path,
      identity: { probe: () => Promise.resolve({}) },
    });
    const client = new GrpcCsiClient({ log: nullLogger }, { address: path });
    try {
      assert.deepEqual(await client.probe(T), {});
    } finally {
      client.close();
      await server.close();
    }
    const file = `${dir}/plain`;
    await Deno.writeTextFile(file, "not a socket");
    await assert.rejects(
      startCsiDriverServer({ address: file, identity: {} }),
      /^Error: cannot listen on .*\/plain: /,
    );
    assert.equal(await Deno.readTextFile(file), "not a socket");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
