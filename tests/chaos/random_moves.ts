/**
 * The random moves of a chaos schedule that are not the attacher's own work: what users do to
 * the cluster, and the faults that are not tied to one request.
 *
 * @module
 */

import type { CsiNode, PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { DRIVER_NAME, OTHER_ATTACHER, SECRET_NAMESPACE } from "./world_names.ts";
import type { Simulation } from "./simulation.ts";

/** The random world a schedule starts with: CSINodes, PVs (some with secrets), VAs. */
export function seedWorld(sim: Simulation): void {
  for (const node of sim.nodes) if (sim.prng.chance(0.6)) sim.createCsiNode(node);
  const pvCount = sim.prng.between(2, 4);
  for (let i = 0; i < pvCount; i++) randomPersistentVolume(sim);
  const vaCount = sim.prng.between(0, 2);
  for (let i = 0; i < vaCount; i++) {
    const model = sim.prng.pick(sim.pvModels());
    sim.createVolumeAttachment(model.name, model.homeNode ?? sim.prng.pick(sim.nodes));
  }
}

/** A PV with random access mode, secret and home node (a few are unknown to the driver). */
export function randomPersistentVolume(sim: Simulation): string {
  const rwo = sim.prng.chance(0.3);
  return sim.createPersistentVolume({
    mode: rwo ? "ReadWriteOnce" : "ReadWriteMany",
    homeNode: sim.prng.pick(sim.nodes),
    secret: sim.prng.weighted<"none" | "present" | "missing">([
      ["none", 6],
      ["present", 2],
      ["missing", 2],
    ]),
    ghost: sim.prng.chance(0.08),
  });
}

/** One random user action: create or delete VAs, PVs, CSINodes, secrets. */
export function randomUserAction(sim: Simulation): void {
  const vas = sim.mirror.list<VolumeAttachment>("volumeattachments");
  const liveVas = vas.filter((va) => !va.metadata.deletionTimestamp);
  const pvs = sortByName(sim.mirror.list<PersistentVolume>("persistentvolumes"));
  const livePvs = pvs.filter((pv) => !pv.metadata.deletionTimestamp);
  const csiNodes = new Set(
    sim.mirror.list<CsiNode>("csinodes")
      .filter((n) => (n.spec.drivers ?? []).some((d) => d.name === DRIVER_NAME))
      .map((n) => n.metadata.name),
  );
  const missingNodes = sim.nodes.filter((n) => !csiNodes.has(n));
  const wanted = [
    ...sim.pvModels().map((m) => m.secretName),
    ...vas.map((va) => va.spec.source?.inlineVolumeSpec?.csi?.controllerPublishSecretRef?.name),
  ];
  const missingSecrets = [...new Set(wanted)]
    .filter((name): name is string =>
      name !== undefined && !sim.mirror.find("secrets", name, SECRET_NAMESPACE)
    )
    .sort();
  const room = vas.length < 10;
  const action = sim.prng.weighted<string>([
    ["createVA", room && pvs.length > 0 ? 5 : 0],
    ["createVAMissingPV", room ? 0.5 : 0],
    ["createOtherVA", room && pvs.length > 0 ? 1 : 0],
    ["createInlineVA", room ? 0.8 : 0],
    ["deleteVA", liveVas.length > 0 ? 3 : 0],
    ["createPV", sim.pvModels().length < 12 ? 1 : 0],
    ["deletePV", livePvs.length > 0 ? 1 : 0],
    ["createCSINode", missingNodes.length > 0 ? 1.5 : 0],
    ["deleteCSINode", csiNodes.size > 0 ? 0.3 : 0],
    ["createSecret", missingSecrets.length > 0 ? 1.5 : 0],
  ]);
  switch (action) {
    case "createVA": {
      const pv = sim.prng.pick(pvs);
      const model = sim.pvModels().find((m) => m.name === pv.metadata.name);
      const node = model?.homeNode ?? sim.prng.pick(sim.nodes);
      sim.journal.count("user.createVolumeAttachment");
      sim.createVolumeAttachment(pv.metadata.name, node);
      break;
    }
    case "createInlineVA": {
      // A few inline volumes, each possibly used on several nodes; some need a secret.
      const k = sim.prng.int(3);
      const secretName = k === 2 ? "inline-secret" : undefined;
      sim.journal.count("user.createInlineVolumeAttachment");
      sim.createInlineVolumeAttachment(`vol-inline-${k}`, sim.prng.pick(sim.nodes), {
        ...(secretName ? { secretName } : {}),
      });
      break;
    }
    case "createVAMissingPV":
      sim.journal.count("user.createVolumeAttachmentForMissingPV");
      sim.createVolumeAttachment(`pv-missing-${sim.prng.int(3)}`, sim.prng.pick(sim.nodes));
      break;
    case "createOtherVA": {
      const pv = sim.prng.pick(pvs);
      sim.journal.count("user.createOtherAttachersVolumeAttachment");
      sim.createVolumeAttachment(pv.metadata.name, sim.prng.pick(sim.nodes), OTHER_ATTACHER);
      break;
    }
    case "deleteVA": {
      const va = sim.prng.pick(liveVas);
      sim.journal.count(
        va.status?.attached ? "user.deleteAttachedVolumeAttachment" : "user.deleteVolumeAttachment",
      );
      sim.deleteVolumeAttachment(va.metadata.name);
      break;
    }
    case "createPV":
      sim.journal.count("user.createPersistentVolume");
      randomPersistentVolume(sim);
      break;
    case "deletePV": {
      const pv = sim.prng.pick(livePvs);
      const attached = vas.some((va) =>
        va.spec.source?.persistentVolumeName === pv.metadata.name && va.status?.attached
      );
      sim.journal.count(
        attached ? "user.deletePersistentVolumeWhileAttached" : "user.deletePersistentVolume",
      );
      sim.deletePersistentVolume(pv.metadata.name);
      break;
    }
    case "createCSINode":
      sim.journal.count("user.createCSINodeLate");
      sim.createCsiNode(sim.prng.pick(missingNodes));
      break;
    case "deleteCSINode":
      sim.journal.count("user.deleteCSINode");
      sim.deleteCsiNode(sim.prng.pick([...csiNodes].sort()));
      break;
    case "createSecret":
      sim.journal.count("user.createSecretLate");
      sim.createSecret(sim.prng.pick(missingSecrets));
      break;
  }
}

/**
 * One random fault that is not tied to a request: kill, replace or pause the attacher, drop, break or
 * expire a watch, send a bookmark, compact the history, take the driver down for a while, step
 * the wall clock, throttle the API (429 storm) or make every connection silent for a while.
 */
export function randomFault(sim: Simulation): void {
  const watches = sim.api.watches().filter((w) => !w.ended);
  const idle = watches.filter((w) => w.idle);
  const kind = sim.prng.weighted<string>([
    ["kill", sim.instance ? 1 : 0],
    ["switch", sim.instance ? 1 : 0],
    ["pause", sim.instance?.leading && !sim.pausedInstance ? 1 : 0],
    ["dropWatch", watches.length > 0 ? 2 : 0],
    ["failWatch", watches.length > 0 ? 1 : 0],
    ["expireWatch", watches.length > 0 ? 1.5 : 0],
    ["bookmark", idle.length > 0 ? 1.5 : 0],
    ["compact", 0.5],
    ["driverDown", sim.csi.unavailable ? 0 : 1],
    ["clockStep", 0.7],
    ["throttleStorm", sim.api.throttled ? 0 : 0.7],
    ["silence", sim.api.silent ? 0 : 0.5],
  ]);
  switch (kind) {
    case "kill":
      sim.journal.count("process.kill");
      sim.killInstance();
      break;
    case "switch":
      sim.journal.count("process.replicaSwitch");
      sim.killInstance();
      sim.startInstance();
      break;
    case "pause": {
      // The leader's process stops (SIGSTOP, a frozen VM, a live migration) for 1–40 s, its
      // clock with it: a standby starts, and its elector takes over once it saw the Lease
      // unchanged for a lease (15 s); at the resume the paused one must not act on what it was
      // doing (its lease fence).
      const ms = sim.prng.between(1, 40) * 1000;
      sim.journal.count(ms < 14_000 ? "process.pauseShort" : "process.pauseLong", `${ms / 1000} s`);
      sim.pauseInstance(ms);
      break;
    }
    case "dropWatch": {
      const w = sim.prng.pick(watches);
      sim.journal.count("api.watchDropped", `${w.client}/${w.resource}`);
      sim.api.dropWatch(w);
      break;
    }
    case "failWatch": {
      const w = sim.prng.pick(watches);
      sim.journal.count("api.watchFailed", `${w.client}/${w.resource}`);
      sim.api.failWatch(w);
      break;
    }
    case "expireWatch": {
      const w = sim.prng.pick(watches);
      sim.journal.count(
        w.queue.length > 0 ? "api.relistWithEventsInFlight" : "api.watchExpired410",
        `${w.client}/${w.resource} (${w.queue.length} events in flight)`,
      );
      sim.api.expireWatch(w);
      break;
    }
    case "bookmark": {
      const w = sim.prng.pick(idle);
      sim.journal.count("api.bookmark", `${w.client}/${w.resource}`);
      sim.api.bookmark(w);
      break;
    }
    case "compact":
      sim.journal.count("api.compaction");
      sim.api.compact();
      break;
    case "clockStep": {
      // The wall clock jumps (NTP, an operator), up to a day either way: durations, timers,
      // backoff and lease observations follow the monotonic clock and must not notice.
      const stepMs = sim.prng.pick([-1, 1]) * sim.prng.between(1, 86_400) * 1000;
      sim.journal.count(
        stepMs < 0 ? "clock.wallStepBack" : "clock.wallStepForward",
        `${stepMs / 1000} s`,
      );
      sim.clock.stepWall(stepMs);
      break;
    }
    case "throttleStorm": {
      // API Priority and Fairness answers 429 for a while: most requests get through late (the
      // client's retries), some run out of retries.
      const until = sim.journal.step + sim.prng.between(5, 60);
      sim.journal.count("api.throttleStorm", `until step ${until}`);
      sim.api.throttleUntil(until);
      break;
    }
    case "silence": {
      // Every connection goes silent without closing (a vanished API server node, a load
      // balancer failover) until the client's idle watchdog and request timeouts notice.
      const until = sim.journal.step + sim.prng.between(3, 40);
      sim.journal.count("api.connectionsSilent", `until step ${until}`);
      sim.api.silenceUntil(until);
      break;
    }
    case "driverDown": {
      const until = sim.journal.step + sim.prng.between(3, 40);
      sim.journal.count("csi.driverUnavailable", `until step ${until}`);
      sim.setDriverUnavailableUntil(until);
      break;
    }
  }
}

/** Objects ordered by name. */
function sortByName<T extends { metadata: { name: string } }>(items: T[]): T[] {
  return items.sort((a, b) => a.metadata.name < b.metadata.name ? -1 : 1);
}
