/**
 * Scenario 5: the CSI driver restarts. The attacher exits with status 1 when it loses the
 * connection (as csi-lib-utils' ExitOnConnectionLoss does); started again, it completes the work
 * that piled up meanwhile.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, PUBLISH } from "../driver_log.ts";
import { waitForLog } from "../kit.ts";
import { republishesByVolume } from "../publish_analysis.ts";
import { PATHS } from "../objects.ts";
import { READY_LINE } from "./round_trip.ts";

/** Driver restart with pending attaches and detaches. */
export async function driverRestart(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const first = ctx.startAttacher("a");
  await waitForLog(first, READY_LINE);
  const volumes: { pv: string; volumeId: string }[] = [];
  for (let i = 0; i < 10; i++) volumes.push(await kit.makeVolume(`vol${i}`));
  const early = await Promise.all(
    volumes.slice(0, 5).map((v, i) =>
      kit.createVa(`va${i}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)
    ),
  );
  await kit.waitAllAttached(early);

  await ctx.cluster.stopDriver();
  const status = await first.status;
  const log = await first.output();
  assert.equal(status.code, 1, `exit status on connection loss:\n${await first.tail()}`);
  assert.match(log, /Lost connection to CSI driver, exiting/);

  // Work piles up while neither the driver nor the attacher runs.
  const late = await Promise.all(
    volumes.slice(5).map((v, i) =>
      kit.createVa(`va${i + 5}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)
    ),
  );
  const detached = early.slice(0, 2);
  for (const name of detached) await kit.api.deleteOk(`${PATHS.volumeAttachments}/${name}`);

  await ctx.cluster.startDriver();
  const restarted = await ctx.cluster.driver().listVolumes();
  for (const v of volumes) {
    assert.ok(restarted.some((r) => r.volumeId === v.volumeId), `driver kept volume ${v.volumeId}`);
  }
  ctx.startAttacher("b");
  await kit.waitAllAttached([...early.slice(2), ...late]);
  for (const name of detached) await kit.waitGone(`${PATHS.volumeAttachments}/${name}`);

  const published = await kit.publishedVolumes(ctx.nodeId);
  const expected = volumes.filter((_, i) => i >= 2).map((v) => v.volumeId);
  assert.deepEqual(
    [...published].filter((id) => volumes.some((v) => v.volumeId === id)).sort(),
    expected.sort(),
  );
  const accepted = republishesByVolume(
    await ctx.checkRepublishes([], "repeated ControllerPublishVolume calls"),
  );
  const publishes = countByVolume(await ctx.cluster.driverCalls(), PUBLISH);
  const wrong = volumes.filter((v) =>
    publishes.get(v.volumeId) !== 1 + (accepted.get(v.volumeId) ?? 0)
  )
    .map((v) => `${v.volumeId}: ${publishes.get(v.volumeId) ?? 0}`);
  assert.deepEqual(wrong, [], "ControllerPublishVolume calls per volume other than 1");
}
