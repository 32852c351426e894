/**
 * main.ts as users run it, against the fake API server and the example CSI driver, each in its
 * own process: attach, a failed attach, detach, PV finalizer release, the metrics and health
 * endpoints, no secret in the logs at --v=5, and exit 1 when the driver dies.
 */

import assert from "node:assert/strict";
import { CSI_NODES, PERSISTENT_VOLUMES, SECRETS, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { spawnExampleDriver } from "../../testkit/csi/example_driver_process.ts";
import { spawnMain } from "../../testkit/harness/main_process.ts";

const DRIVER = "example.csi.k8s.io";
const FIN = "external-attacher/example-csi-k8s-io";
const SECRET_VALUE = "s3cr3t-publish-value";

function pv(name: string, handle: string): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: {
        driver: DRIVER,
        volumeHandle: handle,
        controllerPublishSecretRef: { name: "publish-secret", namespace: "default" },
      },
    },
  };
}

function va(name: string, pvName: string): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: pvName } },
  };
}

/** Resolves when `pred()` holds, re-checked on every change of the server or the log. */
function until(server: MemoryApiServer, what: string, pred: () => boolean, ms = 30_000) {
  return new Promise<void>((resolve, reject) => {
    const poll = setInterval(() => check(), 50); // the log is not a server event
    const check = () => {
      if (!pred()) return;
      clearTimeout(timer);
      clearInterval(poll);
      unsubscribe();
      resolve();
    };
    const timer = setTimeout(() => {
      clearInterval(poll);
      unsubscribe();
      reject(new Error(`timed out waiting for ${what}`));
    }, ms);
    const unsubscribe = server.onEvent(check);
    check();
  });
}

function metricLine(
  text: string,
  name: string,
  labels: Record<string, string>,
): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

Deno.test("main.ts attaches and detaches through a CSI driver and exits 1 when the driver dies", async () => {
  await using server = await MemoryApiServer.start();
  const dir = await Deno.makeTempDir({ prefix: "attacher-main-" });
  const socket = `${dir}/csi.sock`;
  const kubeconfig = `${dir}/kubeconfig`;
  await Deno.writeTextFile(kubeconfig, server.kubeconfig());
  server.create(SECRETS, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "publish-secret", namespace: "default" },
    data: { password: btoa(SECRET_VALUE) },
  });
  server.create(CSI_NODES, {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: "node1" },
    spec: { drivers: [{ name: DRIVER, nodeID: "node-1" }] },
  });
  server.create(PERSISTENT_VOLUMES, pv("pv-1", "vol-1"));
  server.create(PERSISTENT_VOLUMES, pv("pv-missing", "no-such-volume"));

  const driver = await spawnExampleDriver(socket, ["vol-1"]);
  const run = spawnMain([
    `--kubeconfig=${kubeconfig}`,
    `--csi-address=${socket}`,
    "--http-endpoint=127.0.0.1:0",
    "--retry-interval-start=100ms",
    "--timeout=5s",
    "--v=5",
  ]);
  const attacher = run.child;
  const reading = run.drained;
  try {
    server.create(VOLUME_ATTACHMENTS, va("va-1", "pv-1"));
    server.create(VOLUME_ATTACHMENTS, va("va-bad", "pv-missing"));
    await until(
      server,
      "va-1 attached",
      () => server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-1")?.status?.attached === true,
    );
    await until(
      server,
      "va-bad attachError",
      () =>
        server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-bad")?.status?.attachError !==
          undefined,
    );

    const attachedVA = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-1");
    assert.deepEqual(attachedVA.metadata.finalizers, [FIN]);
    assert.equal(attachedVA.metadata.annotations?.["csi.alpha.kubernetes.io/node-id"], "node-1");
    assert.ok(Object.keys(attachedVA.status?.attachmentMetadata ?? {}).length > 0);
    const bad = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-bad").status?.attachError;
    assert.match(bad?.message ?? "", /^rpc error: code = NotFound desc = /);
    assert.equal(bad?.errorCode, 5);
    assert.deepEqual(server.get<PersistentVolume>(PERSISTENT_VOLUMES, "pv-1").metadata.finalizers, [
      FIN,
    ]);

    // Metrics and health, scraped as Prometheus and the kubelet would.
    await until(server, "HTTP server", () => /"Serving HTTP".*port=\d+/.test(run.log));
    const port = run.log.match(/"Serving HTTP".*port=(\d+)/)![1];
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(await health.text(), "ok");
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const publish = "/csi.v1.Controller/ControllerPublishVolume";
    const base = { driver_name: DRIVER, method_name: publish };
    assert.ok(
      (metricLine(metrics, "csi_sidecar_operations_seconds_count", {
        ...base,
        grpc_status_code: "OK",
      }) ?? 0) >= 1,
      metrics,
    );
    assert.ok(
      (metricLine(metrics, "csi_sidecar_operations_seconds_count", {
        ...base,
        grpc_status_code: "NotFound",
      }) ?? 0) >= 1,
      metrics,
    );
    assert.ok(
      metricLine(metrics, "csi_sidecar_operations_seconds_bucket", { ...base, le: "600" }) !==
        undefined,
    );
    assert.ok((metricLine(metrics, "workqueue_adds_total", { name: "csi-attacher-va" }) ?? 0) >= 2);
    assert.ok(
      (metricLine(metrics, "workqueue_retries_total", { name: "csi-attacher-va" }) ?? 0) >= 1,
    );
    assert.match(metrics, /^process_start_time_seconds \d/m);
    // Beyond the Go attacher: end-to-end latency, the backlog gauges and per-lane queue metrics.
    const driverLabel = { driver_name: DRIVER };
    assert.equal(metricLine(metrics, "csi_attacher_attach_duration_seconds_count", driverLabel), 1);
    assert.equal(
      metricLine(metrics, "csi_attacher_detach_duration_seconds_count", driverLabel),
      undefined,
      "nothing detached yet",
    );
    assert.equal(
      metricLine(metrics, "csi_attacher_pending_volumeattachments", { operation: "attach" }),
      1,
      "va-bad is not attached",
    );
    assert.equal(
      metricLine(metrics, "csi_attacher_pending_volumeattachments", { operation: "detach" }),
      0,
    );
    assert.ok(
      (metricLine(metrics, "csi_attacher_oldest_pending_seconds", { operation: "attach" }) ??
        -1) >= 0,
    );
    assert.ok(
      (metricLine(metrics, "workqueue_adds_total", { name: "csi-attacher-va-attach" }) ?? 0) >= 2,
    );

    // The z-pages of the running process: versions and paths; every flag, the kubeconfig as a
    // path only.
    const statusz = await (await fetch(`http://127.0.0.1:${port}/statusz`)).text();
    assert.match(statusz, /^\ncsi-attacher statusz\nWarning: This endpoint is not meant/);
    assert.match(statusz, /\nRuntime version: deno \d+\.\d+\.\d+ \(V8 /);
    assert.match(statusz, /\nBinary version: v\d+\.\d+\.\d+/);
    assert.match(statusz, /\nPaths: \/flagz \/healthz \/metrics \/statusz\n$/);
    const flagz = await (await fetch(`http://127.0.0.1:${port}/flagz`)).text();
    assert.ok(flagz.includes(`\nkubeconfig=${kubeconfig}\n`), flagz);
    assert.ok(flagz.includes("\ntimeout=5s\n") && flagz.includes("\nv=5\n"), flagz);
    assert.ok(!flagz.includes("certificate-authority-data"), "no kubeconfig content");

    // Detach, then the PV finalizer goes once the PV is deleted and no VA names it.
    server.delete(VOLUME_ATTACHMENTS, "va-1");
    await until(server, "va-1 gone", () => !server.find(VOLUME_ATTACHMENTS, "va-1"));
    // The attacher records the detach when it has read the answer to its finalizer removal, a
    // moment after the server let the VA go.
    let afterDetach = "";
    for (let i = 0; i < 100; i++) {
      afterDetach = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const count = metricLine(
        afterDetach,
        "csi_attacher_detach_duration_seconds_count",
        driverLabel,
      );
      if (count !== undefined) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(
      metricLine(afterDetach, "csi_attacher_detach_duration_seconds_count", driverLabel),
      1,
    );
    server.delete(PERSISTENT_VOLUMES, "pv-1");
    await until(server, "pv-1 gone", () => !server.find(PERSISTENT_VOLUMES, "pv-1"));

    // The driver dies: the attacher exits 1 and says why.
    driver.kill("SIGKILL");
    await driver.status;
    const status = await attacher.status;
    await reading;
    assert.equal(status.code, 1, run.log);
    assert.match(run.log, /Lost connection to CSI driver, exiting/);
    // --v=5 logs every CSI request, with secrets stripped.
    assert.match(run.log, /GRPC call/);
    assert.match(run.log, /\*\*\*stripped\*\*\*/);
    assert.ok(!run.log.includes(SECRET_VALUE), "secret value in the log");
    assert.ok(!run.log.includes(btoa(SECRET_VALUE)), "encoded secret value in the log");
  } finally {
    try {
      attacher.kill("SIGKILL");
    } catch {
      // already exited
    }
    try {
      driver.kill("SIGKILL");
    } catch {
      // already exited
    }
    await attacher.status;
    await driver.status;
    await reading;
    await Deno.remove(dir, { recursive: true });
  }
});
