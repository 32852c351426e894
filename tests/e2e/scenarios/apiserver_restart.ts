/**
 * Scenario 6: kube-apiserver restarts while the attacher works; its watches resume and every
 * VolumeAttachment reaches its final state without restarting the attacher.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { VolumeAttachment } from "../../../lib/kube/types.ts";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, PUBLISH } from "../driver_log.ts";
import { parseAttacherLog, waitForLog, waitUntil } from "../kit.ts";
import { PATHS } from "../objects.ts";
import { READY_LINE } from "./round_trip.ts";

/** API server restart in the middle of attaching and detaching. */
export async function apiserverRestart(ctx: ScenarioContext, downMs = 3000): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const volumes: { pv: string; volumeId: string }[] = [];
  for (let i = 0; i < 20; i++) volumes.push(await kit.makeVolume(`vol${i}`));
  const first = await Promise.all(
    volumes.slice(0, 5).map((v, i) =>
      kit.createVa(`va${i}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)
    ),
  );
  await kit.waitAllAttached(first);
  // A batch in flight when the server goes down.
  const second = await Promise.all(
    volumes.slice(5, 15).map((v, i) =>
      kit.createVa(`va${i + 5}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)
    ),
  );
  await waitUntil(
    "the second batch to start attaching",
    async () => {
      const list = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
      return list.items.some((va) => second.includes(va.metadata.name) && va.metadata.finalizers);
    },
    30_000,
    20,
  );
  const restartedAt = Date.now();
  await ctx.cluster.restartApiServer(downMs);
  const restartSeconds = (Date.now() - restartedAt) / 1000;
  assert.equal(attacher.exitStatus, undefined, "the attacher keeps running");

  // Changes after the restart arrive through the resumed watches.
  const third = await Promise.all(
    volumes.slice(15).map((v, i) =>
      kit.createVa(`va${i + 15}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)
    ),
  );
  const detached = first.slice(0, 3);
  await kit.deleteVas(detached, 90_000);
  await kit.waitAllAttached([...first.slice(3), ...second, ...third], 120_000);
  assert.equal(attacher.exitStatus, undefined, "the attacher is still running");

  const published = await kit.publishedVolumes(ctx.nodeId);
  for (const [i, v] of volumes.entries()) {
    assert.equal(published.has(v.volumeId), i >= 3, `volume ${v.volumeId} published state`);
  }
  // An attach whose status write failed while the server was away is retried; the retry records
  // the publish the driver confirmed instead of publishing again (the Go attacher publishes
  // again). Every volume is published exactly once.
  await ctx.checkRepublishes([], "repeated ControllerPublishVolume calls");
  const publishes = countByVolume(await ctx.cluster.driverCalls(), PUBLISH);
  const counts = volumes.map((v) => publishes.get(v.volumeId) ?? 0);
  assert.ok(counts.every((c) => c === 1), `publishes per volume: ${counts.join(",")}`);
  const recorded = parseAttacherLog(await attacher.output()).filter((l) =>
    l.msg === "ControllerPublishVolume already succeeded with this request, recording it"
  );
  console.log(
    `    API server down for ${restartSeconds.toFixed(1)} s; ` +
      `${recorded.length} attach(es) recorded after a failed status write without a second publish`,
  );
}
