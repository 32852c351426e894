/**
 * Scenarios 1 and 2: an attach and detach round trip of a PV-backed VolumeAttachment, and a PV
 * deleted while attached.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, PUBLISH, UNPUBLISH } from "../driver_log.ts";
import { NODE_ID_ANNOTATION, sleep, waitForLog } from "../kit.ts";
import { PATHS } from "../objects.ts";

/** Log line of our attacher once its workers run. */
export const READY_LINE = /"Starting CSI attacher"/;

/**
 * Attach then detach one volume: finalizers, node-id annotation and the driver's
 * `publish_context` in `status.attachmentMetadata`; the driver's state follows; exactly one
 * ControllerPublishVolume and one ControllerUnpublishVolume; our PV finalizer stays on a live PV
 * and goes when the PV is deleted; the attacher exits 0 on SIGTERM.
 */
export async function attachDetachRoundTrip(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const started = performance.now();
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  console.log(`    attacher started in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const { pv, volumeId } = await kit.makeVolume("vol");
  const node = ctx.nodes[0]!;
  const name = await kit.createVa("va", node, pv);

  const attached = await kit.waitAttached(name);
  assert.deepEqual(attached.status?.attachmentMetadata, { device: "/dev/mock", readonly: "false" });
  assert.equal(attached.status?.attachError ?? undefined, undefined);
  assert.deepEqual(attached.metadata.finalizers, [kit.finalizer]);
  assert.equal(attached.metadata.annotations?.[NODE_ID_ANNOTATION], ctx.nodeId);
  assert.deepEqual((await kit.pv(pv))?.metadata.finalizers, [kit.finalizer]);
  assert.ok(await kit.publishedOnDriver(volumeId, ctx.nodeId), "published in the driver");

  await kit.deleteVas([name]);
  assert.equal(
    await kit.publishedOnDriver(volumeId, ctx.nodeId),
    false,
    "unpublished in the driver",
  );
  const calls = await ctx.cluster.driverCalls();
  const repeated = await ctx.checkRepublishes([], "repeated ControllerPublishVolume calls");
  assert.equal(
    countByVolume(calls, PUBLISH).get(volumeId),
    1 + repeated.length,
    "one ControllerPublishVolume",
  );
  assert.equal(countByVolume(calls, UNPUBLISH).get(volumeId), 1, "one ControllerUnpublishVolume");

  // A live PV keeps our finalizer after its VolumeAttachment is gone...
  await sleep(1000);
  const live = await kit.pv(pv);
  assert.deepEqual(live?.metadata.finalizers, [kit.finalizer]);
  // ...and loses it once it is being deleted and nothing references it.
  await kit.api.deleteOk(`${PATHS.persistentVolumes}/${pv}`);
  await kit.waitGone(`${PATHS.persistentVolumes}/${pv}`);

  attacher.kill("SIGTERM");
  const status = await attacher.status;
  assert.equal(status.code, 0, `exit status after SIGTERM:\n${await attacher.tail()}`);
}

/**
 * A PV deleted while attached keeps our finalizer (and so stays, with its deletionTimestamp)
 * until its VolumeAttachment is gone; then the API server removes it.
 */
export async function pvDeletedWhileAttached(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const { pv } = await kit.makeVolume("vol");
  const name = await kit.createVa("va", ctx.nodes[1]!, pv);
  await kit.waitAttached(name);

  await kit.api.deleteOk(`${PATHS.persistentVolumes}/${pv}`);
  // Give the attacher time to react to the PV update (it must not drop its finalizer).
  await sleep(3000);
  const deleting = await kit.pv(pv);
  assert.ok(deleting !== undefined, "the PV still exists");
  assert.ok(deleting.metadata.deletionTimestamp, "the PV is being deleted");
  assert.deepEqual(deleting.metadata.finalizers, [kit.finalizer]);
  const va = await kit.va(name);
  assert.equal(va?.status?.attached, true, "the VolumeAttachment stays attached");

  await kit.deleteVas([name]);
  await kit.waitGone(`${PATHS.persistentVolumes}/${pv}`, 30_000);
}
