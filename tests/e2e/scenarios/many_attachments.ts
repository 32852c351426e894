/**
 * Scenario 3: 50 VolumeAttachments on 5 nodes, created at once.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { VolumeAttachment } from "../../../lib/kube/types.ts";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, PUBLISH, UNPUBLISH } from "../driver_log.ts";
import { NODE_ID_ANNOTATION, waitForLog } from "../kit.ts";
import { republishesByVolume } from "../publish_analysis.ts";
import { PATHS } from "../objects.ts";
import { READY_LINE } from "./round_trip.ts";

/**
 * All attach, each with exactly one ControllerPublishVolume, and all detach, each with exactly
 * one ControllerUnpublishVolume. Returns the seconds the attach and the detach phases took.
 */
export async function manyAttachments(
  ctx: ScenarioContext,
  count = 50,
): Promise<{ attachSeconds: number; detachSeconds: number }> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const volumes: { pv: string; volumeId: string }[] = [];
  for (let i = 0; i < count; i++) volumes.push(await kit.makeVolume(`vol${i}`));

  const t0 = performance.now();
  const names = await Promise.all(
    volumes.map((v, i) => kit.createVa(`va${i}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)),
  );
  await kit.waitAllAttached(names, 180_000);
  const attachSeconds = (performance.now() - t0) / 1000;

  const list = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
  for (const name of names) {
    const va = list.items.find((v) => v.metadata.name === name);
    assert.ok(va !== undefined, name);
    assert.deepEqual(va.metadata.finalizers, [kit.finalizer], `${name} finalizers`);
    assert.equal(va.metadata.annotations?.[NODE_ID_ANNOTATION], ctx.nodeId, `${name} node ID`);
    assert.deepEqual(va.status?.attachmentMetadata, { device: "/dev/mock", readonly: "false" });
  }
  const published = await kit.publishedVolumes(ctx.nodeId);
  for (const v of volumes) assert.ok(published.has(v.volumeId), `volume ${v.volumeId} published`);
  const accepted = republishesByVolume(
    await ctx.checkRepublishes(
      [],
      "repeated ControllerPublishVolume calls (one per VolumeAttachment expected)",
    ),
  );
  const publishes = countByVolume(await ctx.cluster.driverCalls(), PUBLISH);
  const wrong = volumes.filter((v) =>
    publishes.get(v.volumeId) !== 1 + (accepted.get(v.volumeId) ?? 0)
  )
    .map((v) => `${v.volumeId}: ${publishes.get(v.volumeId) ?? 0}`);
  assert.deepEqual(wrong, [], "ControllerPublishVolume calls per volume other than 1");

  const t1 = performance.now();
  await kit.deleteVas(names, 180_000);
  const detachSeconds = (performance.now() - t1) / 1000;
  const after = await kit.publishedVolumes(ctx.nodeId);
  for (const v of volumes) assert.ok(!after.has(v.volumeId), `volume ${v.volumeId} unpublished`);
  const unpublishes = countByVolume(await ctx.cluster.driverCalls(), UNPUBLISH);
  const wrongDetach = volumes.filter((v) => unpublishes.get(v.volumeId) !== 1)
    .map((v) => `${v.volumeId}: ${unpublishes.get(v.volumeId) ?? 0}`);
  assert.deepEqual(wrongDetach, [], "ControllerUnpublishVolume calls per volume other than 1");
  return { attachSeconds, detachSeconds };
}
