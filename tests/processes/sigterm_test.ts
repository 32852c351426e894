/**
 * SIGTERM with work queued and a slow driver: the workers take no further key, the calls in
 * flight finish and are recorded, the Lease is released and the process exits 0. What was
 * still queued is left for the next leader.
 */

import assert from "node:assert/strict";
import { LEASES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { Lease, VolumeAttachment } from "../../lib/kube/types.ts";
import { spawnExampleDriver } from "../../testkit/csi/example_driver_process.ts";
import { spawnMain } from "../../testkit/harness/main_process.ts";
import {
  LEASE,
  numberedPv as pv,
  numberedVa as va,
  prepareWorkspace,
  until,
} from "./process_fixtures.ts";

const COUNT = 200;
const WORKERS = 10;
const PUBLISH_DELAY_MS = 3000;

Deno.test("SIGTERM: no CSI call starts after the signal, calls in flight finish, the Lease is released, exit 0", async () => {
  await using server = await MemoryApiServer.start();
  const { dir, socket, kubeconfig } = await prepareWorkspace(server, "attacher-sigterm-");
  const indexes = Array.from({ length: COUNT }, (_, i) => i);
  for (const i of indexes) server.create(PERSISTENT_VOLUMES, pv(i));

  const publishes: string[] = [];
  const driver = await spawnExampleDriver(socket, indexes.map((i) => `vol-${i}`), {
    publishDelayMs: PUBLISH_DELAY_MS,
    onLine: (line) => {
      if (line.startsWith("publish ")) publishes.push(line.slice("publish ".length));
    },
  });
  const run = spawnMain([
    `--kubeconfig=${kubeconfig}`,
    `--csi-address=${socket}`,
    `--worker-threads=${WORKERS}`,
    // The workers' first publishes start together, not 1/qps apart.
    "--kube-api-qps=1000",
    "--kube-api-burst=1000",
    "--timeout=15s",
    "--leader-election",
    "--leader-election-namespace=default",
    "--v=2",
  ], { HOSTNAME: "attacher-a" });
  const attacher = run.child;
  const reading = run.drained;
  const holder = () => server.find<Lease>(LEASES, LEASE, "default")?.spec.holderIdentity;
  const attached = () =>
    server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items.filter((v) => v.status?.attached)
      .length;
  try {
    await until("the attacher to lead", () => holder() === "attacher-a");
    for (const i of indexes) server.create(VOLUME_ATTACHMENTS, va(i));
    // Every worker is in a publish that lasts PUBLISH_DELAY_MS: no call can start by itself
    // until they end, so any call started later was started after the signal.
    await until("the first publishes", () => publishes.length >= WORKERS);
    // Signal in a quiet moment: no publish started in the last 500 ms.
    for (let seen = -1; seen !== publishes.length;) {
      seen = publishes.length;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const startedBefore = publishes.length;
    assert.ok(attached() < startedBefore, "publishes are in flight at the signal");
    const signalledAt = performance.now();
    attacher.kill("SIGTERM");
    const status = await attacher.status;
    const exitMs = performance.now() - signalledAt;
    await reading;

    assert.equal(status.code, 0, run.log);
    assert.deepEqual(publishes.slice(startedBefore), [], "CSI calls started after the signal");
    // The calls in flight finished and their results were recorded.
    assert.equal(attached(), startedBefore);
    assert.equal(holder(), "", "the Lease is released");
    assert.match(run.log, /Released lease/);
    // Nothing else was touched: the rest is the next leader's work, with no error recorded.
    const rest = server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items.filter((v) =>
      !v.status?.attached
    );
    assert.equal(rest.length, COUNT - startedBefore);
    assert.ok(rest.every((v) => v.status?.attachError === undefined));
    assert.ok(exitMs < PUBLISH_DELAY_MS + 10_000, `exit took ${exitMs} ms`);
    console.log(
      `SIGTERM figures: CSI calls started after the signal ${
        publishes.length - startedBefore
      }, in flight at the signal ${startedBefore}, exit ${status.code} after ${
        Math.round(exitMs)
      } ms, Lease holder "${holder()}"`,
    );
  } finally {
    for (const child of [attacher, driver]) {
      try {
        child.kill("SIGKILL");
      } catch {
        // already exited
      }
      await child.status;
    }
    await reading;
    await Deno.remove(dir, { recursive: true });
  }
});
