/**
 * SIGTERM while the workers wait for the API client's rate limiter (the default
 * `--kube-api-qps=5`, 150 VolumeAttachments pending) and the driver answers at once: a sync that
 * has not reached the driver stops where it is, so no ControllerPublishVolume starts after the
 * signal; a publish the driver confirmed still gets its `attached: true` written, so nothing
 * done is redone by the next leader; the Lease is released and the process exits 0 within
 * `--timeout` + 5 s.
 *
 * "After the signal" is read from the attacher's own log, one ordered stream: no "Calling
 * ControllerPublishVolume" line may follow its "Signal received" line.
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

const COUNT = 150;
const TIMEOUT_MS = 15_000;
const CALLING_PUBLISH = '"Calling ControllerPublishVolume"';
const SIGNAL_RECEIVED = '"Signal received, finishing work in flight"';

Deno.test("SIGTERM under the rate limiter: no ControllerPublishVolume starts after the signal, published volumes are recorded, the Lease is released, exit 0", async () => {
  await using server = await MemoryApiServer.start();
  const { dir, socket, kubeconfig } = await prepareWorkspace(server, "attacher-sigterm-qps-");
  const indexes = Array.from({ length: COUNT }, (_, i) => i);
  for (const i of indexes) server.create(PERSISTENT_VOLUMES, pv(i));

  const published: string[] = [];
  const driver = await spawnExampleDriver(socket, indexes.map((i) => `vol-${i}`), {
    publishDelayMs: 0,
    onLine: (line) => {
      if (line.startsWith("publish ")) published.push(line.slice("publish ".length));
    },
  });
  const run = spawnMain([
    `--kubeconfig=${kubeconfig}`,
    `--csi-address=${socket}`,
    `--timeout=${TIMEOUT_MS / 1000}s`,
    // A bucket that empties and refills within a second: the workers queue for tokens sooner
    // than at the default 5 QPS, burst 10.
    "--kube-api-qps=20",
    "--kube-api-burst=5",
    "--leader-election",
    "--leader-election-namespace=default",
    "--feature-gates=ReleaseLeaderElectionOnExit=true",
    "--v=4",
  ], { HOSTNAME: "attacher-a" });
  const attacher = run.child;
  const holder = () => server.find<Lease>(LEASES, LEASE, "default")?.spec.holderIdentity;
  try {
    await until("the attacher to lead", () => holder() === "attacher-a", 60_000);
    for (const i of indexes) server.create(VOLUME_ATTACHMENTS, va(i));
    // The burst is spent by then and every worker waits for a token in turn.
    await until("the throttled publishes", () => published.length >= 8, 60_000);
    const signalledAt = performance.now();
    attacher.kill("SIGTERM");
    const status = await attacher.status;
    const exitMs = performance.now() - signalledAt;
    await run.drained;

    assert.equal(status.code, 0, run.log);
    const lines = run.log.split("\n");
    const signalLine = lines.findIndex((l) => l.includes(SIGNAL_RECEIVED));
    assert.ok(signalLine >= 0, "the signal is logged");
    const callsBefore = lines.slice(0, signalLine).filter((l) => l.includes(CALLING_PUBLISH));
    const callsAfter = lines.slice(signalLine).filter((l) => l.includes(CALLING_PUBLISH));
    console.log(
      `SIGTERM under the rate limiter: ControllerPublishVolume calls started before the signal ` +
        `${callsBefore.length}, after it ${callsAfter.length}; exit ${status.code} after ` +
        `${Math.round(exitMs)} ms; Lease holder "${holder()}"`,
    );
    assert.deepEqual(callsAfter, [], "ControllerPublishVolume calls started after the signal");
    assert.equal(published.length, callsBefore.length, "the driver saw exactly those calls");
    assert.ok(exitMs < TIMEOUT_MS + 5000, `exit took ${Math.round(exitMs)} ms`);
    assert.equal(holder(), "", "the Lease is released");

    // Every publish the driver confirmed has its attached: true (nothing done is redone);
    // the rest is left for the next leader, with no error recorded.
    const vas = server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items;
    const attached = new Set(
      vas.filter((v) => v.status?.attached).map((v) => `vol-${v.metadata.name.slice(3)}`),
    );
    assert.deepEqual([...published].sort(), [...attached].sort());
    assert.ok(vas.every((v) => v.status?.attachError == null), "no error recorded");
  } finally {
    for (const child of [attacher, driver]) {
      try {
        child.kill("SIGKILL");
      } catch {
        // already exited
      }
      await child.status;
    }
    await run.drained;
    await Deno.remove(dir, { recursive: true });
  }
});
