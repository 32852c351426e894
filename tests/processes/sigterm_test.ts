/**
 * SIGTERM with work queued and a slow driver: the workers take no further key, the calls in
 * flight finish and are recorded, the Lease is released and the process exits 0. What was
 * still queued is left for the next leader.
 */

import assert from "node:assert/strict";
import { LEASES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { Lease, VolumeAttachment } from "../../lib/kube/types.ts";
import { releasePublishes, spawnExampleDriver } from "../../testkit/csi/example_driver_process.ts";
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
const TIMEOUT_MS = 15_000;
const SIGNAL_RECEIVED = '"Signal received, finishing work in flight"';

Deno.test("SIGTERM: no CSI call starts after the signal, calls in flight finish, the Lease is released, exit 0", async () => {
  await using server = await MemoryApiServer.start();
  const { dir, socket, kubeconfig } = await prepareWorkspace(server, "attacher-sigterm-");
  const indexes = Array.from({ length: COUNT }, (_, i) => i);
  for (const i of indexes) server.create(PERSISTENT_VOLUMES, pv(i));

  const publishes: string[] = [];
  const driver = await spawnExampleDriver(socket, indexes.map((i) => `vol-${i}`), {
    holdPublishes: true,
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
    `--timeout=${TIMEOUT_MS / 1000}s`,
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
    // Every worker is in a publish the driver holds: no call can start until they end, so any
    // call started later was started after the signal.
    await until("the first publishes", () => publishes.length >= WORKERS);
    const startedBefore = publishes.length;
    assert.equal(startedBefore, WORKERS, "one publish per worker");
    assert.equal(attached(), 0, "publishes are in flight at the signal");
    const signalledAt = performance.now();
    attacher.kill("SIGTERM");
    // The calls in flight end once the attacher has taken the signal.
    await until("the signal to be logged", () => run.log.includes(SIGNAL_RECEIVED));
    await releasePublishes(driver);
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
    assert.ok(exitMs < TIMEOUT_MS, `exit took ${exitMs} ms`);
    console.log(
      `SIGTERM figures: CSI calls started after the signal ${
        publishes.length - startedBefore
      }, in flight at the signal ${startedBefore}, exit ${status.code} after ${
        Math.round(exitMs)
      } ms, Lease holder "${holder()}"`,
    );
  } finally {
    await releasePublishes(driver).catch(() => {});
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
