import assert from "node:assert/strict";
import type { AccessModeName } from "../../lib/csi/api.ts";
import { CsiStatusError, type DriverPublishRequest } from "./server.ts";
import { ExampleDriver } from "./example_driver.ts";
import { connect, getCapabilities, getDriverName } from "../../lib/csi/connection.ts";
import { realClock } from "../../lib/clock.ts";
import { nullLogger } from "../../lib/observe/logger.ts";

function req(
  over: Partial<DriverPublishRequest> & { mode?: AccessModeName } = {},
): DriverPublishRequest {
  const { mode = "SINGLE_NODE_WRITER", ...rest } = over;
  return {
    volumeId: "vol-1",
    nodeId: "node-1",
    volumeCapability: {
      mount: { fsType: "ext4", mountFlags: [], volumeMountGroup: "" },
      accessMode: { mode },
    },
    readonly: false,
    secrets: {},
    volumeContext: {},
    ...rest,
  };
}

function codeOf(fn: () => unknown): number | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    assert.ok(err instanceof CsiStatusError, String(err));
    return err.code;
  }
}

Deno.test("ExampleDriver.publish() publishes, returns the device path and is idempotent", () => {
  const driver = new ExampleDriver();
  driver.createVolume("vol-1");
  assert.deepEqual(driver.publish(req()), { publishContext: { devicePath: "/dev/example/vol-1" } });
  assert.deepEqual(driver.publish(req()), { publishContext: { devicePath: "/dev/example/vol-1" } });
  assert.deepEqual(driver.publications(), [
    { volumeId: "vol-1", nodeId: "node-1", readonly: false, mode: "SINGLE_NODE_WRITER" },
  ]);
  assert.equal(driver.isPublished("vol-1", "node-1"), true);
  assert.equal(driver.isPublished("vol-1", "node-2"), false);
});

Deno.test("ExampleDriver.publish() validates requests with the CSI spec's codes", () => {
  const driver = new ExampleDriver({}, { nodeIds: ["node-1", "node-2"] });
  driver.createVolume("vol-1");
  assert.equal(codeOf(() => driver.publish(req({ volumeId: "" }))), 3);
  assert.equal(codeOf(() => driver.publish(req({ nodeId: "" }))), 3);
  assert.equal(codeOf(() => driver.publish(req({ volumeCapability: null }))), 3);
  assert.equal(
    codeOf(() =>
      driver.publish(req({ volumeCapability: { accessMode: { mode: "SINGLE_NODE_WRITER" } } }))
    ),
    3,
  );
  assert.equal(codeOf(() => driver.publish(req({ mode: "UNKNOWN" }))), 3);
  assert.equal(codeOf(() => driver.publish(req({ volumeId: "nope" }))), 5);
  assert.equal(codeOf(() => driver.publish(req({ nodeId: "node-9" }))), 5);
  driver.addNode("node-9");
  assert.equal(codeOf(() => driver.publish(req({ nodeId: "node-9" }))), undefined);
  assert.deepEqual(driver.publications().map((p) => p.nodeId), ["node-9"]);
});

Deno.test("ExampleDriver.publish() refuses conflicting publications", () => {
  const driver = new ExampleDriver();
  driver.createVolume("vol-1");
  driver.createVolume("shared");
  driver.publish(req());
  // Same node, other options: AlreadyExists.
  assert.equal(codeOf(() => driver.publish(req({ readonly: true }))), 6);
  assert.equal(codeOf(() => driver.publish(req({ mode: "SINGLE_NODE_MULTI_WRITER" }))), 6);
  // Another node while published in a single-node mode: FailedPrecondition.
  assert.equal(codeOf(() => driver.publish(req({ nodeId: "node-2" }))), 9);
  assert.equal(
    codeOf(() => driver.publish(req({ nodeId: "node-2", mode: "MULTI_NODE_MULTI_WRITER" }))),
    9,
  );
  // Multi-node modes may share.
  driver.publish(req({ volumeId: "shared", mode: "MULTI_NODE_READER_ONLY", readonly: true }));
  driver.publish(
    req({ volumeId: "shared", nodeId: "node-2", mode: "MULTI_NODE_READER_ONLY", readonly: true }),
  );
  assert.deepEqual(
    driver.publications().map((p) => `${p.volumeId}@${p.nodeId}`),
    ["shared@node-1", "shared@node-2", "vol-1@node-1"],
  );
});

Deno.test("ExampleDriver.publish() enforces maxVolumesPerNode with ResourceExhausted", () => {
  const driver = new ExampleDriver({}, { maxVolumesPerNode: 1 });
  driver.createVolume("a");
  driver.createVolume("b");
  driver.publish(req({ volumeId: "a" }));
  assert.equal(codeOf(() => driver.publish(req({ volumeId: "b" }))), 8);
  assert.equal(codeOf(() => driver.publish(req({ volumeId: "a" }))), undefined, "repeat is fine");
  driver.publish(req({ volumeId: "b", nodeId: "node-2" }));
});

Deno.test("ExampleDriver.unpublish() is idempotent and an empty node ID means every node", () => {
  const driver = new ExampleDriver();
  driver.createVolume("vol-1");
  driver.publish(req({ mode: "MULTI_NODE_MULTI_WRITER" }));
  driver.publish(req({ nodeId: "node-2", mode: "MULTI_NODE_MULTI_WRITER" }));
  driver.unpublish({ volumeId: "vol-1", nodeId: "node-1" });
  driver.unpublish({ volumeId: "vol-1", nodeId: "node-1" });
  driver.unpublish({ volumeId: "unknown", nodeId: "node-1" });
  assert.deepEqual(driver.publications().map((p) => p.nodeId), ["node-2"]);
  driver.unpublish({ volumeId: "vol-1", nodeId: "" });
  assert.deepEqual(driver.publications(), []);
  assert.equal(codeOf(() => driver.unpublish({ volumeId: "", nodeId: "node-1" })), 3);
});

Deno.test("ExampleDriver.list() pages by max_entries and reports published nodes", () => {
  const driver = new ExampleDriver();
  for (const id of ["c", "a", "b"]) driver.createVolume(id, { volumeContext: { id } });
  driver.publish(req({ volumeId: "b", nodeId: "n2", mode: "MULTI_NODE_MULTI_WRITER" }));
  driver.publish(req({ volumeId: "b", nodeId: "n1", mode: "MULTI_NODE_MULTI_WRITER" }));
  const first = driver.list({ maxEntries: 2, startingToken: "" });
  assert.deepEqual(first.entries.map((e) => [e.volume?.volumeId, e.status?.publishedNodeIds]), [
    ["a", []],
    ["b", ["n1", "n2"]],
  ]);
  assert.equal(first.nextToken, "2");
  assert.deepEqual(first.entries[0]!.volume, {
    volumeId: "a",
    capacityBytes: String(1 << 30),
    volumeContext: { id: "a" },
  });
  const second = driver.list({ maxEntries: 2, startingToken: first.nextToken });
  assert.deepEqual(second.entries.map((e) => e.volume?.volumeId), ["c"]);
  assert.equal(second.nextToken, "");
  assert.equal(driver.list({ maxEntries: 0, startingToken: "" }).entries.length, 3);
  assert.equal(codeOf(() => driver.list({ maxEntries: 0, startingToken: "x" })), 10);
  assert.equal(codeOf(() => driver.list({ maxEntries: 0, startingToken: "4" })), 10);
  assert.equal(codeOf(() => driver.list({ maxEntries: -1, startingToken: "" })), 3);
});

Deno.test("ExampleDriver.createVolume() and deleteVolume() guard their invariants", () => {
  const driver = new ExampleDriver();
  assert.throws(() => driver.createVolume(""), RangeError);
  driver.createVolume("v");
  assert.throws(() => driver.createVolume("v"), RangeError);
  driver.publish(req({ volumeId: "v" }));
  assert.throws(() => driver.deleteVolume("v"), /still published/);
  driver.unpublish({ volumeId: "v", nodeId: "" });
  assert.equal(driver.deleteVolume("v"), true);
  assert.equal(driver.deleteVolume("v"), false);
});

Deno.test("ExampleDriver.start() serves the attacher's calls over a unix socket", async () => {
  const dir = await Deno.makeTempDir({ prefix: "example_csi_driver_test" });
  const driver = new ExampleDriver({}, { name: "demo.csi.io", nodeIds: ["node-1"] });
  driver.createVolume("vol-1");
  const server = await driver.start(`${dir}/csi.sock`);
  const client = await connect(server.address, {
    log: nullLogger,
    clock: realClock,
    timeoutMs: 3000,
  });
  try {
    assert.equal(await getDriverName(client), "demo.csi.io");
    assert.deepEqual(await getCapabilities(client), {
      controllerService: true,
      publishUnpublish: true,
      publishReadonly: true,
      singleNodeMultiWriter: false,
      listVolumes: true,
      listVolumesPublishedNodes: true,
      reconcile: true,
    });
    assert.deepEqual(await client.probe({ timeoutMs: 3000 }), { ready: true });
    const published = await client.controllerPublishVolume({
      volumeId: "vol-1",
      nodeId: "node-1",
      volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
      readonly: true,
      secrets: {},
      volumeContext: {},
    }, { timeoutMs: 3000 });
    assert.deepEqual(published, { publishContext: { devicePath: "/dev/example/vol-1" } });
    assert.deepEqual(driver.publications(), [
      { volumeId: "vol-1", nodeId: "node-1", readonly: true, mode: "SINGLE_NODE_WRITER" },
    ]);
    const { bytes, ...page } = await client.listVolumes({ maxEntries: 0, startingToken: "" }, {
      timeoutMs: 3000,
    });
    assert.deepEqual(page, {
      entries: [{ volumeId: "vol-1", publishedNodeIds: ["node-1"] }],
      nextToken: "",
    });
    assert.ok((bytes ?? 0) > 0, "the page's size on the wire is reported");
    await client.controllerUnpublishVolume({ volumeId: "vol-1", nodeId: "node-1", secrets: {} }, {
      timeoutMs: 3000,
    });
    assert.deepEqual(driver.publications(), []);
  } finally {
    client.close();
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ExampleDriver faults: not idempotent, multi-attach, publications hidden from list()", () => {
  const strict = new ExampleDriver({}, { nonIdempotent: true });
  strict.createVolume("vol-1");
  assert.equal(codeOf(() => strict.unpublish({ volumeId: "vol-1", nodeId: "node-1" })), 5);
  assert.equal(codeOf(() => strict.publish(req())), undefined);
  assert.equal(codeOf(() => strict.publish(req())), 6);
  assert.equal(codeOf(() => strict.unpublish({ volumeId: "vol-1", nodeId: "node-1" })), undefined);
  assert.equal(codeOf(() => strict.unpublish({ volumeId: "vol-1", nodeId: "node-1" })), 5);

  const loose = new ExampleDriver({}, {
    faults: { fail: {}, slowMs: {}, multiAttach: true, hidePublished: true },
  });
  loose.createVolume("vol-1");
  loose.publish(req());
  loose.publish(req({ nodeId: "node-2" }));
  assert.deepEqual(loose.publications().map((p) => p.nodeId), ["node-1", "node-2"]);
  assert.deepEqual(loose.list({ maxEntries: 0, startingToken: "" }).entries[0]?.status, {
    publishedNodeIds: [],
  });
  // Without the faults: FailedPrecondition, and the publication listed.
  const plain = new ExampleDriver();
  plain.createVolume("vol-1");
  plain.publish(req());
  assert.equal(codeOf(() => plain.publish(req({ nodeId: "node-2" }))), 9);
  assert.deepEqual(plain.list({ maxEntries: 0, startingToken: "" }).entries[0]?.status, {
    publishedNodeIds: ["node-1"],
  });
});
