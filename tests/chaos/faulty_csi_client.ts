/**
 * A CSI driver behind a bad connection, in-process and deterministic: {@link FaultyCsiDriver}
 * serves the attacher's CSI calls from an {@link ExampleDriver}'s state, and a seeded
 * {@link Prng} decides whether a call fails (any gRPC code), times out after the driver did the
 * work (the "maybe attached" case), or runs for a while (finishing at a later step, possibly after
 * the caller's deadline). Caller deadlines run on the {@link FakeClock}.
 *
 * Like a driver that follows the CSI spec's advice for a CO that lost state ("the Plugin SHOULD
 * handle this as gracefully as possible, and MAY return [ABORTED] to reject secondary calls"),
 * it answers ABORTED to a publish or unpublish of a volume while another operation on that
 * volume is still running, unless `serializeVolumeOps` is off.
 *
 * Every successful answer the attacher receives is recorded in {@link FaultyCsiDriver.acks}: the
 * invariant checks use it to tell an acknowledged publish from a hopeful one.
 *
 * @module
 */

import type { Clock, Timer } from "../../lib/clock.ts";
import type { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import type {
  CallOptions,
  ControllerPublishVolumeRequest,
  ControllerUnpublishVolumeRequest,
  CsiClient,
  ListedVolume,
} from "../../lib/csi/api.ts";
import { CsiError } from "../../lib/csi/api.ts";
import { FencedError } from "../../lib/lease_fence.ts";
import { grpcCodeName } from "../../lib/wire/grpc/status.ts";
import { CsiStatusError, type DriverVolumeCapability } from "../../testkit/csi/server.ts";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import type { Journal } from "./journal.ts";
import type { Prng } from "./prng.ts";

/** gRPC DeadlineExceeded. */
const DEADLINE_EXCEEDED = 4;
/** gRPC Aborted. */
const ABORTED = 10;
/** gRPC Unavailable. */
const UNAVAILABLE = 14;

/** The CSI calls that change the driver's state. */
export type CsiMethod = "ControllerPublishVolume" | "ControllerUnpublishVolume" | "ListVolumes";

/** What happens to one call. */
export type CsiFault =
  /** Fails with gRPC `code`; the driver does nothing. */
  | { kind: "error"; code: number }
  /** The driver does the work, then the caller's deadline passes: DeadlineExceeded. */
  | { kind: "deadlineAfterApply" }
  /** The driver works on it until a later step (which may come after the deadline). */
  | { kind: "slow" }
  /** The driver finishes only after the caller's deadline passed. */
  | { kind: "hung" };

/** A scripted fault for the next matching call(s). */
export interface CsiFaultRule {
  method?: CsiMethod;
  volumeId?: string;
  /** How many calls it applies to; default 1. */
  times?: number;
  fault: CsiFault;
}

/** Probabilities of the random faults. */
export interface CsiFaultRates {
  /** Probability that a call gets a fault. */
  fault: number;
  /** Probability that a call without a fault still finishes at a later step. */
  latency: number;
}

/** A success the attacher received. */
export interface CsiAck {
  /** Order among everything else the journal numbers. */
  seq: number;
  client: string;
  method: "ControllerPublishVolume" | "ControllerUnpublishVolume";
  volumeId: string;
  nodeId: string;
  publishContext?: Record<string, string>;
}

/** A call as the driver received it, for checks of what the attacher sent. */
export interface CsiCallRecord {
  /** Order among everything else the journal numbers. */
  seq: number;
  client: string;
  method: "ControllerPublishVolume" | "ControllerUnpublishVolume";
  volumeId: string;
  nodeId: string;
  /** Marked csi_secret in the spec; only compared, never printed. */
  secrets: Record<string, string>;
}

/** A call the driver is still working on. */
export interface PendingOp {
  readonly id: number;
  readonly client: string;
  readonly label: string;
  readonly volumeId: string;
  /** True once the caller stopped waiting (deadline or killed). */
  abandoned: boolean;
  /** Finishes only once abandoned. */
  readonly hung: boolean;
}

interface OpEntry extends PendingOp {
  method: CsiMethod;
  run: () => unknown;
  settle: (outcome: { ok: true; value: unknown } | { ok: false; err: unknown }) => void;
  timer: Timer | undefined;
  ack: ((value: unknown) => void) | undefined;
}

/** Options of {@link FaultyCsiDriver}. */
export interface FaultyCsiDriverOptions {
  rates: CsiFaultRates;
  /** Answer ABORTED to calls for a volume with an operation in progress. Default true. */
  serializeVolumeOps?: boolean;
}

/** Collaborators of {@link FaultyCsiDriver}. */
export interface FaultyCsiDriverDeps {
  driver: ExampleDriver;
  clock: FakeClock;
  prng: Prng;
  journal: Journal;
}

/**
 * The driver plus the connection to it. {@link FaultyCsiDriver.connect} gives each controller
 * instance a {@link CsiClient}; {@link FaultyCsiDriver.kill} drops the answers to a dead instance
 * while the driver finishes what it started.
 */
export class FaultyCsiDriver {
  /** Whether the dice may inject faults; latency applies either way. */
  faultsEnabled = true;
  /** Successes the attacher received, oldest first. */
  readonly acks: CsiAck[] = [];
  /** Every publish and unpublish the driver received, oldest first. */
  readonly calls: CsiCallRecord[] = [];
  #driver: ExampleDriver;
  #clock: FakeClock;
  #prng: Prng;
  #journal: Journal;
  #rates: CsiFaultRates;
  #serialize: boolean;
  #rules: CsiFaultRule[] = [];
  #pending: OpEntry[] = [];
  #busy = new Map<string, number>();
  #unavailable = false;
  #dead = new Set<string>();
  /** The clock of each client (its call deadlines), when not the world's. */
  #clocks = new Map<string, Clock>();
  #ids = 0;

  constructor(deps: FaultyCsiDriverDeps, opts: FaultyCsiDriverOptions) {
    this.#driver = deps.driver;
    this.#clock = deps.clock;
    this.#prng = deps.prng;
    this.#journal = deps.journal;
    this.#rates = opts.rates;
    this.#serialize = opts.serializeVolumeOps ?? true;
  }

  /** While true every call fails with UNAVAILABLE at once (driver restarting). */
  get unavailable(): boolean {
    return this.#unavailable;
  }

  set unavailable(value: boolean) {
    if (value !== this.#unavailable) {
      this.#journal.note(`driver ${value ? "unavailable" : "available again"}`);
    }
    this.#unavailable = value;
  }

  /** Queues a scripted fault. */
  inject(rule: CsiFaultRule): void {
    this.#rules.push({ ...rule });
  }

  /** Drops the scripted faults not used yet. */
  clearInjected(): void {
    this.#rules = [];
  }

  /**
   * The CSI client of one controller instance; `clock` runs its call deadlines (a paused
   * replica's clock holds them), the world's clock by default.
   */
  connect(client: string, clock?: Clock): CsiClient {
    if (clock !== undefined) this.#clocks.set(client, clock);
    return new FaultyCsiClient(this, client);
  }

  /** Calls the driver is working on. */
  pending(): readonly PendingOp[] {
    return this.#pending;
  }

  /** Calls that may finish now (a hung call waits for its caller's deadline). */
  completable(): PendingOp[] {
    return this.#pending.filter((p) => !p.hung || p.abandoned);
  }

  /** The instance is gone: its answers are dropped; the driver still finishes its calls. */
  kill(client: string): void {
    this.#dead.add(client);
    for (const p of this.#pending) {
      if (p.client !== client) continue;
      p.abandoned = true;
      p.timer?.cancel();
      p.timer = undefined;
    }
  }

  /** The driver finishes one call: its effect happens now and the caller, if waiting, hears. */
  complete(op: PendingOp): void {
    const entry = this.#pending.find((p) => p.id === op.id);
    if (entry === undefined) throw new RangeError(`No pending CSI call ${op.id}`);
    this.#pending = this.#pending.filter((p) => p !== entry);
    this.#release(entry.volumeId);
    entry.timer?.cancel();
    const outcome = this.#run(entry.run);
    this.#journal.note(
      `csi ${entry.client} ${entry.label} finished by the driver -> ${outcomeText(outcome)}${
        entry.abandoned ? " (nobody waits)" : ""
      }`,
    );
    if (entry.abandoned) return;
    if (outcome.ok) entry.ack?.(outcome.value);
    entry.settle(outcome);
  }

  /** Runs one call of `client`. */
  call<R>(
    client: string,
    method: CsiMethod,
    target: { volumeId: string; nodeId: string; label: string },
    opts: CallOptions,
    run: () => R,
    ack?: (value: R) => void,
  ): Promise<R> {
    if (this.#dead.has(client)) return new Promise(() => {});
    const label = target.label;
    if (this.#unavailable) {
      this.#journal.note(`csi ${client} ${label} -> Unavailable (driver down)`);
      return Promise.reject(new CsiError(UNAVAILABLE, "connection error: driver is restarting"));
    }
    const serialized = method !== "ListVolumes" && this.#serialize;
    if (serialized && (this.#busy.get(target.volumeId) ?? 0) > 0) {
      this.#journal.count("csi.abortedConcurrent", `${client} ${label}`);
      return Promise.reject(
        new CsiError(ABORTED, `an operation for volume ${target.volumeId} is already in progress`),
      );
    }
    const { fault, latency } = this.#decide(method, target.volumeId);
    if (fault?.kind === "error") {
      this.#journal.count(`csi.error.${grpcCodeName(fault.code)}`, `${client} ${label}`);
      return Promise.reject(new CsiError(fault.code, "injected failure"));
    }
    if (fault?.kind === "deadlineAfterApply") {
      const outcome = this.#run(run);
      const kind = method === "ControllerPublishVolume"
        ? "csi.deadlineAfterPublish"
        : method === "ControllerUnpublishVolume"
        ? "csi.deadlineAfterUnpublish"
        : "csi.deadlineAfterList";
      this.#journal.count(kind, `${client} ${label} (driver: ${outcomeText(outcome)})`);
      return Promise.reject(deadlineError());
    }
    if (fault?.kind === "slow" || fault?.kind === "hung") {
      if (fault.kind === "hung") this.#journal.count("csi.slowBeyondTimeout", `${client} ${label}`);
      else if (latency) this.#journal.note(`csi ${client} ${label} in progress`);
      else this.#journal.count("csi.slow", `${client} ${label}`);
      return new Promise<R>((resolve, reject) => {
        const entry: OpEntry = {
          id: ++this.#ids,
          client,
          label,
          volumeId: target.volumeId,
          abandoned: false,
          hung: fault.kind === "hung",
          method,
          run,
          settle: (o) => o.ok ? resolve(o.value as R) : reject(o.err),
          timer: undefined,
          ack: ack as ((value: unknown) => void) | undefined,
        };
        entry.timer = (this.#clocks.get(client) ?? this.#clock).setTimer(opts.timeoutMs, () => {
          entry.timer = undefined;
          entry.abandoned = true;
          this.#journal.note(`csi ${client} ${label} deadline exceeded while the driver works`);
          reject(deadlineError());
        });
        if (serialized) this.#busy.set(target.volumeId, (this.#busy.get(target.volumeId) ?? 0) + 1);
        this.#pending.push(entry);
      });
    }
    const outcome = this.#run(run);
    this.#journal.note(`csi ${client} ${label} -> ${outcomeText(outcome)}`);
    if (!outcome.ok) return Promise.reject(outcome.err);
    ack?.(outcome.value as R);
    return Promise.resolve(outcome.value as R);
  }

  /** Records a publish the caller heard succeed. */
  ackPublish(
    client: string,
    req: { volumeId: string; nodeId: string },
    ctx: Record<string, string>,
  ) {
    this.acks.push({
      seq: this.#journal.nextSeq(),
      client,
      method: "ControllerPublishVolume",
      volumeId: req.volumeId,
      nodeId: req.nodeId,
      publishContext: { ...ctx },
    });
  }

  /** Records an unpublish the caller heard succeed. */
  ackUnpublish(client: string, req: { volumeId: string; nodeId: string }) {
    this.acks.push({
      seq: this.#journal.nextSeq(),
      client,
      method: "ControllerUnpublishVolume",
      volumeId: req.volumeId,
      nodeId: req.nodeId,
    });
  }

  /** A new journal sequence number. */
  nextSeq(): number {
    return this.#journal.nextSeq();
  }

  /** The driver's state. */
  get driver(): ExampleDriver {
    return this.#driver;
  }

  #release(volumeId: string): void {
    const n = (this.#busy.get(volumeId) ?? 0) - 1;
    if (n > 0) this.#busy.set(volumeId, n);
    else this.#busy.delete(volumeId);
  }

  #run(run: () => unknown): { ok: true; value: unknown } | { ok: false; err: unknown } {
    try {
      return { ok: true, value: run() };
    } catch (err) {
      if (err instanceof CsiStatusError) {
        return { ok: false, err: new CsiError(err.code, err.message, { cause: err }) };
      }
      throw err;
    }
  }

  /** The fault for one call; `latency` when it is only slow (no fault). */
  #decide(method: CsiMethod, volumeId: string): { fault: CsiFault | undefined; latency: boolean } {
    const i = this.#rules.findIndex((r) =>
      (r.method === undefined || r.method === method) &&
      (r.volumeId === undefined || r.volumeId === volumeId)
    );
    const rule = this.#rules[i];
    if (rule !== undefined) {
      const left = (rule.times ?? 1) - 1;
      if (left <= 0) this.#rules.splice(i, 1);
      else rule.times = left;
      return { fault: rule.fault, latency: false };
    }
    if (this.faultsEnabled && this.#prng.chance(this.#rates.fault)) {
      const kind = this.#prng.weighted<CsiFault["kind"]>(
        method === "ListVolumes"
          ? [["error", 3], ["slow", 1]]
          : [["error", 4], ["deadlineAfterApply", 3], ["slow", 2], ["hung", 2]],
      );
      const fault: CsiFault = kind === "error"
        ? { kind, code: this.#prng.between(1, 16) }
        : { kind };
      return { fault, latency: false };
    }
    if (this.#prng.chance(this.#rates.latency)) return { fault: { kind: "slow" }, latency: true };
    return { fault: undefined, latency: false };
  }
}

/** The capability as the driver's server would decode it from the wire. */
function driverCapability(req: ControllerPublishVolumeRequest): DriverVolumeCapability {
  const cap = req.volumeCapability;
  const out: DriverVolumeCapability = { accessMode: { ...cap.accessMode } };
  if (cap.block) out.block = {};
  if (cap.mount) {
    out.mount = {
      fsType: cap.mount.fsType,
      mountFlags: [...cap.mount.mountFlags],
      volumeMountGroup: cap.mount.volumeMountGroup ?? "",
    };
  }
  return out;
}

function deadlineError(): CsiError {
  return new CsiError(DEADLINE_EXCEEDED, "context deadline exceeded");
}

function outcomeText(o: { ok: true; value: unknown } | { ok: false; err: unknown }): string {
  if (o.ok) return "OK";
  return o.err instanceof CsiError ? grpcCodeName(o.err.code ?? 2) : "error";
}

/** One controller instance's view of {@link FaultyCsiDriver}. */
class FaultyCsiClient implements CsiClient {
  #net: FaultyCsiDriver;
  #client: string;

  constructor(net: FaultyCsiDriver, client: string) {
    this.#net = net;
    this.#client = client;
  }

  probe(_opts: CallOptions): Promise<{ ready?: boolean }> {
    return Promise.resolve({ ready: true });
  }

  getPluginInfo(_opts: CallOptions): Promise<{ name: string; vendorVersion: string }> {
    return Promise.resolve({ name: this.#net.driver.name, vendorVersion: "0.1.0" });
  }

  getPluginCapabilities(_opts: CallOptions): Promise<Set<string>> {
    return Promise.resolve(new Set(["CONTROLLER_SERVICE"]));
  }

  controllerGetCapabilities(_opts: CallOptions): Promise<Set<string>> {
    return Promise.resolve(new Set(ExampleDriver.CONTROLLER_CAPABILITIES));
  }

  /** Records a publish or unpublish as sent; returns the call's target for the fault rules. */
  #record(
    method: "ControllerPublishVolume" | "ControllerUnpublishVolume",
    req: { volumeId: string; nodeId: string; secrets?: Record<string, string> },
  ): { volumeId: string; nodeId: string; label: string } {
    const net = this.#net;
    net.calls.push({
      seq: net.nextSeq(),
      client: this.#client,
      method,
      volumeId: req.volumeId,
      nodeId: req.nodeId,
      secrets: { ...req.secrets },
    });
    return {
      volumeId: req.volumeId,
      nodeId: req.nodeId,
      label: `${method}(${req.volumeId}, ${req.nodeId})`,
    };
  }

  controllerPublishVolume(
    req: ControllerPublishVolumeRequest,
    opts: CallOptions,
  ): Promise<{ publishContext: Record<string, string> }> {
    // As the gRPC client: the fence is asked right before the request would be sent.
    if (opts.fence?.valid() === false) return Promise.reject(new FencedError());
    const net = this.#net;
    const client = this.#client;
    const copy = structuredClone(req);
    return net.call(
      client,
      "ControllerPublishVolume",
      this.#record("ControllerPublishVolume", copy),
      opts,
      () => net.driver.publish({ ...copy, volumeCapability: driverCapability(copy) }),
      (res) => net.ackPublish(client, copy, res.publishContext),
    );
  }

  controllerUnpublishVolume(
    req: ControllerUnpublishVolumeRequest,
    opts: CallOptions,
  ): Promise<void> {
    if (opts.fence?.valid() === false) return Promise.reject(new FencedError());
    const net = this.#net;
    const client = this.#client;
    const copy = structuredClone(req);
    return net.call(
      client,
      "ControllerUnpublishVolume",
      this.#record("ControllerUnpublishVolume", copy),
      opts,
      () => net.driver.unpublish(copy),
      () => net.ackUnpublish(client, copy),
    );
  }

  listVolumes(
    req: { maxEntries: number; startingToken: string },
    opts: CallOptions,
  ): Promise<{ entries: ListedVolume[]; nextToken: string }> {
    return this.#net.call(
      this.#client,
      "ListVolumes",
      { volumeId: "", nodeId: "", label: `ListVolumes(${req.startingToken || "-"})` },
      opts,
      () => {
        const page = this.#net.driver.list(req);
        return {
          entries: page.entries.map((e) => ({
            volumeId: e.volume?.volumeId ?? "",
            publishedNodeIds: [...(e.status?.publishedNodeIds ?? [])],
          })),
          nextToken: page.nextToken,
        };
      },
    );
  }

  close(): void {}
}
