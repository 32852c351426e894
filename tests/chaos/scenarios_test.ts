/**
 * Named, scripted chaos scenarios: the races the random sweep explores, pinned down step by step.
 * Some prove that the design covers a dangerous case ("maybe attached", a replica killed while
 * the driver still works); the ones named "inherent:" document a window the Go attacher has too,
 * exactly as the sweep observes it.
 */

import assert from "node:assert/strict";
import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { finalizerName } from "../../lib/controller/names.ts";
import type { CsiNode, VolumeAttachment } from "../../lib/kube/types.ts";
import { DRIVER_NAME, Simulation } from "./simulation.ts";
import type { Sabotage } from "./sabotage.ts";

const FINALIZER = finalizerName(DRIVER_NAME);

/** A quiet world: one node with the driver, one PV, no random faults, no latency. */
function quietWorld(
  opts: { serializeVolumeOps?: boolean; nodes?: string[]; sabotage?: Sabotage } = {},
) {
  const sim = new Simulation({
    ...(opts.sabotage ? { sabotage: opts.sabotage } : {}),
    seed: 7,
    randomWorld: false,
    faults: false,
    userActions: false,
    latency: 0,
    workers: 1,
    ...(opts.serializeVolumeOps === undefined
      ? {}
      : { serializeVolumeOps: opts.serializeVolumeOps }),
  });
  for (const node of opts.nodes ?? ["node-1"]) sim.createCsiNode(node);
  const pv = sim.createPersistentVolume({ secret: "present" });
  return { sim, pv, volumeId: "vol-1" };
}

function getVA(sim: Simulation, name: string): VolumeAttachment | undefined {
  return sim.server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, name);
}

Deno.test("maybe attached: publish times out after the driver attached, VA deleted -> unpublished before the finalizer goes", async () => {
  const { sim, pv, volumeId } = quietWorld();
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.csi.inject({ method: "ControllerPublishVolume", fault: { kind: "deadlineAfterApply" } });
  sim.startInstance();
  assert.ok(await sim.drive(() => sim.driver.isPublished(volumeId, "node-1-id")));
  await sim.settle();
  const maybe = getVA(sim, va)!;
  assert.equal(maybe.status?.attached ?? false, false, "the attacher heard DeadlineExceeded");
  assert.deepEqual(maybe.metadata.finalizers, [FINALIZER], "the finalizer covers the publish");

  sim.deleteVolumeAttachment(va);
  assert.ok(await sim.runUntilQuiet(), sim.unconverged().join("; "));
  assert.equal(getVA(sim, va), undefined);
  assert.deepEqual(sim.driver.publications(), []);
  assert.deepEqual(sim.violations, []);
});

Deno.test("maybe detached: unpublish times out after the driver detached -> retried, then the finalizer goes", async () => {
  const { sim, pv } = quietWorld();
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.startInstance();
  assert.ok(await sim.runUntilQuiet());
  assert.equal(getVA(sim, va)?.status?.attached, true);

  sim.csi.inject({ method: "ControllerUnpublishVolume", fault: { kind: "deadlineAfterApply" } });
  sim.deleteVolumeAttachment(va);
  assert.ok(await sim.drive(() => sim.driver.publications().length === 0));
  assert.deepEqual(
    getVA(sim, va)?.metadata.finalizers,
    [FINALIZER],
    "kept until an unpublish succeeds",
  );
  assert.ok(await sim.runUntilQuiet());
  assert.equal(getVA(sim, va), undefined);
  assert.deepEqual(sim.violations, []);
});

Deno.test("attacher killed while the driver still publishes -> the next replica's unpublish waits (ABORTED) for it", async () => {
  const { sim, pv, volumeId } = quietWorld();
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.csi.inject({ method: "ControllerPublishVolume", fault: { kind: "hung" } });
  sim.startInstance();
  assert.ok(await sim.drive(() => sim.csi.pending().length === 1, { completeCsi: false }));
  sim.killInstance();
  sim.deleteVolumeAttachment(va);
  sim.startInstance();
  const aborted = () => (sim.journal.counts()["csi.abortedConcurrent"] ?? 0) > 0;
  assert.ok(await sim.drive(aborted, { completeCsi: false }));
  assert.deepEqual(getVA(sim, va)?.metadata.finalizers, [FINALIZER]);

  // The old publish lands now; the retried unpublish then removes it.
  assert.ok(await sim.runUntilQuiet(), sim.unconverged().join("; "));
  assert.equal(getVA(sim, va), undefined);
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), false);
  assert.deepEqual(sim.violations, []);
});

/**
 * The driver keeps working on a publish after the attacher's deadline; the VA is deleted
 * meanwhile. The attacher's unpublish (the Go attacher's too) is the only thing that stands
 * between the late publish and a leaked attachment, so it relies on the driver to reject (ABORTED)
 * an operation on a volume that is busy, as the CSI spec asks of drivers facing a CO that lost
 * track of its calls.
 */
async function latePublishAfterDetach(serializeVolumeOps: boolean) {
  const { sim, pv, volumeId } = quietWorld({ serializeVolumeOps });
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.csi.inject({ method: "ControllerPublishVolume", fault: { kind: "hung" } });
  sim.startInstance();
  assert.ok(await sim.drive(() => sim.csi.pending().length === 1, { completeCsi: false }));
  assert.ok(await sim.drive(() => sim.csi.pending()[0]!.abandoned, { completeCsi: false }));
  sim.deleteVolumeAttachment(va);
  await sim.drive(() => getVA(sim, va) === undefined, { completeCsi: false, maxSteps: 200 });
  sim.csi.complete(sim.csi.pending()[0]!);
  await sim.settle();
  sim.check();
  return { sim, va, volumeId };
}

Deno.test("inherent: without ABORTED for a busy volume, a publish finishing after the detach leaks the volume", async () => {
  const { sim, va, volumeId } = await latePublishAfterDetach(false);
  assert.equal(getVA(sim, va), undefined, "the detach completed while the publish ran");
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), true);
  assert.deepEqual(sim.violations.map((v) => v.invariant), [1]);
});

Deno.test("a driver that answers ABORTED for a busy volume closes that window", async () => {
  const { sim, va, volumeId } = await latePublishAfterDetach(true);
  assert.deepEqual(
    getVA(sim, va)?.metadata.finalizers,
    [FINALIZER],
    "detach waits for the publish",
  );
  assert.ok(await sim.runUntilQuiet());
  assert.equal(getVA(sim, va), undefined);
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), false);
  assert.deepEqual(sim.violations, []);
});

Deno.test("inherent: PV finalizer removed while a VA the attacher has not seen names the PV -> that VA never attaches", async () => {
  const { sim, pv } = quietWorld({ nodes: ["node-1", "node-2"] });
  const va1 = sim.createVolumeAttachment(pv, "node-1");
  const inst = sim.startInstance();
  assert.ok(await sim.runUntilQuiet());
  assert.equal(getVA(sim, va1)?.status?.attached, true);

  sim.deletePersistentVolume(pv);
  sim.deleteVolumeAttachment(va1);
  // Detach va1 until its DELETED event has put the PV into the PV queue.
  assert.ok(
    await sim.drive(
      () =>
        getVA(sim, va1) === undefined && inst.pvQueue.len() > 0 && !sim.canWorkVolumeAttachment() &&
        !sim.api.watches().some((w) => w.deliverable),
      { skip: ["workPV"] },
    ),
  );
  const va2 = sim.createVolumeAttachment(pv, "node-2"); // its ADDED event is not delivered yet
  assert.ok(await sim.perform("workPV"));
  assert.equal(sim.server.find(PERSISTENT_VOLUMES, pv), undefined, "the PV is gone");
  assert.equal(
    sim.journal.counts()["inherent.pvFinalizerRemovedWhileUnseenVolumeAttachmentNamesPV"],
    1,
  );

  assert.ok(await sim.runUntilQuiet(), sim.unconverged().join("; "));
  assert.equal(getVA(sim, va2)?.status?.attached ?? false, false);
  assert.equal(getVA(sim, va2)?.metadata.finalizers, undefined);
  assert.deepEqual(sim.driver.publications(), []);
  assert.deepEqual(sim.violations, []);
});

Deno.test("a status patch from a stale cached VA clears an attachError the cache has not shown", async () => {
  const { sim, pv } = quietWorld();
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.csi.inject({ method: "ControllerPublishVolume", fault: { kind: "error", code: 13 } });
  const inst = sim.startInstance();
  assert.ok(await sim.drive(() => getVA(sim, va)?.status?.attachError !== undefined));
  // The informer sees the finalizer write but not yet the error write.
  const watch = sim.api.watches().find((w) =>
    w.client === inst.name && w.resource === "volumeattachments"
  )!;
  assert.equal(watch.queue.length, 2);
  sim.api.deliver(watch);
  await sim.settle();
  for (const other of sim.api.watches().filter((w) => w !== watch)) {
    while (other.deliverable) {
      sim.api.deliver(other);
      await sim.settle();
    }
  }
  assert.ok(
    await sim.drive(() => getVA(sim, va)?.status?.attached === true, { skip: ["deliver"] }),
  );
  assert.ok(await sim.runUntilQuiet());
  const status = getVA(sim, va)?.status;
  assert.equal(status?.attached, true);
  // The attached patch clears the error whatever the cache showed (the Go attacher's, computed
  // from the cache alone, left it).
  assert.equal(status?.attachError, undefined);
  assert.equal(
    sim.journal.counts()["inherent.attachedVolumeAttachmentKeepsAttachError"],
    undefined,
  );
  assert.deepEqual(sim.violations, []);
});

Deno.test("inherent: node re-registered with a new node ID -> detach unpublishes from the new ID and the old publication stays", async () => {
  const { sim, pv, volumeId } = quietWorld();
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.startInstance();
  assert.ok(await sim.runUntilQuiet());
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), true);

  // The node is replaced under the same name; its CSINode now carries another node ID.
  const csiNode = sim.server.get<CsiNode>(CSI_NODES, "node-1");
  csiNode.spec.drivers = (csiNode.spec.drivers ?? []).map((d) =>
    d.name === DRIVER_NAME ? { ...d, nodeID: "node-1-id-replaced" } : d
  );
  sim.server.update(CSI_NODES, csiNode);
  sim.deleteVolumeAttachment(va);
  await sim.drive(() => sim.violations.length > 0 || getVA(sim, va) === undefined);
  // As in the Go attacher, detach prefers the CSINode's node ID over the VA's annotation.
  assert.deepEqual(sim.violations.map((v) => v.invariant), [2]);
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), true);
});

/**
 * Holds the next VA patch of the given kind in the API server (it is handled only when the test
 * says so), lets the attacher give up on it, and drives until `until` holds without answering it.
 */
async function holdPatch(
  sim: Simulation,
  subresource: "" | "status",
  until: () => boolean,
): Promise<void> {
  sim.api.inject({
    verb: "patch",
    resource: "volumeattachments",
    subresource,
    fault: { kind: "slow", applyOnSend: false },
  });
  assert.ok(await sim.drive(() => sim.api.pending().length === 1, { skip: ["respondApi"] }));
  assert.ok(
    await sim.drive(() => sim.api.pending()[0]?.abandoned === true, { skip: ["respondApi"] }),
    "the attacher gives up on the request (client timeout)",
  );
  assert.ok(await sim.drive(until, { skip: ["respondApi"] }));
  assert.equal(sim.api.pending().length, 1, "the request still waits in the server");
}

Deno.test("a status patch handled after its VA was deleted and created again is refused (uid precondition); the new VA attaches normally", async () => {
  const { sim, pv, volumeId } = quietWorld();
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.startInstance();
  await holdPatch(sim, "status", () => getVA(sim, va)?.metadata.finalizers !== undefined);
  sim.deleteVolumeAttachment(va);
  assert.ok(await sim.drive(() => getVA(sim, va) === undefined, { skip: ["respondApi"] }));
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), false);

  sim.createVolumeAttachment(pv, "node-1");
  sim.api.respond(sim.api.pending()[0]!); // the old "attached: true" reaches the new VA...
  await sim.settle();
  // ...and names the old VA's uid: the API server refuses it (the Go attacher's lands).
  assert.deepEqual(sim.inherentWindows, []);
  assert.equal(getVA(sim, va)?.status?.attached ?? false, false);

  assert.ok(await sim.runUntilQuiet(), sim.unconverged().join("; "));
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), true);
  assert.equal(getVA(sim, va)?.status?.attached, true);
  assert.deepEqual(sim.violations, []);
});

Deno.test("a finalizer removal handled after its VA was deleted and created again is refused (uid precondition); the new VA keeps its finalizer and detaches normally", async () => {
  const { sim, pv, volumeId } = quietWorld();
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.startInstance();
  assert.ok(await sim.runUntilQuiet());
  sim.deleteVolumeAttachment(va);
  await holdPatch(sim, "", () => getVA(sim, va) === undefined);

  sim.createVolumeAttachment(pv, "node-1");
  assert.ok(
    await sim.drive(() => getVA(sim, va)?.status?.attached === true, { skip: ["respondApi"] }),
  );
  assert.deepEqual(getVA(sim, va)?.metadata.finalizers, [FINALIZER]);
  sim.api.respond(sim.api.pending()[0]!); // the old `finalizers: null` reaches the new VA
  await sim.settle();
  // The patch names the old VA's uid, so the API server refuses it.
  assert.deepEqual(getVA(sim, va)?.metadata.finalizers, [FINALIZER]);
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), true);

  sim.deleteVolumeAttachment(va);
  assert.ok(await sim.runUntilQuiet(), sim.unconverged().join("; "));
  assert.equal(getVA(sim, va), undefined);
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), false, "detached before it went");
  assert.deepEqual(sim.violations, []);
});

/**
 * The leader stores the VA's finalizer and is paused before its answer arrives (so before its
 * ControllerPublishVolume); meanwhile the VA is deleted and the standby, leading after a lease,
 * detaches it and lets it go. Then the paused replica resumes and gets the answer.
 */
async function pausedBeforePublish(sabotage?: Sabotage) {
  const { sim, pv, volumeId } = quietWorld(sabotage ? { sabotage } : {});
  const va = sim.createVolumeAttachment(pv, "node-1");
  sim.api.inject({
    verb: "patch",
    resource: "volumeattachments",
    subresource: "",
    fault: { kind: "slow", applyOnSend: true },
  });
  const a = sim.startInstance();
  assert.ok(await sim.drive(() => sim.api.pending().length === 1, { skip: ["respondApi"] }));
  assert.deepEqual(getVA(sim, va)?.metadata.finalizers, [FINALIZER], "the finalizer is stored");
  sim.pauseInstance(40_000);
  sim.deleteVolumeAttachment(va);
  // Time passes for the world (the paused replica's timers are held) until a lease has passed.
  for (let i = 0; i < 50 && !await sim.perform("start"); i++) await sim.perform("clock");
  assert.notEqual(sim.instance, a, "the standby leads");
  assert.ok(await sim.drive(() => getVA(sim, va) === undefined), "the standby let the VA go");
  for (let i = 0; i < 50 && !await sim.perform("resume"); i++) await sim.perform("clock");
  assert.equal(sim.pausedInstance, a, "resumed, not yet out");
  sim.api.respond(sim.api.pending().find((p) => p.client === a.name)!);
  await sim.settle();
  sim.check();
  return { sim, a, volumeId };
}

Deno.test("pause: a leader resumed after its lease could have passed does not publish (its fence)", async () => {
  const { sim, a, volumeId } = await pausedBeforePublish();
  assert.equal(a.lapsed, true, "the fence found the lease lapsed at the answer");
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), false);
  assert.deepEqual(sim.csi.calls.filter((c) => c.client === a.name), []);
  assert.deepEqual(sim.violations, []);
  assert.ok(await sim.runUntilQuiet(), sim.unconverged().join("; "));
  assert.deepEqual(sim.violations, []);
});

Deno.test("pause: without the fence, the resumed leader publishes a volume nothing will detach (invariant 1)", async () => {
  const { sim, a, volumeId } = await pausedBeforePublish("noFence");
  assert.deepEqual(sim.csi.calls.filter((c) => c.client === a.name).map((c) => c.method), [
    "ControllerPublishVolume",
  ]);
  assert.equal(sim.driver.isPublished(volumeId, "node-1-id"), true);
  assert.deepEqual(sim.violations.map((v) => v.invariant), [1]);
});

Deno.test("pause: the standby's real elector takes the Lease only after the paused leader's fence closed", async () => {
  const { sim } = quietWorld();
  const a = sim.startInstance();
  assert.ok(await sim.drive(() => a.ready()), "the first replica leads");
  // Let it renew a few times on its elector's own timers.
  for (let i = 0; i < 5; i++) await sim.perform("clock");
  sim.pauseInstance(40_000);
  const pausedAt = sim.clock.now();
  assert.ok(await sim.perform("start"), "a standby may start at once");
  const b = sim.instance!;
  assert.notEqual(b, a);
  let fenceClosedAt: number | undefined;
  for (let i = 0; i < 200 && !b.leading; i++) {
    if (fenceClosedAt === undefined && !a.fenceOpenAt(sim.clock.now())) {
      fenceClosedAt = sim.clock.now();
    }
    await sim.perform("clock");
  }
  assert.ok(b.leading, "the standby's elector took the Lease over");
  const tookOverAt = sim.clock.now();
  assert.ok(fenceClosedAt !== undefined && fenceClosedAt < tookOverAt);
  assert.equal(a.fenceOpenAt(tookOverAt), false);
  // It saw the record unchanged for a whole lease of its own clock first.
  assert.ok(
    tookOverAt - pausedAt >= 15_000,
    `took over ${tookOverAt - pausedAt} ms after the pause`,
  );
  for (let i = 0; i < 50 && !await sim.perform("resume"); i++) await sim.perform("clock");
  assert.equal(sim.pausedInstance, a, "resumed past its lease: it runs until its term ends");
  await sim.perform("release");
  assert.equal(a.lapsed, true, "its late timers end the term");
  assert.ok(await sim.runUntilQuiet(), sim.unconverged().join("; "));
  assert.deepEqual(sim.violations, []);
});
