/**
 * Deterministic chaos schedules for the attacher: the real LeaderElector, AttachController,
 * CsiHandler, LanedWorkQueue and Informer (see {@link AttacherInstance}) run under a
 * {@link FakeClock} against a {@link MemoryApiServer} (through {@link FaultyKubeApi}; the
 * elector reads and writes the server's Lease directly) and an {@link ExampleDriver} (through
 * {@link FaultyCsiDriver}). Nothing runs by itself: a seeded
 * {@link Prng} picks each step (start one queue item, deliver one watch event, answer one slow
 * request, let the driver finish one call, move the clock to the next timer, act as a user,
 * inject a fault, kill, replace or pause the attacher), and every pending microtask runs before
 * the next step. So a seed is a schedule, and a failing seed replays exactly.
 *
 * After every step the invariants of {@link import("./invariants.ts")} are checked; the first
 * breach stops the schedule and is reported with its step, the seed and the recent trace.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, SECRETS, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { errorText } from "../../lib/errors.ts";
import { finalizerName } from "../../lib/controller/names.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type {
  CsiNode,
  CsiPersistentVolumeSource,
  PersistentVolume,
  Secret,
  VolumeAttachment,
} from "../../lib/kube/types.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { FaultyCsiDriver, type PendingOp } from "./faulty_csi_client.ts";
import {
  type ApiWrite,
  FaultyKubeApi,
  type PendingRequest,
  type SimWatch,
} from "./faulty_kube_api.ts";
import {
  attachedWithError,
  type Breach,
  checkAttachedStatus,
  checkPersistentVolumeWrite,
  checkPublicationsCovered,
  checkVolumeAttachmentWrite,
  findSecretLeaks,
  unconverged,
  type WorldView,
} from "./invariants.ts";
import { Journal } from "./journal.ts";
import { ServerMirror } from "./mirror.ts";
import { randomFault, randomUserAction, seedWorld } from "./random_moves.ts";
import type { Sabotage } from "./sabotage.ts";
import { AttacherInstance } from "./attacher_instance.ts";
import { DRIVER_NAME, OTHER_ATTACHER, SECRET_NAMESPACE } from "./world_names.ts";
import { Prng } from "./prng.ts";
import { FENCE_REFUSED_MESSAGE } from "../../lib/lease_fence.ts";

export { DRIVER_NAME, OTHER_ATTACHER, SECRET_NAMESPACE } from "./world_names.ts";

/** A broken invariant, where and when. */
export interface Violation extends Breach {
  seed: number;
  step: number;
  /** Arguments of `deno task chaos` that replay the schedule. */
  replay: string;
  /** The trace lines before the breach, oldest first. */
  recent: string[];
}

/**
 * A schedule reached a window that the Go attacher's design has too, so that what follows is not
 * a bug of ours; the schedule stops there and reports it instead of a violation.
 *
 * - `lateWriteOnRecreatedVolumeAttachment`: a patch the attacher sent was handled by the API
 *   server only after its VA had been deleted and created again under the same name (it waited in
 *   the server up to its request timeout, after the attacher gave up on it or died), and changed
 *   what matters on the new VA. The Go attacher's patches are addressed by name alone, so a late
 *   `attached: true` marks a VA that nothing attached and a late finalizer removal strips the
 *   finalizer of an attached VA; ours carry the VA's uid (metadata and status patches alike) and
 *   are refused, so this is no longer reached (ARCHITECTURE.md, "One leader at a time").
 */
export interface InherentWindow {
  kind: "lateWriteOnRecreatedVolumeAttachment";
  seed: number;
  step: number;
  message: string;
}

/** Options of one schedule. */
export interface SimulationOptions {
  seed: number;
  /** Steps with faults and user actions. Default: random in 60–240. */
  chaosSteps?: number;
  /** Steps allowed to converge once faults stop. Default 3000. */
  maxQuiesceSteps?: number;
  /** Inject faults. Default true. */
  faults?: boolean;
  /** Act as users (create and delete objects). Default true. */
  userActions?: boolean;
  /** The driver answers ABORTED to calls on a busy volume. Default true. */
  serializeVolumeOps?: boolean;
  /** Start with a random world (PVs, CSINodes, secrets, VAs); false starts empty. Default true. */
  randomWorld?: boolean;
  /** Trace lines kept for reports. Default 60. */
  traceLimit?: number;
  /** Receives every trace line (replays). */
  echo?: (line: string) => void;
  /** Runs a deliberately broken attacher (to prove the checks catch it). */
  sabotage?: Sabotage;
  /** Probability that a call is answered at a later step. Default: random per schedule. */
  latency?: number;
  /** Concurrent VA (and PV) syncs. Default: random in 1–3. */
  workers?: number;
}

/** The kinds of step a schedule is made of. */
export type StepKind =
  | "workVA"
  | "workPV"
  | "deliver"
  | "respondApi"
  | "completeCsi"
  | "start"
  | "user"
  | "fault"
  | "clock"
  | "resume"
  | "release"
  | "workResumed";

/**
 * A replica stopped (SIGSTOP, a frozen VM) with its clock and work: nothing of it runs and none of
 * its answers reach it until {@link Simulation.resumeInstance}. A standby may start at once; its
 * leader elector takes the Lease over once it saw it unchanged for a lease duration.
 */
interface PausedReplica {
  inst: AttacherInstance;
  /** World time at which the pause ends (the resume step becomes possible). */
  until: number;
  /** World time from which a standby may start (the pause's start: its elector decides). */
  standbyAt: number;
}

/** What one schedule did. */
export interface ScheduleResult {
  seed: number;
  steps: number;
  chaosSteps: number;
  quiesceSteps: number;
  converged: boolean;
  /** Faults and user actions by kind. */
  counts: Record<string, number>;
  /** Empty when every invariant held. */
  violations: Violation[];
  /** The inherent window that ended the schedule early, if any (not a violation). */
  inherent: InherentWindow[];
  /** Hash of the whole trace: equal for two runs of the same seed. */
  traceHash: string;
}

/** Waits until every microtask has run (one macrotask turn; nothing else is scheduled). */
export function flushMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A PV of the world and what the user model knows about it. */
export interface PvModel {
  name: string;
  volumeId: string;
  /** Set for single-node access modes: VAs for it only go to this node. */
  homeNode?: string;
  secretName?: string;
}

/**
 * One chaos world and its schedule. The public step methods are also the building blocks of the
 * named regression scenarios.
 */
export class Simulation {
  readonly seed: number;
  readonly prng: Prng;
  readonly journal: Journal;
  readonly clock = new FakeClock();
  readonly server: MemoryApiServer;
  /** The server's objects, frozen, for checks and for the user model (no copies). */
  readonly mirror: ServerMirror;
  readonly driver = new ExampleDriver({}, { name: DRIVER_NAME });
  readonly api: FaultyKubeApi;
  readonly csi: FaultyCsiDriver;
  /** Every line any attacher instance logged, at verbosity 10. */
  readonly log = new FakeLogger(10);
  readonly nodes: string[] = [];
  /** Secret values handed out, for the leak check. */
  readonly secretValues: string[] = [];
  #opts: SimulationOptions;
  #instance: AttacherInstance | undefined;
  /** The leader stopped by a pause fault, while it is stopped. */
  #paused: PausedReplica | undefined;
  /**
   * A replica resumed after a pause while another leads (or could): it runs again (its answers
   * reach it; its held timers fire at a `release` step) until its fence finds the lease lapsed
   * and it exits.
   */
  #resumed: AttacherInstance | undefined;
  #instances = 0;
  #workers: number;
  #maxEntries: number;
  #faultWeight: number;
  #pvs: PvModel[] = [];
  #pvCounter = 0;
  #volumes = new Set<string>();
  #createdSeq = new Map<string, number>();
  #uids = 0;
  #breaches: Breach[] = [];
  #violations: Violation[] = [];
  /** Once one is hit, nothing is checked any more (what follows is not ours to judge). */
  #inherent: InherentWindow[] = [];
  #unavailableUntil = 0;
  #checkedCalls = 0;

  constructor(opts: SimulationOptions) {
    this.#opts = opts;
    this.seed = opts.seed;
    this.prng = new Prng(opts.seed);
    this.journal = new Journal({
      limit: opts.traceLimit ?? 60,
      ...(opts.echo ? { echo: opts.echo } : {}),
    });
    this.server = new MemoryApiServer({ clock: this.clock });
    this.mirror = new ServerMirror(this.server, [
      "volumeattachments",
      "persistentvolumes",
      "csinodes",
      "secrets",
    ]);
    const intensity = opts.faults === false ? 0 : 0.02 + this.prng.next() * 0.2;
    const workers = this.prng.between(1, 3);
    this.#workers = opts.workers ?? workers;
    const apiLatency = 0.05 + this.prng.next() * 0.25;
    const csiLatency = 0.05 + this.prng.next() * 0.25;
    this.#maxEntries = this.prng.pick([0, 0, 1, 2]);
    this.#faultWeight = 0.5 + this.prng.next() * 2;
    this.api = new FaultyKubeApi({
      server: this.server,
      mirror: this.mirror,
      clock: this.clock,
      prng: this.prng,
      journal: this.journal,
    }, { rates: { fault: intensity, latency: opts.latency ?? apiLatency } });
    this.csi = new FaultyCsiDriver({
      driver: this.driver,
      clock: this.clock,
      prng: this.prng,
      journal: this.journal,
    }, {
      rates: { fault: Math.min(0.5, intensity * 2.5), latency: opts.latency ?? csiLatency },
      serializeVolumeOps: opts.serializeVolumeOps ?? true,
    });
    this.api.faultsEnabled = opts.faults !== false;
    this.csi.faultsEnabled = opts.faults !== false;
    this.api.onWrite((w) => {
      if (w.resource === "volumeattachments") {
        const uid = (w.after ?? w.before)?.metadata.uid ?? "";
        const late = (this.#createdSeq.get(uid) ?? 0) > w.sentSeq;
        if (late && !lateWriteMatters(w)) {
          this.journal.count("api.lateHarmlessWriteOnRecreatedObject", `${w.client} ${w.name}`);
        }
        if (late && lateWriteMatters(w)) {
          // The request was sent before this VA existed: it was meant for an older VA of the
          // same name, deleted since. See InherentWindow.
          this.#hitInherentWindow(
            "lateWriteOnRecreatedVolumeAttachment",
            `${w.client}'s ${w.subresource ? "status " : ""}patch for an earlier ${w.name} ` +
              `was handled after ${w.name} had been deleted and created again`,
          );
          return;
        }
        this.#breaches.push(...checkVolumeAttachmentWrite(this.view(), w));
      } else if (w.resource === "persistentvolumes") {
        const { breaches, unseen } = checkPersistentVolumeWrite(this.view(), w);
        this.#breaches.push(...breaches);
        if (unseen.length > 0) {
          this.journal.count(
            "inherent.pvFinalizerRemovedWhileUnseenVolumeAttachmentNamesPV",
            `${w.name}: ${unseen.join(", ")}`,
          );
        }
      }
    });
    this.mirror.onChange((ev) => {
      if (ev.resource === "volumeattachments" && ev.type === "ADDED") {
        this.#createdSeq.set(ev.object.metadata.uid ?? "", this.journal.nextSeq());
      }
    });
    const nodeCount = this.prng.between(2, 3);
    for (let i = 1; i <= nodeCount; i++) this.nodes.push(`node-${i}`);
    this.journal.note(
      `seed=${opts.seed} workers=${this.#workers} maxEntries=${this.#maxEntries} intensity=${
        intensity.toFixed(3)
      } nodes=${nodeCount}`,
    );
    if (opts.randomWorld !== false) seedWorld(this);
  }

  /** The attacher instance running now, if any. */
  get instance(): AttacherInstance | undefined {
    return this.#instance;
  }

  /** The PVs created so far, as the user model knows them. */
  pvModels(): readonly PvModel[] {
    return this.#pvs;
  }

  /** Takes the driver down (UNAVAILABLE) until the given step. */
  setDriverUnavailableUntil(step: number): void {
    this.#unavailableUntil = step;
    this.csi.unavailable = true;
  }

  /** Violations found so far. */
  get violations(): readonly Violation[] {
    return this.#violations;
  }

  /** Inherent windows hit so far. */
  get inherentWindows(): readonly InherentWindow[] {
    return this.#inherent;
  }

  /** What the invariant checks look at. */
  view(): WorldView {
    return {
      server: this.mirror,
      driver: this.driver,
      driverName: DRIVER_NAME,
      acks: this.csi.acks,
      calls: this.csi.calls,
      createdSeq: (uid) => this.#createdSeq.get(uid),
    };
  }

  // ---------------------------------------------------------------------------------------------
  // The world: objects a user or an admin creates and deletes.

  /** Creates a PV (and its volume in the driver, unless `ghost`). Returns its name. */
  createPersistentVolume(opts: {
    mode?: "ReadWriteMany" | "ReadWriteOnce";
    homeNode?: string;
    secret?: "none" | "present" | "missing";
    ghost?: boolean;
  } = {}): string {
    const i = ++this.#pvCounter;
    const name = `pv-${i}`;
    const volumeId = `vol-${i}`;
    const mode = opts.mode ?? "ReadWriteMany";
    const model: PvModel = { name, volumeId };
    if (mode === "ReadWriteOnce") model.homeNode = opts.homeNode ?? this.nodes[0]!;
    if (!opts.ghost) {
      this.driver.createVolume(volumeId, { volumeContext: { tier: "chaos" } });
      this.#volumes.add(volumeId);
    }
    const pv: PersistentVolume = {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name, uid: this.#uid() },
      spec: {
        accessModes: [mode],
        capacity: { storage: "1Gi" },
        persistentVolumeReclaimPolicy: "Delete",
        csi: {
          driver: DRIVER_NAME,
          volumeHandle: volumeId,
          fsType: "ext4",
          volumeAttributes: { tier: "chaos" },
        },
      },
    };
    const secret = opts.secret ?? "none";
    if (secret !== "none") {
      model.secretName = `publish-secret-${i}`;
      pv.spec.csi!.controllerPublishSecretRef = {
        name: model.secretName,
        namespace: SECRET_NAMESPACE,
      };
      if (secret === "present") this.createSecret(model.secretName);
    }
    this.server.create(PERSISTENT_VOLUMES, pv);
    this.#pvs.push(model);
    this.journal.note(
      `user creates ${name} (${volumeId}${opts.ghost ? ", not in the driver" : ""}, ${mode}${
        model.secretName ? `, secret ${model.secretName} ${secret}` : ""
      })`,
    );
    return name;
  }

  /** Creates a controller-publish secret with two distinctive values. */
  createSecret(name: string): void {
    if (this.server.find(SECRETS, name, SECRET_NAMESPACE)) return;
    const values = [0, 1].map(() => `s3cr3t-${this.seed}-${this.prng.nextUint32().toString(36)}`);
    this.secretValues.push(...values);
    const secret: Secret = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name, namespace: SECRET_NAMESPACE, uid: this.#uid() },
      type: "Opaque",
      data: { username: btoa(values[0]!), password: btoa(values[1]!) },
    };
    this.server.create(SECRETS, secret);
    this.journal.note(`user creates secret ${SECRET_NAMESPACE}/${name}`);
  }

  /** Creates (or completes) the CSINode of `node` with our driver. */
  createCsiNode(node: string): void {
    const existing = this.server.find<CsiNode>(CSI_NODES, node);
    const ours = { name: DRIVER_NAME, nodeID: `${node}-id` };
    if (existing) {
      if ((existing.spec.drivers ?? []).some((d) => d.name === DRIVER_NAME)) return;
      existing.spec.drivers = [...(existing.spec.drivers ?? []), ours];
      this.server.update(CSI_NODES, existing);
    } else {
      this.server.create(CSI_NODES, {
        apiVersion: "storage.k8s.io/v1",
        kind: "CSINode",
        metadata: { name: node, uid: this.#uid() },
        spec: { drivers: [{ name: OTHER_ATTACHER, nodeID: `${node}-other` }, ours] },
      });
    }
    this.journal.note(`user registers the driver on ${node}`);
  }

  /** Deletes the CSINode of `node` (the node goes away for a while). */
  deleteCsiNode(node: string): void {
    if (!this.server.find(CSI_NODES, node)) return;
    this.server.delete(CSI_NODES, node);
    this.journal.note(`user deletes CSINode ${node}`);
  }

  /** Creates a VA named after its PV and node (and attacher, when not ours). */
  createVolumeAttachment(pvName: string, node: string, attacher = DRIVER_NAME): string {
    const prefix = attacher === DRIVER_NAME ? "va" : "other";
    const name = `${prefix}-${pvName}-${node}`;
    if (this.server.find(VOLUME_ATTACHMENTS, name)) return name;
    const va: VolumeAttachment = {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name, uid: this.#uid() },
      spec: { attacher, nodeName: node, source: { persistentVolumeName: pvName } },
    };
    this.server.create(VOLUME_ATTACHMENTS, va);
    this.journal.note(`user creates ${name}`);
    return name;
  }

  /**
   * Creates a VA with an inline CSI volume (as CSI migration of in-line volumes creates them).
   * `volumeId` names a volume of its own (created in the driver if new), never one of a PV, so
   * that no two VAs stand for the same volume and node.
   */
  createInlineVolumeAttachment(
    volumeId: string,
    node: string,
    opts: { secretName?: string } = {},
  ): string {
    const name = `va-inline-${volumeId}-${node}`;
    if (this.server.find(VOLUME_ATTACHMENTS, name)) return name;
    if (!this.#volumes.has(volumeId)) {
      this.driver.createVolume(volumeId);
      this.#volumes.add(volumeId);
    }
    const csi: CsiPersistentVolumeSource = {
      driver: DRIVER_NAME,
      volumeHandle: volumeId,
      fsType: "ext4",
    };
    if (opts.secretName) {
      csi.controllerPublishSecretRef = { name: opts.secretName, namespace: SECRET_NAMESPACE };
    }
    const va: VolumeAttachment = {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name, uid: this.#uid() },
      spec: {
        attacher: DRIVER_NAME,
        nodeName: node,
        source: { inlineVolumeSpec: { accessModes: ["ReadWriteMany"], csi } },
      },
    };
    this.server.create(VOLUME_ATTACHMENTS, va);
    this.journal.note(`user creates ${name}`);
    return name;
  }

  /** Deletes a VA (it waits for its finalizers). */
  deleteVolumeAttachment(name: string): void {
    if (!this.server.find(VOLUME_ATTACHMENTS, name)) return;
    this.server.delete(VOLUME_ATTACHMENTS, name);
    this.journal.note(`user deletes ${name}`);
  }

  /** Deletes a PV (it waits for its finalizers). */
  deletePersistentVolume(name: string): void {
    if (!this.server.find(PERSISTENT_VOLUMES, name)) return;
    this.server.delete(PERSISTENT_VOLUMES, name);
    this.journal.note(`user deletes ${name}`);
  }

  // ---------------------------------------------------------------------------------------------
  // The attacher process.

  /** Starts a new attacher instance (the replica that now leads). */
  startInstance(): AttacherInstance {
    if (this.#instance) throw new Error("Cannot start an attacher: one is running");
    const name = `attacher-${++this.#instances}`;
    const inst = new AttacherInstance({
      api: this.api,
      server: this.server,
      csi: this.csi,
      clock: this.clock,
      log: this.log,
      random: () => this.prng.next(),
    }, {
      name,
      maxEntries: this.#maxEntries,
      ...(this.#opts.sabotage ? { sabotage: this.#opts.sabotage } : {}),
    });
    this.#instance = inst;
    inst.start(this.#onFailure);
    this.journal.note(`start ${name}`);
    return inst;
  }

  /** Kills the running instance: its memory is gone, the server and the driver stay. */
  killInstance(): void {
    const inst = this.#instance;
    if (!inst) return;
    this.#killProcess(inst, "kill");
  }

  /** Ends `inst`'s process: its memory is gone, the server, the Lease and the driver stay. */
  #killProcess(inst: AttacherInstance, why: string): void {
    if (this.#instance === inst) this.#instance = undefined;
    this.api.kill(inst.name);
    this.csi.kill(inst.name);
    inst.kill();
    this.journal.note(`${why} ${inst.name}`);
  }

  /**
   * Pauses the leader for `ms` of world time (a fault): its clock freezes and nothing of it runs,
   * its elector's renewals included. A standby may start at once: its own elector takes the Lease
   * over once it saw the record unchanged for a lease duration.
   */
  pauseInstance(ms: number): void {
    const inst = this.#instance;
    if (!inst?.leading || this.#paused || this.#resumed) return;
    this.#instance = undefined;
    inst.clock.freeze();
    const now = this.clock.now();
    this.#paused = { inst, until: now + ms, standbyAt: now };
    this.journal.note(`pause ${inst.name} for ${ms / 1000} s`);
  }

  /** The paused replica is stopped (still paused, or resumed and not yet out), if any. */
  get pausedInstance(): AttacherInstance | undefined {
    return this.#paused?.inst ?? this.#resumed;
  }

  /**
   * Resumes the paused replica: its clock jumps to the world's time. When its fence holds, it
   * leads on (its held timers fire now, its elector's renewal among them) and a standby whose
   * elector has not taken the Lease is let go; a standby that leads then is a violation
   * (invariant 7). Otherwise it runs again until its fence, asked by whatever it does first (or
   * its late timer), ends the term, and it exits.
   */
  resumeInstance(): void {
    const paused = this.#paused;
    if (!paused) return;
    this.#paused = undefined;
    const { inst } = paused;
    inst.clock.thaw();
    this.journal.note(`resume ${inst.name}`);
    const standby = this.#instance;
    if (inst.fenceOpenAt(this.clock.now())) {
      if (standby?.leading) {
        // The fence's promise broken: another replica took the Lease while this one's fence
        // still says it leads.
        this.#violate({
          invariant: 7,
          message: `${inst.name} resumed with its fence open while ${standby.name} leads`,
        });
      } else {
        // The standby's elector has not taken the Lease (it cannot while the fence is open):
        // the resumed leader renews on, and the standby, which holds nothing, is let go.
        if (standby !== undefined) this.#killProcess(standby, "standby let go, never led");
        this.#instance = inst;
        inst.clock.release();
        this.journal.count("process.shortPause");
        return;
      }
    }
    this.journal.count("process.pausePastLease");
    this.#resumed = inst;
    this.#exitIfLapsed();
  }

  /** The resumed replica's held timers fire. */
  releaseResumed(): void {
    const inst = this.#resumed;
    if (!inst) return;
    this.journal.note(`${inst.name}'s late timers fire`);
    inst.clock.release();
  }

  /** A replica whose elector stopped leading exits 1, as `Stopped leading` makes it. */
  #exitIfLapsed(): void {
    const leader = this.#instance;
    if (leader?.lapsed) {
      // Not after a pause (no renewal fails here): counted, and another replica may start.
      this.journal.count("process.stoppedLeading", leader.name);
      this.#killProcess(leader, "stopped leading:");
    }
    const inst = this.#resumed;
    if (!inst?.lapsed) return;
    this.#resumed = undefined;
    this.api.kill(inst.name);
    this.csi.kill(inst.name);
    inst.kill();
    this.journal.count("process.stoppedLeadingAfterPause", inst.name);
    const refused =
      this.log.lines.filter((l) =>
        l.msg === FENCE_REFUSED_MESSAGE && l.fields.instance === inst.name
      ).length;
    for (let i = 0; i < refused; i++) this.journal.count("fence.refusedAct", inst.name);
    this.journal.note(`${inst.name} stopped leading: its lease could have passed`);
  }

  /** The clients whose answers cannot reach them now (a paused replica). */
  #frozenClient(client: string): boolean {
    return this.#paused?.inst.name === client;
  }

  /** Requests whose answer may be given now. */
  respondable(): readonly PendingRequest[] {
    return this.#paused
      ? this.api.pending().filter((p) => !this.#frozenClient(p.client))
      : this.api.pending();
  }

  /** CSI calls the driver may finish now (a paused caller's wait). */
  csiCompletable(): PendingOp[] {
    const ops = this.csi.completable();
    return this.#paused ? ops.filter((p) => !this.#frozenClient(p.client)) : ops;
  }

  /** Watches with an event to deliver now. */
  deliverableWatches(): SimWatch[] {
    return this.api.watches().filter((w) => w.deliverable && !this.#frozenClient(w.client));
  }

  // ---------------------------------------------------------------------------------------------
  // Steps. Each does one thing; call settle() after it.

  /** Whether a replica may start: none leads, and a paused one's lease could have passed. */
  #canStart(): boolean {
    if (this.#instance) return false;
    return !this.#paused || this.clock.now() >= this.#paused.standbyAt;
  }

  /**
   * Whether the resumed replica's workers may take a key: as the process's workers loop, they
   * take the next key at once after the resume, before anything tells them the lease is gone.
   */
  #canWorkResumed(): boolean {
    const inst = this.#resumed;
    if (!inst || !inst.ready()) return false;
    return (inst.vaQueue.len() > 0 && inst.vaWorkers < this.#workers) ||
      (inst.pvQueue.len() > 0 && inst.pvWorkers < this.#workers);
  }

  /** A worker of the resumed replica takes its next key (a VA one when it can). */
  #workResumed(): void {
    const inst = this.#resumed;
    if (!inst) return;
    const va = inst.vaQueue.len() > 0 && inst.vaWorkers < this.#workers;
    this.journal.note(`${inst.name} (resumed) ${va ? "va" : "pv"} worker starts`);
    if (va) inst.workVolumeAttachment(this.#onFailure);
    else inst.workPersistentVolume(this.#onFailure);
  }

  /** Whether the paused replica's pause is over. */
  #canResume(): boolean {
    return this.#paused !== undefined && this.clock.now() >= this.#paused.until;
  }

  /** Lets every pending microtask run. */
  settle(): Promise<void> {
    return flushMicrotasks();
  }

  /** Whether a VA worker may take a key now. */
  canWorkVolumeAttachment(): boolean {
    const inst = this.#instance;
    return !!inst && inst.ready() && inst.vaQueue.len() > 0 && inst.vaWorkers < this.#workers;
  }

  /** Whether a PV worker may take a key now. */
  canWorkPersistentVolume(): boolean {
    const inst = this.#instance;
    return !!inst && inst.ready() && inst.pvQueue.len() > 0 && inst.pvWorkers < this.#workers;
  }

  /** A VA worker takes the next key and syncs it (in the background). */
  workVolumeAttachment(): void {
    const inst = this.#instance;
    if (!inst || !this.canWorkVolumeAttachment()) return;
    this.journal.note(`${inst.name} va worker starts (ready=${inst.vaQueue.len()})`);
    inst.workVolumeAttachment(this.#onFailure);
  }

  /** A PV worker takes the next key and syncs it (in the background). */
  workPersistentVolume(): void {
    const inst = this.#instance;
    if (!inst || !this.canWorkPersistentVolume()) return;
    this.journal.note(`${inst.name} pv worker starts (ready=${inst.pvQueue.len()})`);
    inst.workPersistentVolume(this.#onFailure);
  }

  /**
   * Moves the clock to the next timer and fires it (or, while a replica is paused, to the end of
   * the pause or to when a standby may start, if sooner). The leader renews its lease as time
   * passes: its elector's renewal timers are among the clock's timers; a paused replica's are
   * held.
   */
  advanceClock(): boolean {
    const at = this.#nextClockStop();
    if (at === undefined) return false;
    this.journal.note(`clock +${at - this.clock.now()}ms`);
    this.clock.advance(Math.max(0, at - this.clock.now()));
    return true;
  }

  /** Where {@link advanceClock} goes next, if anywhere. */
  #nextClockStop(): number | undefined {
    const stops = [this.clock.nextTimerAt()];
    const paused = this.#paused;
    if (paused) {
      for (const at of [paused.until, paused.standbyAt]) if (at > this.clock.now()) stops.push(at);
    }
    const times = stops.filter((t): t is number => t !== undefined);
    return times.length === 0 ? undefined : Math.min(...times);
  }

  /**
   * Runs without faults or user actions until every invariant-4 condition holds and nothing is
   * in flight, preferring work over time (the clock moves only when nothing else can happen).
   * Returns whether it converged within `maxSteps`.
   */
  async runUntilQuiet(maxSteps = 3000): Promise<boolean> {
    await this.settle();
    for (let i = 0; i < maxSteps; i++) {
      if (this.#violations.length > 0) return false;
      if (this.quiet() && this.unconverged().length === 0) return true;
      if (!await this.#step("quiesce")) return this.unconverged().length === 0;
    }
    return this.quiet() && this.unconverged().length === 0;
  }

  /** True when nothing is in flight and no worker has a ready key. */
  quiet(): boolean {
    const inst = this.#instance;
    if (!inst || !inst.ready() || this.#paused || this.#resumed) return false;
    return this.api.pending().length === 0 && this.csi.pending().length === 0 &&
      inst.vaQueue.len() === 0 && inst.pvQueue.len() === 0 && inst.vaWorkers === 0 &&
      inst.pvWorkers === 0 && !this.api.watches().some((w) => w.deliverable);
  }

  /** What is not yet in its final state (invariant 4). */
  unconverged(): string[] {
    return unconverged(this.view(), this.#volumes);
  }

  /**
   * Checks invariants 1, 2, 3 and 5 (and the harness's own sanity); records and returns the first
   * breach as a violation. Checks nothing once an inherent window was hit.
   */
  check(): Violation | undefined {
    if (this.#inherent.length > 0) return undefined;
    const view = this.view();
    const breaches = [
      ...this.#breaches,
      ...checkPublicationsCovered(view),
      ...checkAttachedStatus(view),
      ...this.#checkSecretsSent(),
    ];
    this.#breaches = [];
    const first = breaches[0];
    if (first === undefined) return undefined;
    return this.#violate(first);
  }

  /** Checks invariant 6 over everything logged so far. */
  checkSecrets(): Violation | undefined {
    const first = findSecretLeaks(this.log.lines, this.mirror, this.secretValues)[0];
    return first === undefined ? undefined : this.#violate(first);
  }

  /** Runs the whole random schedule and reports it. */
  async run(): Promise<ScheduleResult> {
    const chaosSteps = this.#opts.chaosSteps ?? this.prng.between(60, 240);
    const going = () => this.#violations.length === 0 && this.#inherent.length === 0;
    this.startInstance();
    await this.settle();
    let steps = 0;
    for (; steps < chaosSteps && going(); steps++) {
      await this.#step("chaos");
    }
    this.api.faultsEnabled = false;
    this.csi.faultsEnabled = false;
    this.resumeInstance();
    // What the resume released (late timers: the elector's renewal) runs before time moves on.
    await this.settle();
    this.api.clearInjected();
    this.csi.clearInjected();
    this.csi.unavailable = false;
    this.journal.note("faults and user actions stop");
    const maxQuiesce = this.#opts.maxQuiesceSteps ?? 3000;
    let quiesceSteps = 0;
    let converged = false;
    while (going()) {
      if (this.quiet() && this.unconverged().length === 0) {
        converged = true;
        break;
      }
      if (quiesceSteps >= maxQuiesce || !await this.#step("quiesce")) break;
      quiesceSteps++;
    }
    if (!converged && going()) {
      const reasons = this.unconverged();
      this.#violate({
        invariant: 4,
        message: `not converged after ${quiesceSteps} quiet steps: ${
          reasons.length > 0 ? reasons.join("; ") : "work still in flight"
        }`,
      });
    }
    if (going()) this.checkSecrets();
    for (const name of attachedWithError(this.view())) {
      this.journal.count("inherent.attachedVolumeAttachmentKeepsAttachError", name);
    }
    this.killInstance();
    for (const inst of [this.#paused?.inst, this.#resumed]) inst?.kill();
    this.api.dispose();
    this.mirror.dispose();
    return {
      seed: this.seed,
      steps: steps + quiesceSteps,
      chaosSteps: steps,
      quiesceSteps,
      converged,
      counts: this.journal.counts(),
      violations: [...this.#violations],
      inherent: [...this.#inherent],
      traceHash: this.journal.traceHash(),
    };
  }

  /** One random step, then settle and check. False when nothing at all can happen. */
  async #step(phase: "chaos" | "quiesce"): Promise<boolean> {
    this.journal.step++;
    if (this.csi.unavailable && this.journal.step >= this.#unavailableUntil) {
      this.csi.unavailable = false;
    }
    if (!this.api.silent) this.api.endSilence();
    let entries = this.#candidates(phase);
    if (!entries.some(([, w]) => w > 0)) {
      await this.settle(); // work started outside a step may still be running
      entries = this.#candidates(phase);
      if (!entries.some(([, w]) => w > 0)) return false;
    }
    await this.#perform(this.prng.weighted(entries));
    return true;
  }

  /** The steps possible now, with their weights. */
  #candidates(phase: "chaos" | "quiesce"): [StepKind, number][] {
    const chaos = phase === "chaos";
    const entries: [StepKind, number][] = [
      ["workVA", this.canWorkVolumeAttachment() ? 8 : 0],
      ["workPV", this.canWorkPersistentVolume() ? 4 : 0],
      ["deliver", this.deliverableWatches().length > 0 ? 8 : 0],
      ["respondApi", this.respondable().length > 0 ? 5 : 0],
      ["completeCsi", this.csiCompletable().length > 0 ? 5 : 0],
      ["start", this.#canStart() ? chaos ? 1.5 : 50 : 0],
      ["resume", this.#canResume() ? 5 : 0],
      ["release", this.#resumed?.clock.holding ? 3 : 0],
      ["workResumed", this.#canWorkResumed() ? 4 : 0],
      ["user", chaos && this.#opts.userActions !== false ? 3 : 0],
      ["fault", chaos && this.#opts.faults !== false ? this.#faultWeight : 0],
    ];
    const busy = entries.some(([, w]) => w > 0);
    const clockWeight = chaos ? 2 : busy ? 0 : 1;
    entries.push(["clock", this.#nextClockStop() !== undefined ? clockWeight : 0]);
    return entries;
  }

  /**
   * Takes one step of the given kind (picking at random among the candidates, e.g. which watch
   * or which pending request), lets the microtasks run and checks the invariants. Returns false
   * (and does nothing) when no such step is possible now.
   */
  async perform(kind: StepKind): Promise<boolean> {
    const possible: Record<StepKind, () => boolean> = {
      workVA: () => this.canWorkVolumeAttachment(),
      workPV: () => this.canWorkPersistentVolume(),
      deliver: () => this.deliverableWatches().length > 0,
      respondApi: () => this.respondable().length > 0,
      completeCsi: () => this.csiCompletable().length > 0,
      start: () => this.#canStart(),
      user: () => true,
      fault: () => true,
      clock: () => this.#nextClockStop() !== undefined,
      resume: () => this.#canResume(),
      release: () => this.#resumed?.clock.holding ?? false,
      workResumed: () => this.#canWorkResumed(),
    };
    if (!possible[kind]()) return false;
    this.journal.step++;
    await this.#perform(kind);
    return true;
  }

  /**
   * Takes steps without faults or user actions until `until()` holds: delivers watch events,
   * runs workers and answers requests first, lets the driver finish its calls only when
   * `completeCsi` is true (default), and moves the clock only when nothing else can happen.
   * Step kinds in `skip` are not taken.
   * Returns whether `until()` held within `maxSteps`.
   */
  async drive(
    until: () => boolean,
    opts: { completeCsi?: boolean; skip?: readonly StepKind[]; maxSteps?: number } = {},
  ): Promise<boolean> {
    const skip = new Set<StepKind>(opts.skip ?? []);
    if (opts.completeCsi === false) skip.add("completeCsi");
    const order = (["deliver", "workVA", "workPV", "respondApi", "completeCsi", "clock"] as const)
      .filter((k) => !skip.has(k));
    await this.settle();
    for (let i = 0; i < (opts.maxSteps ?? 2000); i++) {
      if (until()) return true;
      if (this.#violations.length > 0) return false;
      let moved = false;
      for (const kind of order) {
        if (await this.perform(kind)) {
          moved = true;
          break;
        }
      }
      if (!moved) break;
    }
    return until();
  }

  async #perform(kind: StepKind): Promise<void> {
    switch (kind) {
      case "workVA":
        this.workVolumeAttachment();
        break;
      case "workPV":
        this.workPersistentVolume();
        break;
      case "deliver":
        await this.#deliver();
        break;
      case "respondApi":
        this.api.respond(this.prng.pick(this.respondable()));
        break;
      case "completeCsi":
        this.csi.complete(this.prng.pick(this.csiCompletable()));
        break;
      case "start":
        this.startInstance();
        break;
      case "user":
        randomUserAction(this);
        break;
      case "fault":
        randomFault(this);
        break;
      case "clock":
        this.advanceClock();
        break;
      case "resume":
        this.resumeInstance();
        break;
      case "release":
        this.releaseResumed();
        break;
      case "workResumed":
        this.#workResumed();
        break;
    }
    await this.settle();
    this.#exitIfLapsed();
    this.check();
  }

  /** Delivers one event, or a short burst, on one watch. */
  async #deliver(): Promise<void> {
    const ready = this.deliverableWatches();
    const watch = this.prng.pick(ready);
    const burst = this.prng.chance(0.3) ? this.prng.between(2, 5) : 1;
    for (let i = 0; i < burst && watch.deliverable; i++) {
      this.api.deliver(watch);
      await this.settle();
    }
  }

  /** The secrets each publish and unpublish carried are those of the PV's secret. */
  #checkSecretsSent(): Breach[] {
    const breaches: Breach[] = [];
    const calls = this.csi.calls;
    for (; this.#checkedCalls < calls.length; this.#checkedCalls++) {
      const call = calls[this.#checkedCalls]!;
      const source = this.#csiSourceOf(call.volumeId);
      const ref = source?.controllerPublishSecretRef;
      let expected: Record<string, string> = {};
      if (ref) {
        const secret = this.mirror.find<Secret>("secrets", ref.name ?? "", ref.namespace ?? "");
        expected = Object.fromEntries(
          Object.entries(secret?.data ?? {}).map(([k, v]) => [k, atob(v)]),
        );
      }
      const same = Object.keys(expected).length === Object.keys(call.secrets).length &&
        Object.entries(expected).every(([k, v]) => call.secrets[k] === v);
      if (source && !same) {
        breaches.push({
          invariant: 0,
          message: `${call.method}(${call.volumeId}) by ${call.client} carried the wrong secrets`,
        });
      }
    }
    return breaches;
  }

  /** The CSI source (of a PV or an inline VA) that names `volumeId`. */
  #csiSourceOf(volumeId: string): CsiPersistentVolumeSource | undefined {
    const pv = this.mirror.list<PersistentVolume>("persistentvolumes")
      .find((p) => p.spec.csi?.volumeHandle === volumeId);
    if (pv?.spec.csi) return pv.spec.csi;
    const va = this.mirror.list<VolumeAttachment>("volumeattachments")
      .find((v) => v.spec.source?.inlineVolumeSpec?.csi?.volumeHandle === volumeId);
    return va?.spec.source.inlineVolumeSpec?.csi ?? undefined;
  }

  #violate(breach: Breach): Violation {
    const v: Violation = {
      ...breach,
      seed: this.seed,
      step: this.journal.step,
      replay: replayArgs(this.#opts),
      recent: this.journal.recent(),
    };
    this.#violations.push(v);
    this.journal.note(`VIOLATION of invariant ${breach.invariant}: ${breach.message}`);
    return v;
  }

  #hitInherentWindow(kind: InherentWindow["kind"], message: string): void {
    this.journal.count(`inherent.${kind}`, message);
    this.#inherent.push({ kind, seed: this.seed, step: this.journal.step, message });
  }

  #onFailure = (what: string, err: unknown): void => {
    this.#breaches.push({ invariant: 0, message: `${what} rejected: ${errorText(err)}` });
  };

  #uid(): string {
    return `uid-${this.seed}-${++this.#uids}`;
  }
}

/**
 * Whether a write meant for an earlier VA of the same name changes what matters on the new one:
 * removes our finalizer, or changes `attached` or `attachmentMetadata`. (A late attachError, or
 * a late patch adding our finalizer and node ID, is harmless: the attacher would write the same.)
 */
function lateWriteMatters(w: ApiWrite): boolean {
  const finalizer = finalizerName(DRIVER_NAME);
  const before = w.before as VolumeAttachment | undefined;
  const after = w.after as VolumeAttachment | undefined;
  const had = (before?.metadata.finalizers ?? []).includes(finalizer);
  const has = (after?.metadata.finalizers ?? []).includes(finalizer);
  return (had && !has) ||
    (before?.status?.attached ?? false) !== (after?.status?.attached ?? false) ||
    JSON.stringify(before?.status?.attachmentMetadata ?? {}) !==
      JSON.stringify(after?.status?.attachmentMetadata ?? {});
}

/** The `deno task chaos` arguments that replay a schedule run with `opts`. */
export function replayArgs(opts: SimulationOptions): string {
  let args = `--replay ${opts.seed}`;
  if (opts.chaosSteps !== undefined) args += ` --steps ${opts.chaosSteps}`;
  if (opts.serializeVolumeOps === false) args += " --no-serialize";
  return args;
}

/** Runs one random schedule for `seed`. */
export function runSchedule(opts: SimulationOptions): Promise<ScheduleResult> {
  return new Simulation(opts).run();
}
