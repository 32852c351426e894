/**
 * Scenario 4: two attacher replicas with leader election; the leader is killed (SIGKILL) while
 * attaching and the other replica finishes the work.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Lease, VolumeAttachment } from "../../../lib/kube/types.ts";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, PUBLISH } from "../driver_log.ts";
import { parseAttacherLog, sleep, waitForLog, waitUntil } from "../kit.ts";
import { PATHS } from "../objects.ts";

/** Leader election with short periods (6 s lease), for the Go csi-attacher's flags too. */
export const LEASE_FLAGS = [
  "--leader-election",
  "--leader-election-namespace=default",
  "--leader-election-lease-duration=6s",
  "--leader-election-renew-deadline=4s",
  "--leader-election-retry-period=1s",
];

/** The Lease name the attacher uses: `external-attacher-leader-<driver>`, sanitized. */
export function leaseName(driverName: string): string {
  const sanitized = `external-attacher-leader-${driverName}`.replace(/[^a-zA-Z0-9-]/g, "-");
  return sanitized.endsWith("-") ? `${sanitized}X` : sanitized;
}

/** Leader hand-over under load. */
export async function leaderFailover(ctx: ScenarioContext, count = 30): Promise<void> {
  const { kit } = ctx;
  const leasePath = `${PATHS.leases("default")}/${leaseName(ctx.cluster.info.driverName)}`;
  const first = ctx.startAttacher("a", { args: LEASE_FLAGS });
  await waitForLog(first, /"Successfully acquired lease"/);
  await waitForLog(first, /"Starting CSI attacher"/);
  const second = ctx.startAttacher("b", { args: LEASE_FLAGS });
  await waitForLog(second, /"Attempting to acquire leader lease"/);
  const lease = await kit.api.getOk<Lease>(leasePath);
  assert.equal(lease.spec.holderIdentity, first.spec.env?.HOSTNAME, "the first replica leads");

  const volumes: { pv: string; volumeId: string }[] = [];
  for (let i = 0; i < count; i++) volumes.push(await kit.makeVolume(`vol${i}`));
  const names = await Promise.all(
    volumes.map((v, i) => kit.createVa(`va${i}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)),
  );
  // Kill the leader once some, not all, are attached.
  await waitUntil(
    "a few attachments",
    async () => {
      const list = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
      const done = list.items.filter((va) =>
        names.includes(va.metadata.name) && va.status?.attached
      );
      return done.length >= 3;
    },
    60_000,
    50,
  );
  first.kill("SIGKILL");
  const killedAt = Date.now();
  await first.status;
  await sleep(300);
  const snapshot = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
  const attachedAtKill = new Set(
    snapshot.items.filter((va) => names.includes(va.metadata.name) && va.status?.attached)
      .map((va) => va.spec.source.persistentVolumeName),
  );
  assert.ok(attachedAtKill.size < count, "the leader was killed before it finished");

  await waitForLog(second, /"Successfully acquired lease"/, 60_000);
  await kit.waitAllAttached(names, 120_000);
  const newLease = await kit.api.getOk<Lease>(leasePath);
  assert.equal(newLease.spec.holderIdentity, second.spec.env?.HOSTNAME, "the second replica leads");

  // Nothing left without a finalizer.
  const list = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
  for (const name of names) {
    const va = list.items.find((v) => v.metadata.name === name);
    assert.deepEqual(va?.metadata.finalizers, [kit.finalizer], `${name} finalizers`);
  }
  for (const v of volumes) {
    assert.deepEqual(
      (await kit.pv(v.pv))?.metadata.finalizers,
      [kit.finalizer],
      `${v.pv} finalizers`,
    );
  }
  const published = await kit.publishedVolumes(ctx.nodeId);
  for (const v of volumes) assert.ok(published.has(v.volumeId), `volume ${v.volumeId} published`);

  // Nothing published twice: volumes attached when the leader died are not published again,
  // the others at most once by the new leader; the standby published nothing before it led.
  const calls = await ctx.cluster.driverCalls();
  const after = countByVolume(calls, PUBLISH, { since: killedAt });
  const republished = volumes.filter((v) => attachedAtKill.has(v.pv) && after.has(v.volumeId));
  assert.deepEqual(republished.map((v) => v.volumeId), [], "attached volumes published again");
  await ctx.checkRepublishes(["hand-over"], "volumes published more than once");
  const secondLog = parseAttacherLog(await second.output());
  const earlyCalls = secondLog.filter((l) =>
    l.msg === "Calling ControllerPublishVolume" && l.time < killedAt
  );
  assert.deepEqual(earlyCalls, [], "the standby replica called the driver before it led");
  const acquired = secondLog.find((l) => l.msg === "Successfully acquired lease");
  assert.ok(acquired !== undefined && acquired.time >= killedAt);
  console.log(
    `    leader killed with ${attachedAtKill.size}/${count} attached; ` +
      `new leader after ${((acquired.time - killedAt) / 1000).toFixed(1)} s`,
  );
}
