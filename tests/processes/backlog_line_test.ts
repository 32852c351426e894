/**
 * main.ts with `--log-backlog-interval` (beyond the Go attacher): while its only attach worker is
 * held by a slow ControllerPublishVolume, the second VolumeAttachment waits, and the attacher logs
 * the backlog line naming the attach lane and the waiting VA.
 */

import assert from "node:assert/strict";
import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { VolumeAttachment } from "../../lib/kube/types.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { FakeCsiDriver } from "../../testkit/csi/fake_driver.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const DRIVER = "example.csi.k8s.io";

Deno.test("main.ts logs the backlog line when a VolumeAttachment waits longer than --log-backlog-interval", async () => {
  await using server = await MemoryApiServer.start();
  const dir = await Deno.makeTempDir({ prefix: "attacher-backlog-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await Deno.writeTextFile(kubeconfig, server.kubeconfig());
  const example = new ExampleDriver({}, { name: DRIVER });
  example.createVolume("vol-1");
  example.createVolume("vol-2");
  const held = Promise.withResolvers<void>();
  const csi = await FakeCsiDriver.start({
    address: `${dir}/csi.sock`,
    pluginName: DRIVER,
    controllerCapabilities: ["PUBLISH_UNPUBLISH_VOLUME"],
    // The first publish holds the only attach worker until the backlog line is seen; the rest
    // answer at once.
    script: [{
      method: "ControllerPublishVolume",
      respond: { publishContext: {} },
      until: held.promise,
    }],
    permissive: example,
  });
  server.create(CSI_NODES, {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: "node1" },
    spec: { drivers: [{ name: DRIVER, nodeID: "node-1" }] },
  });
  for (const i of [1, 2]) {
    server.create(PERSISTENT_VOLUMES, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: `pv-${i}` },
      spec: { accessModes: ["ReadWriteOnce"], csi: { driver: DRIVER, volumeHandle: `vol-${i}` } },
    });
  }
  const attacher = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      MAIN,
      `--kubeconfig=${kubeconfig}`,
      `--csi-address=${csi.address}`,
      "--attach-worker-threads=1",
      "--log-backlog-interval=500ms",
      "--timeout=10s",
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let log = "";
  const decoder = new TextDecoder();
  const reading = Promise.all([attacher.stdout, attacher.stderr].map(async (stream) => {
    for await (const chunk of stream) log += decoder.decode(chunk);
  }));
  try {
    server.create(VOLUME_ATTACHMENTS, va("va-1", "pv-1"));
    await waitFor(() => csi.calls.some((c) => c.method === "ControllerPublishVolume"));
    server.create(VOLUME_ATTACHMENTS, va("va-2", "pv-2"));
    await waitFor(() => log.includes("Work is waiting in the queue"));
    const line = log.split("\n").find((l) => l.includes("Work is waiting in the queue"))!;
    assert.match(line, /queue="csi-attacher-va-attach"/);
    assert.match(line, /depth=1/);
    assert.match(line, /oldest="va-2"/);
    const waited = Number(line.match(/oldestWaitSeconds=([\d.]+)/)?.[1]);
    assert.ok(waited > 0.5, `waited longer than the interval: ${line}`);
    held.resolve();
    await waitFor(() =>
      server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-2")?.status?.attached === true
    );
  } finally {
    held.resolve();
    attacher.kill("SIGKILL");
    await attacher.status;
    await reading;
    await csi.close();
    await Deno.remove(dir, { recursive: true });
  }
});

function va(name: string, pvName: string): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: pvName } },
  };
}

/** Checks `pred` every 50 ms (the attacher is another process), for at most 20 s. */
async function waitFor(pred: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${pred}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
