/**
 * A leader stopped (SIGSTOP) for longer than its lease, with work queued, while a standby takes
 * the Lease over, then resumed (SIGCONT): it makes no driver call and no write after the resume
 * and exits 1 with `Stopped leading` within a second; the standby attaches every
 * VolumeAttachment.
 *
 * What the leader sends after the resume is counted where it arrives: the driver's own log of
 * publishes, and the bytes that pass a TCP proxy between the leader and the API server. Its log
 * cannot tell: a write sent just before the pause has its answer read, and its act logged
 * ("finalizer added"), after the resume.
 */

import assert from "node:assert/strict";
import { LEASES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { TcpProxy } from "../../testkit/tcp_proxy.ts";
import type { Lease, VolumeAttachment } from "../../lib/kube/types.ts";
import { spawnExampleDriver } from "../../testkit/csi/example_driver_process.ts";
import { type MainProcess, spawnMain } from "../../testkit/harness/main_process.ts";
import { FENCE_REFUSED_MESSAGE } from "../../lib/lease_fence.ts";
import { LEASE_LAPSED_MESSAGE } from "../../lib/leaderelection/term_fence.ts";
import {
  LEASE,
  numberedPv as pv,
  numberedVa as va,
  prepareWorkspace,
  until,
} from "./process_fixtures.ts";

const COUNT = 60;
const PUBLISH_DELAY_MS = 100;
/** Short leases keep the test fast: the fence closes 1.8 s after the last renewal started. */
const LEASE_FLAGS = [
  "--leader-election",
  "--leader-election-namespace=default",
  "--leader-election-lease-duration=2s",
  "--leader-election-renew-deadline=1500ms",
  "--leader-election-retry-period=500ms",
];

function replica(name: string, kubeconfig: string, socket: string): MainProcess {
  return spawnMain([
    `--kubeconfig=${kubeconfig}`,
    `--csi-address=${socket}`,
    "--worker-threads=10",
    "--kube-api-qps=1000",
    "--kube-api-burst=1000",
    ...LEASE_FLAGS,
    "--v=4",
  ], { HOSTNAME: name });
}

Deno.test("leader paused past its lease: no driver call after the resume, exit 1 within 1 s", async () => {
  await using server = await MemoryApiServer.start();
  const { dir, kubeconfig } = await prepareWorkspace(server, "attacher-pause-");
  // A reaches the API server through a proxy that counts what A sends.
  await using proxyA = await TcpProxy.start({ port: Number(new URL(server.url).port) });
  const kubeconfigA = `${dir}/kubeconfig-a`;
  await Deno.writeTextFile(
    kubeconfigA,
    server.kubeconfig().replace(server.url, `http://127.0.0.1:${proxyA.port}`),
  );
  const indexes = Array.from({ length: COUNT }, (_, i) => i);
  for (const i of indexes) server.create(PERSISTENT_VOLUMES, pv(i));
  const volumes = indexes.map((i) => `vol-${i}`);
  // Each replica has its driver (the sidecar's own socket), so the calls of each are told apart.
  const publishesA: string[] = [];
  const publishesB: string[] = [];
  const driverA = await spawnExampleDriver(`${dir}/a.sock`, volumes, {
    publishDelayMs: PUBLISH_DELAY_MS,
    onLine: (line) => line.startsWith("publish ") && publishesA.push(line),
  });
  const driverB = await spawnExampleDriver(`${dir}/b.sock`, volumes, {
    publishDelayMs: PUBLISH_DELAY_MS,
    onLine: (line) => line.startsWith("publish ") && publishesB.push(line),
  });
  const a = replica("attacher-a", kubeconfigA, `${dir}/a.sock`);
  let b: MainProcess | undefined;
  const holder = () => server.find<Lease>(LEASES, LEASE, "default")?.spec.holderIdentity;
  const attached = () =>
    server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items.filter((v) => v.status?.attached)
      .length;
  try {
    await until("A to lead", () => holder() === "attacher-a");
    b = replica("attacher-b", kubeconfig, `${dir}/b.sock`);
    for (const i of indexes) server.create(VOLUME_ATTACHMENTS, va(i));
    await until("A's first publishes", () => publishesA.length >= 12);
    a.child.kill("SIGSTOP");
    await until("B to take the Lease over", () => holder() === "attacher-b", 15_000);
    await until("B's first publish", () => publishesB.length >= 1, 15_000);
    const beforeResume = publishesA.length;
    assert.ok(beforeResume < COUNT, "A has work queued at the resume");
    // A is stopped: what it logged so far is all it did before the resume.
    const logBefore = a.log.length;
    const sentBefore = proxyA.bytesFromClients;
    const resumedAt = performance.now();
    a.child.kill("SIGCONT");
    const status = await a.child.status;
    const exitMs = performance.now() - resumedAt;
    await a.drained;

    assert.equal(status.code, 1, a.log);
    assert.ok(exitMs < 1000, `A exited ${Math.round(exitMs)} ms after the resume`);
    assert.match(a.log, /Stopped leading/);
    // Give a late call time to reach the driver's log before counting.
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(publishesA.slice(beforeResume), [], "driver calls by A after the resume");
    const after = a.log.slice(logBefore);
    assert.equal(
      proxyA.bytesFromClients - sentBefore,
      0,
      `bytes A sent to the API server after the resume:\n${after}`,
    );
    assert.ok(after.includes(LEASE_LAPSED_MESSAGE), after);
    await until("B to attach every VolumeAttachment", () => attached() === COUNT, 20_000);
    assert.equal(holder(), "attacher-b");
    console.log(
      `pause figures: A's driver calls before the pause ${beforeResume}, after the resume ${
        publishesA.length - beforeResume
      }; A exited ${status.code} ${Math.round(exitMs)} ms after the resume; fence refusals ` +
        `logged ${a.log.split(FENCE_REFUSED_MESSAGE).length - 1}; B attached ${attached()}`,
    );
  } finally {
    for (const child of [a.child, b?.child, driverA, driverB]) {
      if (child === undefined) continue;
      try {
        child.kill("SIGCONT");
        child.kill("SIGKILL");
      } catch {
        // already exited
      }
      await child.status;
    }
    await a.drained;
    await b?.drained;
    await Deno.remove(dir, { recursive: true });
  }
});
