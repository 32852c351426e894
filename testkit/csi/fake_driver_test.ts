import assert from "node:assert/strict";
import { CsiError } from "../../lib/csi/api.ts";
import { GrpcCsiClient } from "../../lib/csi/client.ts";
import { ExampleDriver } from "./example_driver.ts";
import { nullLogger } from "../../lib/observe/logger.ts";
import { FakeCsiDriver, type FakeCsiDriverOptions } from "./fake_driver.ts";

const T = { timeoutMs: 5000 };

/** Runs `fn` with a fake on a unix socket and a client. */
async function withFake(
  options: Omit<FakeCsiDriverOptions, "address">,
  fn: (driver: FakeCsiDriver, client: GrpcCsiClient) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "fake_csi_driver_test" });
  const driver = await FakeCsiDriver.start({ ...options, address: `${dir}/csi.sock` });
  const client = new GrpcCsiClient({ log: nullLogger }, { address: driver.address });
  try {
    await fn(driver, client);
  } finally {
    client.close();
    await driver.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const publish = {
  volumeId: "vol-1",
  nodeId: "node-1",
  volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" as const } },
  readonly: false,
  secrets: { password: "pw-123" },
  volumeContext: { a: "b" },
};

async function failureOf(p: Promise<unknown>): Promise<CsiError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof CsiError, `expected a CsiError, got ${String(err)}`);
  return err;
}

Deno.test("FakeCsiDriver answers identity calls from its configuration", async () => {
  await withFake({
    pluginName: "csi.fake.io",
    pluginCapabilities: ["CONTROLLER_SERVICE", "VOLUME_ACCESSIBILITY_CONSTRAINTS"],
    controllerCapabilities: ["PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES"],
  }, async (driver, client) => {
    assert.deepEqual(await client.getPluginInfo(T), {
      name: "csi.fake.io",
      vendorVersion: "0.0.0",
    });
    assert.deepEqual(await client.probe(T), { ready: true });
    assert.deepEqual(
      await client.getPluginCapabilities(T),
      new Set(["CONTROLLER_SERVICE", "VOLUME_ACCESSIBILITY_CONSTRAINTS"]),
    );
    assert.deepEqual(
      await client.controllerGetCapabilities(T),
      new Set(["PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES"]),
    );
    driver.assertDone();
    assert.deepEqual(driver.calls.map((c) => c.method), [
      "GetPluginInfo",
      "Probe",
      "GetPluginCapabilities",
      "ControllerGetCapabilities",
    ]);
  });
});

Deno.test("FakeCsiDriver checks calls against the script per method, in order", async () => {
  await withFake({
    script: [
      {
        method: "ControllerPublishVolume",
        expect: { volumeId: "vol-1" },
        respond: { publishContext: { n: "1" } },
      },
      { method: "ControllerUnpublishVolume", expect: { volumeId: "vol-1", nodeId: "node-1" } },
      {
        method: "ControllerPublishVolume",
        expect: { volumeId: "vol-2" },
        error: { code: 8, message: "full" },
      },
    ],
  }, async (driver, client) => {
    assert.deepEqual(await client.controllerPublishVolume(publish, T), {
      publishContext: { n: "1" },
    });
    const err = await failureOf(
      client.controllerPublishVolume({ ...publish, volumeId: "vol-2" }, T),
    );
    assert.equal(err.message, "rpc error: code = ResourceExhausted desc = full");
    await client.controllerUnpublishVolume({ volumeId: "vol-1", nodeId: "node-1", secrets: {} }, T);
    driver.assertDone();
    assert.equal(driver.callsOf("ControllerPublishVolume").length, 2);
    assert.deepEqual(
      driver.calls[0]!.request.secrets,
      { password: "pw-123" },
      "calls keep secrets",
    );
  });
});

Deno.test("FakeCsiDriver treats omitted proto3 defaults as equal to explicit ones", async () => {
  await withFake({
    script: [{
      method: "ControllerPublishVolume",
      expect: {
        volumeCapability: {
          mount: { fsType: "xfs" },
          accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
        },
        readonly: false,
        secrets: {},
      },
    }],
  }, async (driver, client) => {
    await client.controllerPublishVolume({
      ...publish,
      volumeCapability: {
        mount: { fsType: "xfs", mountFlags: [], volumeMountGroup: "" },
        accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
      },
      secrets: {},
    }, T);
    driver.assertDone();
  });
});

Deno.test("FakeCsiDriver records a mismatch, answers Internal and hides secret values", async () => {
  await withFake({
    script: [
      { method: "ControllerPublishVolume", expect: { nodeId: "node-2" } },
      { method: "ControllerPublishVolume", expect: { secrets: { password: "other" } } },
      {
        method: "ControllerPublishVolume",
        expect: {
          volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_READER_ONLY" } },
        },
      },
      { method: "ControllerPublishVolume", expect: { bogusField: 1 } },
    ],
  }, async (driver, client) => {
    for (let i = 0; i < 4; i++) {
      assert.equal((await failureOf(client.controllerPublishVolume(publish, T))).code, 13);
    }
    assert.deepEqual(driver.failures, [
      'ControllerPublishVolume call mismatch: nodeId: expected "node-2", got "node-1"',
      "ControllerPublishVolume call mismatch: secrets differs (secret, values not shown)",
      'ControllerPublishVolume call mismatch: volumeCapability: expected {"accessMode":{"mode":"SINGLE_NODE_READER_ONLY"},"block":{}}, got {"accessMode":{"mode":"SINGLE_NODE_WRITER"},"block":{}}',
      "ControllerPublishVolume call mismatch: bogusField is not a field of ControllerPublishVolumeRequest",
    ]);
    assert.throws(() => driver.assertDone(), (err: Error) => {
      assert.equal(err.message.includes("pw-123"), false);
      assert.equal(err.message.includes("other"), false);
      return /secrets differs/.test(err.message);
    });
  });
});

Deno.test("FakeCsiDriver records unexpected calls and reports scripted calls that never came", async () => {
  await withFake({
    script: [{
      method: "ControllerUnpublishVolume",
      expect: { volumeId: "vol-9", secrets: { k: "secret-v" } },
    }],
  }, async (driver, client) => {
    const err = await failureOf(client.controllerPublishVolume(publish, T));
    assert.equal(err.code, 13);
    assert.match(err.details, /^fake CSI driver: unexpected ControllerPublishVolume call: /);
    assert.equal(err.details.includes("pw-123"), false, "secret not in the error");
    assert.throws(() => driver.assertDone(), (e: Error) => {
      assert.match(e.message, /unexpected ControllerPublishVolume call/);
      assert.match(
        e.message,
        /expected ControllerUnpublishVolume call did not happen: .*"volumeId":"vol-9"/,
      );
      assert.equal(e.message.includes("secret-v"), false);
      return true;
    });
  });
});

Deno.test("FakeCsiDriver delays answers by delayMs", async () => {
  await withFake({
    script: [{ method: "Probe", delayMs: 200, respond: { ready: { value: false } } }],
  }, async (driver, client) => {
    const started = Date.now();
    assert.deepEqual(await client.probe(T), { ready: false });
    assert.ok(Date.now() - started >= 190);
    driver.assertDone();
  });
});

Deno.test("FakeCsiDriver in permissive mode answers from an ExampleDriver and records calls", async () => {
  const example = new ExampleDriver();
  for (let i = 0; i < 20; i++) example.createVolume(`vol-${i}`);
  await withFake({
    permissive: example,
    script: [{
      method: "ControllerPublishVolume",
      expect: { volumeId: "vol-1" },
      error: { code: 14, message: "flaky" },
    }],
  }, async (driver, client) => {
    // The scripted entry answers first, then the example driver takes over.
    assert.equal((await failureOf(client.controllerPublishVolume(publish, T))).code, 14);
    await Promise.all(
      Array.from(
        { length: 20 },
        (_, i) => client.controllerPublishVolume({ ...publish, volumeId: `vol-${i}` }, T),
      ),
    );
    assert.equal(example.publications().length, 20);
    await client.controllerUnpublishVolume({ volumeId: "vol-3", nodeId: "node-1", secrets: {} }, T);
    assert.equal(example.isPublished("vol-3", "node-1"), false);
    const listed = await client.listVolumes({ maxEntries: 0, startingToken: "" }, T);
    assert.equal(listed.entries.filter((e) => e.publishedNodeIds.length > 0).length, 19);
    assert.equal(driver.callsOf("ControllerPublishVolume").length, 21);
    driver.assertDone();
  });
});
