/**
 * main.ts throttled: under a 429 storm (the fake API server answers the attacher's writes `429`
 * with `Retry-After: 1`) every VA still attaches without a single `attachError` write, and the
 * retries show in `rest_client_request_retries_total`; at `--kube-api-qps=1` the client's own
 * throttling shows in the log and in `rest_client_rate_limiter_duration_seconds`.
 */

import assert from "node:assert/strict";
import { PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { spawnExampleDriver } from "../../testkit/csi/example_driver_process.ts";
import { spawnMain } from "../../testkit/harness/main_process.ts";
import { DRIVER, prepareWorkspace } from "./process_fixtures.ts";
import {
  driverPersistentVolume,
  driverVolumeAttachment,
} from "../../testkit/harness/client_fixtures.ts";

const COUNT = 3;
const THROTTLED = 6;

function pv(name: string, handle: string): PersistentVolume {
  return driverPersistentVolume(name, DRIVER, handle);
}

function va(name: string, pvName: string): VolumeAttachment {
  return driverVolumeAttachment(name, pvName, DRIVER, "node1");
}

/** Resolves when `pred()` holds, re-checked on every change of the server and every 50 ms. */
function until(server: MemoryApiServer, what: string, pred: () => boolean, ms = 60_000) {
  return new Promise<void>((resolve, reject) => {
    const poll = setInterval(() => check(), 50);
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

function metric(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) {
      sum += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return sum;
}

Deno.test("main.ts under a 429 storm: every VA attached, no attachError written, retries counted", async () => {
  await using server = await MemoryApiServer.start();
  const { dir, socket, kubeconfig } = await prepareWorkspace(server, "attacher-throttled-");
  const handles = Array.from({ length: COUNT }, (_, i) => `vol-${i}`);
  for (const [i, h] of handles.entries()) server.create(PERSISTENT_VOLUMES, pv(`pv-${i}`, h));
  const attachErrors: string[] = [];
  server.onEvent((ev) => {
    const message = (ev.object as VolumeAttachment).status?.attachError?.message;
    if (ev.resource === "volumeattachments" && message) attachErrors.push(`${ev.name}: ${message}`);
  });

  const driver = await spawnExampleDriver(socket, handles);
  const run = spawnMain([
    `--kubeconfig=${kubeconfig}`,
    `--csi-address=${socket}`,
    "--http-endpoint=127.0.0.1:0",
    "--retry-interval-start=100ms",
    "--v=4",
  ]);
  const attacher = run.child;
  const reading = run.drained;
  try {
    await until(server, "the informers", () => server.watchCount >= 3);
    server.clearRequests();
    // Every write is throttled until THROTTLED answers went out.
    server.failNext({ method: "PATCH", status: 429, retryAfterSeconds: 1, times: THROTTLED });
    for (let i = 0; i < COUNT; i++) server.create(VOLUME_ATTACHMENTS, va(`va-${i}`, `pv-${i}`));
    await until(
      server,
      "every VA attached",
      () =>
        Array.from({ length: COUNT }, (_, i) => `va-${i}`).every((name) =>
          server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, name)?.status?.attached === true
        ),
    );

    assert.deepEqual(attachErrors, [], "throttling absorbed by retries writes no attachError");
    const requests = server.requests.filter((r) => !r.watch);
    const patches = requests.filter((r) => r.method === "PATCH");
    // Three writes per attach (PV finalizer, VA finalizer and node ID, VA status), plus one per
    // throttled answer.
    assert.equal(patches.length, 3 * COUNT + THROTTLED);
    console.log(
      `${requests.length} API requests for ${COUNT} attaches (${
        (requests.length / COUNT).toFixed(1)
      } per attach) with ${THROTTLED} answered 429; ${attachErrors.length} attachError writes`,
    );

    await until(server, "HTTP server", () => /"Serving HTTP".*port=\d+/.test(run.log));
    const port = run.log.match(/"Serving HTTP".*port=(\d+)/)![1];
    // The attacher counts a request once it has read the whole answer, a moment after the server
    // applied the last status write that `until` saw.
    let text = "";
    for (let i = 0; i < 100; i++) {
      text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      if (metric(text, "rest_client_requests_total", { code: "200", method: "PATCH" }) >= 9) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(metric(text, "rest_client_request_retries_total", { code: "429" }), THROTTLED);
    assert.equal(
      metric(text, "rest_client_requests_total", { code: "429", method: "PATCH" }),
      THROTTLED,
    );
    assert.ok(metric(text, "rest_client_requests_total", { code: "200", method: "PATCH" }) >= 9);
    assert.equal(
      (run.log.match(/Got a Retry-After response, retrying/g) ?? []).length,
      THROTTLED,
      "each retry logged at --v=4",
    );
  } finally {
    attacher.kill("SIGTERM");
    await attacher.status;
    await reading;
    driver.kill("SIGKILL");
    await driver.status;
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("main.ts at --v=0, --kube-api-qps=1 --kube-api-burst=1: client-go's throttling line and rate limiter histogram", async () => {
  await using server = await MemoryApiServer.start();
  const { dir, socket, kubeconfig } = await prepareWorkspace(server, "attacher-qps1-");
  const handles = ["vol-0", "vol-1"];
  for (const [i, h] of handles.entries()) {
    server.create(PERSISTENT_VOLUMES, pv(`pv-${i}`, h));
    server.create(VOLUME_ATTACHMENTS, va(`va-${i}`, `pv-${i}`));
  }
  const driver = await spawnExampleDriver(socket, handles);
  const run = spawnMain([
    `--kubeconfig=${kubeconfig}`,
    `--csi-address=${socket}`,
    "--http-endpoint=127.0.0.1:0",
    "--kube-api-qps=1",
    "--kube-api-burst=1",
    "--v=0",
  ]);
  try {
    // Two attaches make six writes, two at a time: they wait up to 2 s for the bucket.
    const line =
      /"Waited before sending request" delay="[0-9.]+m?s" reason="client-side throttling, not priority and fairness" verb="[A-Z]+" URL="http:\/\/127\.0\.0\.1:\d+\/[^"]+"/;
    await until(server, "the throttling line", () => line.test(run.log), 30_000);
    await until(server, "HTTP server", () => /"Serving HTTP".*port=\d+/.test(run.log));
    const port = run.log.match(/"Serving HTTP".*port=(\d+)/)![1];
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const waits = metric(text, "rest_client_rate_limiter_duration_seconds_count", {
      verb: "PATCH",
    });
    assert.ok(waits >= 2, `${waits} waits counted`);
    const short = metric(text, "rest_client_rate_limiter_duration_seconds_bucket", {
      verb: "PATCH",
      le: "0.5",
    });
    assert.ok(short < waits, "some waits were over half a second");
    assert.ok(metric(text, "rest_client_request_duration_seconds_count", { verb: "PATCH" }) >= 2);
  } finally {
    run.child.kill("SIGTERM");
    await run.child.status;
    await run.drained;
    driver.kill("SIGKILL");
    await driver.status;
    await Deno.remove(dir, { recursive: true });
  }
});
