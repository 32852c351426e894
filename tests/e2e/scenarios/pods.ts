/**
 * Scenarios 10 to 15: Pods drive the attacher through kube-controller-manager's attach/detach
 * controller, as in a cluster. The scenarios create PVs, PVCs and Pods bound to nodes (no
 * scheduler, no kubelet); the controller makes and deletes the VolumeAttachments and records the
 * attached volumes in each Node's `status.volumesAttached`. Each scenario checks both views: the
 * VolumeAttachments' status and the Nodes' lists, and the driver's publications and call counts.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, type DriverCall, PUBLISH, UNPUBLISH } from "../driver_log.ts";
import {
  controllerVaName,
  NODE_ID_ANNOTATION,
  POD_NAMESPACE,
  sleep,
  uniqueVolumeName,
  waitForLog,
  waitUntil,
} from "../kit.ts";
import { csiNode, node as nodeObject, PATHS } from "../objects.ts";
import { republishesByVolume } from "../publish_analysis.ts";
import { READY_LINE } from "./round_trip.ts";

/** Every VolumeAttachment of these scenarios is made by the controller: `csi-<sha256>`. */
const CONTROLLER_VA_PREFIX = "csi-";

/** A driver volume with its PV and a PVC bound to it. */
interface ClaimedVolume {
  pv: string;
  volumeId: string;
  claim: string;
}

async function claimedVolume(ctx: ScenarioContext, name: string): Promise<ClaimedVolume> {
  const { pv, volumeId } = await ctx.kit.makeVolume(name);
  const claim = await ctx.kit.createClaim(name, pv);
  return { pv, volumeId, claim };
}

/** The driver's successful publish and unpublish calls of one volume, oldest first. */
function callsOf(calls: readonly DriverCall[], volumeId: string): string[] {
  return calls.filter((c) =>
    (c.method === PUBLISH || c.method === UNPUBLISH) && c.error === "" &&
    c.request.volume_id === volumeId
  ).map((c) => c.method === PUBLISH ? "publish" : "unpublish");
}

/**
 * Checks the attached VolumeAttachment the controller made for `v` on `node`: its name, our
 * finalizer and node-id annotation, the driver's metadata, the driver's publication, and the
 * Node's `status.volumesAttached`.
 */
async function checkAttached(
  ctx: ScenarioContext,
  v: ClaimedVolume,
  node: string,
): Promise<void> {
  const { kit } = ctx;
  const va = await kit.waitVaAttached(v.pv, node);
  assert.equal(va.metadata.name, await controllerVaName(v.volumeId, kit.driverName, node));
  assert.equal(va.spec.attacher, kit.driverName);
  assert.deepEqual(va.metadata.finalizers, [kit.finalizer]);
  assert.equal(va.metadata.annotations?.[NODE_ID_ANNOTATION], ctx.nodeId);
  assert.deepEqual(va.status?.attachmentMetadata, { device: "/dev/mock", readonly: "false" });
  assert.ok(await kit.publishedOnDriver(v.volumeId, ctx.nodeId), `${v.volumeId} published`);
}

/**
 * Each volume was published once, apart from the repeated publishes the run's checks accept (a
 * hand-over between attachers).
 */
async function checkOnePublishEach(ctx: ScenarioContext, volumes: ClaimedVolume[]): Promise<void> {
  const accepted = republishesByVolume(
    await ctx.checkRepublishes([], "repeated publishes", CONTROLLER_VA_PREFIX),
  );
  const publishes = countByVolume(await ctx.cluster.driverCalls(), PUBLISH);
  assert.deepEqual(
    volumes.filter((v) => publishes.get(v.volumeId) !== 1 + (accepted.get(v.volumeId) ?? 0))
      .map((v) => `${v.volumeId}: ${publishes.get(v.volumeId) ?? 0}`),
    [],
    "ControllerPublishVolume calls per volume other than 1",
  );
}

/**
 * Scenario 10: a Pod with a PVC on a node gets its volume attached (the controller's VA, our
 * finalizer, one ControllerPublishVolume, the Node's `status.volumesAttached`, the Pod's
 * `SuccessfulAttachVolume` event); deleting the Pod as `kubectl delete pod` does (the Pod stays
 * Terminating, no kubelet confirms) detaches it: one ControllerUnpublishVolume, the VA gone, the
 * Node's list empty.
 */
export async function podAttachDetach(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const node = ctx.nodes[0]!;
  const v = await claimedVolume(ctx, "vol");
  const podName = await kit.createPod("pod", node, [v.claim]);

  await checkAttached(ctx, v, node);
  await kit.waitVolumesAttached(node, [uniqueVolumeName(kit.driverName, v.volumeId)]);
  const event = await kit.waitEvent(podName, "SuccessfulAttachVolume", /succeeded/);
  assert.equal(event.type, "Normal");
  assert.equal((await kit.podObject(podName))?.status?.phase, "Pending", "no kubelet runs");

  await kit.deletePod(podName, false);
  await kit.waitVaGone(v.pv, node);
  await kit.waitVolumesAttached(node, []);
  const terminating = await kit.podObject(podName);
  assert.ok(terminating?.metadata.deletionTimestamp, "the Pod is still there, terminating");
  assert.equal(await kit.publishedOnDriver(v.volumeId, ctx.nodeId), false, "unpublished");
  const accepted = await ctx.checkRepublishes([], "repeated publishes", CONTROLLER_VA_PREFIX);
  assert.deepEqual(
    callsOf(await ctx.cluster.driverCalls(), v.volumeId),
    [...Array(1 + accepted.length).fill("publish"), "unpublish"],
  );
}

/**
 * Scenario 11: a Pod moves to another node. While the first Pod's VolumeAttachment exists the
 * controller refuses the second node (a `Multi-Attach error` event, `Waiting for detach` from
 * Kubernetes 1.37 on, see {@link multiAttachEvent}; no second VA); once the first
 * Pod is gone it detaches from the old node and then attaches to the new one: publish, unpublish,
 * publish, in that order, and each Node lists the volume only while it is attached there.
 */
/**
 * The attach/detach controller's event text for a volume attached elsewhere (kubernetes
 * pkg/controller/volume/attachdetach/reconciler/reconciler.go, `reportMultiAttachError`): up to
 * v1.36 `Multi-Attach error for volume "<pv>" Volume is already used by pod(s) <pod>`, from
 * v1.37 on `Waiting for detach for volume "<pv>" Volume is already used by pod(s) <pod>`.
 */
export function multiAttachEvent(ctx: { kubernetes: { minor: string } }): RegExp {
  const minor = Number(ctx.kubernetes.minor.split(".")[1]);
  return minor >= 37
    ? /^Waiting for detach for volume "[^"]+" Volume is already used by pod\(s\) /
    : /^Multi-Attach error for volume "[^"]+" Volume is already used by pod\(s\) /;
}

export async function podMovesNode(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const [from, to] = [ctx.nodes[1]!, ctx.nodes[2]!];
  const v = await claimedVolume(ctx, "vol");
  const unique = uniqueVolumeName(kit.driverName, v.volumeId);
  const first = await kit.createPod("first", from, [v.claim]);
  await checkAttached(ctx, v, from);
  await kit.waitVolumesAttached(from, [unique]);

  const second = await kit.createPod("second", to, [v.claim]);
  const refused = await kit.waitEvent(second, "FailedAttachVolume", multiAttachEvent(ctx));
  assert.equal(refused.type, "Warning");
  assert.deepEqual((await kit.vasOf(v.pv)).map((va) => va.spec.nodeName), [from]);
  assert.deepEqual(await kit.volumesAttached(to), []);

  await kit.deletePod(first);
  await kit.waitVaGone(v.pv, from);
  await checkAttached(ctx, v, to);
  await kit.waitVolumesAttached(to, [unique]);
  await kit.waitVolumesAttached(from, []);
  await ctx.checkRepublishes([], "repeated publishes", CONTROLLER_VA_PREFIX);
  assert.deepEqual(
    callsOf(await ctx.cluster.driverCalls(), v.volumeId),
    ["publish", "unpublish", "publish"],
    "detach from the old node before the attach to the new one, each once",
  );
}

/**
 * Scenario 12: `pods` Pods over every node at once, each with its own volume: each volume is
 * published exactly once, every Node lists exactly its Pods' volumes; then every Pod is deleted
 * and each volume is unpublished exactly once.
 */
export async function manyPods(ctx: ScenarioContext, pods = 20): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const volumes: ClaimedVolume[] = [];
  for (let i = 0; i < pods; i++) volumes.push(await claimedVolume(ctx, `vol${i}`));
  const nodeOf = (i: number) => ctx.nodes[i % ctx.nodes.length]!;
  const podNames = await Promise.all(
    volumes.map((v, i) => kit.createPod(`pod${i}`, nodeOf(i), [v.claim])),
  );
  for (const [i, v] of volumes.entries()) await kit.waitVaAttached(v.pv, nodeOf(i), 120_000);
  for (const node of ctx.nodes) {
    const expected = volumes.filter((_, i) => nodeOf(i) === node).map((v) =>
      uniqueVolumeName(kit.driverName, v.volumeId)
    );
    await kit.waitVolumesAttached(node, expected);
  }
  const published = await kit.publishedVolumes(ctx.nodeId);
  for (const v of volumes) assert.ok(published.has(v.volumeId), `${v.volumeId} published`);
  await checkOnePublishEach(ctx, volumes);

  await Promise.all(podNames.map((p) => kit.deletePod(p)));
  for (const [i, v] of volumes.entries()) await kit.waitVaGone(v.pv, nodeOf(i), 120_000);
  for (const node of ctx.nodes) await kit.waitVolumesAttached(node, []);
  const unpublishes = countByVolume(await ctx.cluster.driverCalls(), UNPUBLISH);
  assert.deepEqual(
    volumes.filter((v) => unpublishes.get(v.volumeId) !== 1)
      .map((v) => `${v.volumeId}: ${unpublishes.get(v.volumeId) ?? 0}`),
    [],
    "ControllerUnpublishVolume calls per volume other than 1",
  );
}

/**
 * Scenario 13: a Node is deleted with its Pod. The garbage collector deletes its CSINode (owned
 * by the Node); the controller detaches the volume from the vanished node; the attacher finds no
 * CSINode and unpublishes with the node ID kept in the VA's annotation.
 */
export async function nodeDeleted(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const node = `${kit.prefix}-node`;
  await ctx.cluster.addNode(node);
  kit.track(`${PATHS.csiNodes}/${node}`);
  kit.track(`${PATHS.nodes}/${node}`);
  const v = await claimedVolume(ctx, "vol");
  const podName = await kit.createPod("pod", node, [v.claim]);
  await checkAttached(ctx, v, node);
  await kit.waitVolumesAttached(node, [uniqueVolumeName(kit.driverName, v.volumeId)]);

  await kit.api.deleteOk(`${PATHS.nodes}/${node}`, false);
  await kit.waitGone(`${PATHS.csiNodes}/${node}`, 60_000);
  const since = Date.now();
  await kit.deletePod(podName);
  await kit.waitVaGone(v.pv, node);
  const unpublishes = (await ctx.cluster.driverCalls()).filter((c) =>
    c.method === UNPUBLISH && c.request.volume_id === v.volumeId && c.error === ""
  );
  assert.equal(unpublishes.length, 1, "one ControllerUnpublishVolume");
  assert.equal(unpublishes[0]!.request.node_id, ctx.nodeId, "node ID from the annotation");
  assert.ok(unpublishes[0]!.time >= since - 1000, "after the Pod was deleted");
  assert.equal(await kit.publishedOnDriver(v.volumeId, ctx.nodeId), false, "unpublished");
}

/**
 * Scenario 14: the attacher is restarted (SIGTERM, then a new process) while Pods keep coming and
 * the controller keeps creating VolumeAttachments: every volume ends attached, each published
 * exactly once, none left behind.
 */
export async function attacherRestartUnderLoad(ctx: ScenarioContext, pods = 12): Promise<void> {
  const { kit } = ctx;
  const first = ctx.startAttacher("a");
  await waitForLog(first, READY_LINE);
  const volumes: ClaimedVolume[] = [];
  for (let i = 0; i < pods; i++) volumes.push(await claimedVolume(ctx, `vol${i}`));
  const nodeOf = (i: number) => ctx.nodes[i % ctx.nodes.length]!;

  let second: ReturnType<ScenarioContext["startAttacher"]> | undefined;
  for (const [i, v] of volumes.entries()) {
    await kit.createPod(`pod${i}`, nodeOf(i), [v.claim]);
    if (i === Math.floor(pods / 3)) {
      first.kill("SIGTERM");
      assert.equal((await first.status).code, 0, `exit after SIGTERM:\n${await first.tail()}`);
    }
    if (i === Math.floor((2 * pods) / 3)) second = ctx.startAttacher("b");
    await sleep(300);
  }
  assert.ok(second !== undefined);
  for (const [i, v] of volumes.entries()) await kit.waitVaAttached(v.pv, nodeOf(i), 120_000);
  for (const [i, v] of volumes.entries()) await checkAttached(ctx, v, nodeOf(i));
  await checkOnePublishEach(ctx, volumes);
  // Only the VAs of this scenario's Pods exist for its PVs: nothing attached twice.
  for (const [i, v] of volumes.entries()) {
    assert.deepEqual((await kit.vasOf(v.pv)).map((va) => va.spec.nodeName), [nodeOf(i)]);
  }
}

/**
 * Scenario 15: what the attacher must never be asked about, and a node that registers late.
 * A Pod whose PVC does not exist and one whose PVC cannot bind get no VolumeAttachment (the binder
 * reports the unbindable PVC with a `FailedBinding` event); a Pod whose PV belongs to another
 * driver gets a VA for that driver, which our attacher leaves alone (no finalizer, no status, no
 * driver call). A Pod on a Node without a CSINode gets an `attachError` and attaches once the
 * CSINode appears.
 */
export async function podBadInput(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  const node = ctx.nodes[3]!;
  const callsBefore = (await ctx.cluster.driverCalls()).length;

  await kit.createPod("missing-claim", node, [`${kit.prefix}-no-such-claim`]);
  // No PV is this big: the claim stays Pending.
  const unbindable = await kit.createClaim("unbindable", undefined, "1000Gi");
  await kit.createPod("unbound-claim", node, [unbindable]);
  const otherDriver = "other.csi.example.com";
  await kit.createPv(`${kit.prefix}-other`, "other-volume-1", { driver: otherDriver });
  const otherClaim = await kit.createClaim("other", `${kit.prefix}-other`);
  await kit.createPod("other-driver", node, [otherClaim]);

  const otherVa = await waitUntil("the other driver's VolumeAttachment", async () => {
    return (await kit.vasOf(`${kit.prefix}-other`))[0];
  });
  assert.equal(otherVa.spec.attacher, otherDriver);
  // Time for our attacher to (wrongly) react, and for the controller to (wrongly) make more VAs.
  await sleep(5000);
  const untouched = (await kit.vasOf(`${kit.prefix}-other`))[0];
  assert.deepEqual(untouched?.metadata.finalizers ?? [], [], "no finalizer on another's VA");
  assert.equal(untouched?.status?.attached ?? false, false);
  assert.equal(untouched?.status?.attachError ?? undefined, undefined, "no status written");
  const list = await kit.api.getOk<{ items: { spec: { nodeName: string } }[] }>(
    PATHS.volumeAttachments,
  );
  assert.deepEqual(
    list.items.filter((va) => va.spec.nodeName === node).length,
    1,
    "only the other driver's VA on the node",
  );
  await kit.waitEvent(unbindable, "FailedBinding", /no persistent volumes available/);
  const pvc = await kit.api.getOk<{ status?: { phase?: string } }>(
    `${PATHS.persistentVolumeClaims(POD_NAMESPACE)}/${unbindable}`,
  );
  assert.equal(pvc.status?.phase, "Pending");
  assert.equal(
    (await ctx.cluster.driverCalls()).slice(callsBefore).filter((c) =>
      c.method === PUBLISH || c.method === UNPUBLISH
    ).length,
    0,
    "the driver was never asked",
  );
  await kit.deletePod(`${kit.prefix}-other-driver`);

  // A Node whose CSINode is not there yet (the kubelet registers the driver later).
  const late = `${kit.prefix}-late-node`;
  const created = await kit.api.createOk<{ metadata: { uid: string } }>(
    PATHS.nodes,
    nodeObject(late),
  );
  kit.track(`${PATHS.csiNodes}/${late}`);
  kit.track(`${PATHS.nodes}/${late}`);
  const v = await claimedVolume(ctx, "late");
  await kit.createPod("late", late, [v.claim]);
  const message = await waitUntil(`attachError on the VA of ${v.pv}`, async () => {
    return (await kit.vasOf(v.pv))[0]?.status?.attachError?.message;
  });
  assert.match(message, new RegExp(`${late}`));
  assert.equal(
    countByVolume(await ctx.cluster.driverCalls(), PUBLISH).get(v.volumeId),
    undefined,
    "not published without a node ID",
  );
  await kit.api.createOk(
    PATHS.csiNodes,
    csiNode(late, kit.driverName, ctx.nodeId, created.metadata.uid),
  );
  await checkAttached(ctx, v, late);
  await kit.waitVolumesAttached(late, [uniqueVolumeName(kit.driverName, v.volumeId)]);
}
