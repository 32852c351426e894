/**
 * Scenario 18: SIGTERM while 150 VolumeAttachments wait at the default QPS.
 *
 * At `--kube-api-qps=5 --kube-api-burst=10` (the defaults, as the Go sidecar's) an attach costs
 * three API writes, so 150 new VolumeAttachments keep the workers waiting for rate-limiter tokens
 * for about a minute and a half. The leader gets SIGTERM once a few are attached. A sync that was
 * waiting for a token or an API answer before its CSI call stops there: no
 * ControllerPublishVolume starts after the signal (read from our own "GRPC call" lines and from
 * the driver's call log), the process exits 0 within `--timeout` (15 s by default) + 5 s, and it
 * releases the Lease (`ReleaseLeaderElectionOnExit`). A second replica then attaches every VA
 * left; each volume is published exactly once in all, so nothing the first replica did is redone.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Lease, VolumeAttachment } from "../../../lib/kube/types.ts";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, PUBLISH } from "../driver_log.ts";
import { parseAttacherLog, waitForLog, waitUntil } from "../kit.ts";
import { PATHS } from "../objects.ts";
import { LEASE_FLAGS, leaseName } from "./leader_failover.ts";
import { RELEASE_GATE } from "./rolling_update.ts";
import { READY_LINE } from "./round_trip.ts";

/** `--timeout`'s default: the bound of a publish in flight when the signal comes. */
const CSI_TIMEOUT_SECONDS = 15;

/** Attaches done before the signal: enough that the backlog is being worked through. */
const ATTACHED_BEFORE_SIGNAL = 8;

/** Scenario 18; returns the seconds from the signal to the exit. */
export async function sigtermBacklog(ctx: ScenarioContext, count = 150): Promise<number> {
  const { kit } = ctx;
  const leasePath = `${PATHS.leases("default")}/${leaseName(ctx.cluster.info.driverName)}`;
  const first = ctx.startAttacher("a", { args: [...LEASE_FLAGS, RELEASE_GATE] });
  await waitForLog(first, /"Successfully acquired lease"/);
  await waitForLog(first, READY_LINE);

  const volumes: { pv: string; volumeId: string }[] = [];
  for (let i = 0; i < count; i++) volumes.push(await kit.makeVolume(`vol${i}`));
  const names = await Promise.all(
    volumes.map((v, i) => kit.createVa(`va${i}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)),
  );
  const attachedNow = async (): Promise<Set<string>> => {
    const list = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
    const ours = new Set(names);
    return new Set(
      list.items.filter((va) => ours.has(va.metadata.name) && va.status?.attached)
        .map((va) => va.metadata.name),
    );
  };
  await waitUntil(
    `${ATTACHED_BEFORE_SIGNAL} VolumeAttachments attached`,
    async () => (await attachedNow()).size >= ATTACHED_BEFORE_SIGNAL,
    120_000,
    100,
  );

  first.kill("SIGTERM");
  // Taken after the signal was sent: a call logged later started after it.
  const signalAt = Date.now();
  const status = await first.status;
  const stopSeconds = (Date.now() - signalAt) / 1000;
  const output = await first.output();
  assert.equal(status.code, 0, `exit status on SIGTERM:\n${await first.tail()}`);
  assert.ok(
    stopSeconds <= CSI_TIMEOUT_SECONDS + 5,
    `exited ${stopSeconds.toFixed(1)} s after SIGTERM (goal <= --timeout + 5 s)`,
  );
  assert.match(output, /"Released lease"/);
  const lease = await kit.api.getOk<Lease>(leasePath);
  assert.equal(lease.spec.holderIdentity ?? "", "", "the Lease has no holder once released");

  const publishes = parseAttacherLog(output).filter((l) =>
    l.msg === "GRPC call" && l.rest.includes(`method="${PUBLISH}"`)
  );
  const late = publishes.filter((l) => l.time > signalAt);
  assert.deepEqual(
    late.map((l) => new Date(l.time).toISOString()),
    [],
    "ControllerPublishVolume calls our attacher started after SIGTERM",
  );
  const driverLate = (await ctx.cluster.driverCalls()).filter((c) =>
    c.method === PUBLISH && c.time > signalAt
  );
  assert.deepEqual(
    driverLate.map((c) => c.request.volume_id),
    [],
    "ControllerPublishVolume calls the driver served after SIGTERM",
  );
  const attachedAtExit = await attachedNow();
  const pending = names.filter((va) => !attachedAtExit.has(va));
  assert.ok(pending.length > 0, "the signal came while VolumeAttachments were pending");

  // Every VA attached so far and every volume published keeps the finalizer that guarantees
  // its detach: the next leader's work.
  const publishedAtExit = await kit.publishedVolumes(ctx.nodeId);
  for (const [i, v] of volumes.entries()) {
    const va = names[i]!;
    if (!attachedAtExit.has(va) && !publishedAtExit.has(v.volumeId)) continue;
    assert.deepEqual((await kit.va(va))?.metadata.finalizers, [kit.finalizer], va);
    assert.deepEqual((await kit.pv(v.pv))?.metadata.finalizers, [kit.finalizer], v.pv);
  }

  // The next replica (a faster client, to keep the suite short) attaches the rest.
  const second = ctx.startAttacher("b", {
    args: [...LEASE_FLAGS, "--kube-api-qps=50", "--kube-api-burst=100"],
  });
  await waitForLog(second, READY_LINE);
  await kit.waitAllAttached(names, 180_000);
  const perVolume = countByVolume(await ctx.cluster.driverCalls(), PUBLISH);
  const wrong = volumes.filter((v) => perVolume.get(v.volumeId) !== 1)
    .map((v) => `${v.volumeId}: ${perVolume.get(v.volumeId) ?? 0}`);
  assert.deepEqual(wrong, [], "ControllerPublishVolume calls per volume other than 1");
  console.log(
    `    SIGTERM with ${pending.length} of ${count} VolumeAttachments pending at the default ` +
      `QPS: exit 0 in ${stopSeconds.toFixed(1)} s, Lease released, ` +
      `${publishes.length} ControllerPublishVolume calls before the signal and none after`,
  );
  return stopSeconds;
}
