/**
 * The API server as the attacher sees it through a bad network, in-process and deterministic:
 * {@link FaultyKubeApi} runs every request of the attacher against a {@link MemoryApiServer}'s
 * direct methods, and a seeded {@link Prng} decides whether it fails, loses its answer or is
 * answered some steps later. Watches are built on the server's change feed with our own event
 * history, so the simulation decides when each event reaches each informer, and can drop, fail or
 * expire (410) a watch, or send a bookmark.
 *
 * Nothing here runs by itself: requests wait in {@link FaultyKubeApi.pending} and watch events in
 * each {@link SimWatch} until the simulation delivers them, and client timeouts run on the
 * {@link FakeClock}.
 *
 * @module
 */

import type { Clock, Timer } from "../../lib/clock.ts";
import type { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import {
  ApiError,
  type KubeApi,
  type ObjectList,
  type ObjectOptions,
  type Patch,
  type Resource,
  type WatchEvent,
  type WatchOptions,
} from "../../lib/kube/api.ts";
import type { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { resolveServedResource } from "../../testkit/apiserver/resources.ts";
import { errorForCode, resourceExpired } from "../../testkit/apiserver/status_errors.ts";
import type { KubeObject } from "../../lib/kube/types.ts";
import type { Journal } from "./journal.ts";
import { FencedError } from "../../lib/lease_fence.ts";
import type { MirrorEvent, ServerMirror } from "./mirror.ts";
import type { Prng } from "./prng.ts";

/** A change one request stored, as {@link FaultyKubeApi.onWrite} hooks see it. */
export interface ApiWrite {
  /** The client (controller instance) that sent the request. */
  client: string;
  /** Plural resource name. */
  resource: string;
  name: string;
  subresource: "" | "status";
  /** The stored object before the write; undefined when it did not exist. */
  before: KubeObject | undefined;
  /** The stored object after the write; undefined when the write deleted it. */
  after: KubeObject | undefined;
  /** Journal sequence number of the moment the request was sent (it may be handled later). */
  sentSeq: number;
}

/** What happens to one request. */
export type ApiFault =
  /** Answered with HTTP `code` (0: no answer, a timeout); nothing is stored. */
  | { kind: "error"; code: number }
  /** Stored, then answered with HTTP `code` (0: the answer was lost, a timeout). */
  | { kind: "lostResponse"; code: number }
  /**
   * Answered at a later step. `applyOnSend`: the server handles it at once and only the answer
   * is late; otherwise the request itself is late and handled when answered.
   */
  | { kind: "slow"; applyOnSend: boolean };

/** A scripted fault for the next matching request(s), taking precedence over the dice. */
export interface ApiFaultRule {
  verb?: "get" | "list" | "create" | "update" | "patch" | "delete" | "watch";
  /** Plural resource name. */
  resource?: string;
  name?: string;
  subresource?: "" | "status";
  /** How many requests it applies to; default 1. */
  times?: number;
  /** For `watch`, only `error` is meaningful (the watch request fails). */
  fault: ApiFault;
}

/** Probabilities of the random faults. */
export interface ApiFaultRates {
  /** Probability that a request (or a watch request) gets a fault. */
  fault: number;
  /** Probability that a request without a fault is still answered at a later step. */
  latency: number;
}

/** Options of {@link FaultyKubeApi}. */
export interface FaultyKubeApiOptions {
  rates: ApiFaultRates;
  /** Client-side request timeout on the fake clock (KubeClient's default: 30 s). */
  requestTimeoutMs?: number;
  /**
   * A request the server has not handled this long after it was sent is dropped
   * (kube-apiserver's `--request-timeout`, 60 s): a late request lands within this bound or never.
   */
  serverTimeoutMs?: number;
  /** Events kept for watches that resume; older resume points get 410. Default 2000. */
  historyLimit?: number;
}

/** Collaborators of {@link FaultyKubeApi}. */
export interface FaultyKubeApiDeps {
  server: MemoryApiServer;
  /** The server's objects, frozen; its change feed drives the watches. */
  mirror: ServerMirror;
  clock: FakeClock;
  prng: Prng;
  journal: Journal;
}

type Verb = NonNullable<ApiFaultRule["verb"]>;

/** A request that has not been answered yet. */
export interface PendingRequest {
  readonly id: number;
  readonly client: string;
  /** E.g. `PATCH volumeattachments/va-1/status`. */
  readonly label: string;
  /** True once the server has handled it (it may still wait for its answer). */
  applied: boolean;
  /** True once the client gave up (timeout) or was killed: the answer goes nowhere. */
  abandoned: boolean;
}

interface PendingEntry extends PendingRequest {
  verb: Verb;
  sentSeq: number;
  serverTimer: Timer | undefined;
  exec: () => unknown;
  outcome: { ok: true; value: unknown } | { ok: false; err: unknown } | undefined;
  settle:
    | ((outcome: { ok: true; value: unknown } | { ok: false; err: unknown }) => void)
    | undefined;
  timer: Timer | undefined;
}

/** One history entry: a change of a watched resource. */
interface HistoryEvent {
  resource: string;
  rv: number;
  event: WatchEvent<KubeObject>;
}

/** One open watch stream of one client. */
export class SimWatch {
  readonly id: number;
  readonly client: string;
  /** Plural resource name. */
  readonly resource: string;
  /** Events the server has sent that the client has not read yet. */
  readonly queue: WatchEvent<KubeObject>[] = [];
  #waiter: ((r: IteratorResult<WatchEvent<KubeObject>>) => void) | undefined;
  #failWaiter: ((err: unknown) => void) | undefined;
  #ended = false;
  #failure: unknown;
  #onClose: () => void;

  constructor(id: number, client: string, resource: string, onClose: () => void) {
    this.id = id;
    this.client = client;
    this.resource = resource;
    this.#onClose = onClose;
  }

  /**
   * The connection went silent: the server's events queue up but none reaches the client until
   * the stream is dropped (as the client's idle watchdog closes it).
   */
  stalled = false;

  /** True when the client waits for an event and one is queued (and the stream is not silent). */
  get deliverable(): boolean {
    return !this.#ended && !this.stalled && this.#waiter !== undefined && this.queue.length > 0;
  }

  /** True when the client waits and nothing is queued: the stream is caught up. */
  get idle(): boolean {
    return !this.#ended && !this.stalled && this.#waiter !== undefined && this.queue.length === 0;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Hands the oldest queued event to the waiting client. */
  deliverOne(): WatchEvent<KubeObject> | undefined {
    const waiter = this.#waiter;
    const event = this.queue.shift();
    if (waiter === undefined || event === undefined) return undefined;
    this.#waiter = undefined;
    this.#failWaiter = undefined;
    // The client gets an object of its own, as one decoded from the wire is: the history's is
    // frozen and shared by every watch (an informer's transform may change what it is given).
    waiter({ value: structuredClone(event), done: false });
    return event;
  }

  /** Ends the stream as the server closing it would; queued events are lost. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.queue.length = 0;
    this.#onClose();
    const waiter = this.#waiter;
    this.#waiter = undefined;
    this.#failWaiter = undefined;
    waiter?.({ value: undefined, done: true });
  }

  /** Breaks the stream: the client's read rejects with `err`. */
  fail(err: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.queue.length = 0;
    this.#onClose();
    const failWaiter = this.#failWaiter;
    this.#waiter = undefined;
    this.#failWaiter = undefined;
    if (failWaiter) failWaiter(err);
    else this.#failure = err;
  }

  /** The iterator protocol's `next`. */
  next(): Promise<IteratorResult<WatchEvent<KubeObject>>> {
    if (this.#failure !== undefined) {
      const err = this.#failure;
      this.#failure = undefined;
      return Promise.reject(err);
    }
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.#waiter = resolve;
      this.#failWaiter = reject;
    });
  }
}

/** Deep-enough comparison of finalizers for the trace. */
function finalizerList(obj: KubeObject | undefined): string {
  return (obj?.metadata.finalizers ?? []).join(",");
}

/**
 * The network plus API server. {@link FaultyKubeApi.connect} gives each controller instance its
 * own {@link KubeApi}; killing the instance ({@link FaultyKubeApi.kill}) drops its answers (a
 * request already on the wire may still be handled by the server) and ends its watches.
 */
export class FaultyKubeApi {
  /** Whether the dice may inject faults; latency applies either way. */
  faultsEnabled = true;
  #server: MemoryApiServer;
  #mirror: ServerMirror;
  #clock: FakeClock;
  #prng: Prng;
  #journal: Journal;
  /** Journal step until which a throttling storm lasts (see {@link throttleUntil}). */
  #throttledUntil = 0;
  /** Journal step until which every connection is silent (see {@link silenceUntil}). */
  #silentUntil = 0;
  #rates: ApiFaultRates;
  #timeoutMs: number;
  #serverTimeoutMs: number;
  #historyLimit: number;
  /** The request being handled by the server right now (writes read its send time). */
  #handling: PendingEntry | undefined;
  #rules: ApiFaultRule[] = [];
  #pending: PendingEntry[] = [];
  #watches: SimWatch[] = [];
  #history: HistoryEvent[] = [];
  /** Watches resuming from a resourceVersion below this get 410. */
  #compactedRv: number;
  #ids = 0;
  #writeHooks: Array<(w: ApiWrite) => void> = [];
  #dead = new Set<string>();
  /** The clock of each client (its request timeouts), when not the world's. */
  #clocks = new Map<string, Clock>();
  #disposed = false;

  constructor(deps: FaultyKubeApiDeps, opts: FaultyKubeApiOptions) {
    this.#server = deps.server;
    this.#mirror = deps.mirror;
    this.#clock = deps.clock;
    this.#prng = deps.prng;
    this.#journal = deps.journal;
    this.#rates = opts.rates;
    this.#timeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.#serverTimeoutMs = opts.serverTimeoutMs ?? 60_000;
    this.#historyLimit = opts.historyLimit ?? 2000;
    this.#compactedRv = Number(this.#server.resourceVersion);
    deps.mirror.onChange((ev) => this.#record(ev));
  }

  /** Stops following the server's changes. */
  dispose(): void {
    this.#disposed = true;
    for (const w of [...this.#watches]) w.end();
    for (const p of this.#pending) {
      p.timer?.cancel();
      p.serverTimer?.cancel();
    }
    this.#pending = [];
  }

  /** Calls `fn` synchronously for every change a request of a client stores. */
  onWrite(fn: (w: ApiWrite) => void): void {
    this.#writeHooks.push(fn);
  }

  /** Queues a scripted fault. */
  inject(rule: ApiFaultRule): void {
    this.#rules.push({ ...rule });
  }

  /** Drops the scripted faults not used yet, and ends a throttling storm or a silence. */
  clearInjected(): void {
    this.#rules = [];
    this.#throttledUntil = 0;
    this.endSilence();
  }

  /**
   * API Priority and Fairness throttles the attacher until journal step `until`: each request is
   * either late (the client's retries after `Retry-After` absorbed the 429s) or fails with 429
   * (its retries ran out).
   */
  throttleUntil(until: number): void {
    this.#throttledUntil = until;
  }

  /** True while a throttling storm lasts. */
  get throttled(): boolean {
    return this.#journal.step < this.#throttledUntil;
  }

  /**
   * Every connection goes silent until journal step `until`: open watches deliver nothing and
   * every request (watches included) times out. {@link endSilence} drops the silent watches, as
   * the client's idle watchdog does, so the informers resume from their resourceVersions.
   */
  silenceUntil(until: number): void {
    this.#silentUntil = until;
    for (const w of this.#watches) w.stalled = true;
  }

  /** True while the connections are silent. */
  get silent(): boolean {
    return this.#journal.step < this.#silentUntil;
  }

  /** Ends a silence: the stalled watches are closed by the client. */
  endSilence(): void {
    this.#silentUntil = 0;
    for (const w of [...this.#watches]) {
      if (!w.stalled) continue;
      this.#journal.note(`watch ${w.client}/${w.resource} closed by the idle watchdog`);
      w.end();
    }
  }

  /**
   * The API client of one controller instance; `clock` runs its request timeouts (a paused
   * replica's clock holds them), the world's clock by default.
   */
  connect(client: string, clock?: Clock): KubeApi {
    if (clock !== undefined) this.#clocks.set(client, clock);
    return new FaultyKubeClient(this, this.#server, client);
  }

  /** Requests waiting for the server or for their answer. */
  pending(): readonly PendingRequest[] {
    return this.#pending;
  }

  /** Open watches. */
  watches(): readonly SimWatch[] {
    return this.#watches;
  }

  /**
   * The client is gone (process killed): its waiting answers are dropped, and each of its
   * requests the server has not handled yet is either lost or still handled later (decided by
   * the dice). Its watches end.
   */
  kill(client: string): void {
    this.#dead.add(client);
    for (const p of [...this.#pending]) {
      if (p.client !== client) continue;
      p.timer?.cancel();
      p.abandoned = true;
      if (p.applied || this.#prng.chance(0.5)) this.#remove(p);
    }
    for (const w of [...this.#watches]) if (w.client === client) w.end();
  }

  /** Answers one pending request (handling it first if the server has not yet). */
  respond(req: PendingRequest): void {
    const p = this.#pending.find((e) => e.id === req.id);
    if (p === undefined) throw new RangeError(`No pending request ${req.id}`);
    this.#remove(p);
    if (!p.applied) this.#apply(p);
    if (p.abandoned) {
      this.#journal.note(`api ${p.client} ${p.label} handled late, answer lost`);
      return;
    }
    this.#journal.note(`api ${p.client} ${p.label} answered late`);
    this.#settle(p);
  }

  /** Delivers the oldest queued event of `watch`. */
  deliver(watch: SimWatch): void {
    const event = watch.deliverOne();
    if (event === undefined) return;
    const obj = event.object as KubeObject;
    this.#journal.note(
      `watch ${watch.client}/${watch.resource} ${event.type} ${obj.metadata?.name ?? ""} rv=${
        obj.metadata?.resourceVersion ?? ""
      }`,
    );
  }

  /** Ends a watch as a server restart or load balancer would. */
  dropWatch(watch: SimWatch): void {
    watch.end();
  }

  /** Breaks a watch: the client's read fails with a connection error. */
  failWatch(watch: SimWatch): void {
    watch.fail(new ApiError(0, "ConnectionError", "watch stream: connection reset by peer"));
  }

  /**
   * Ends a watch with an ERROR 410 event, dropping what it had queued, and compacts the history
   * so that resuming from the old resourceVersion fails too: the informer must list again.
   */
  expireWatch(watch: SimWatch): void {
    const status = resourceExpired(Number(this.#server.resourceVersion) - 1, this.#rv()).status;
    watch.queue.length = 0;
    watch.queue.push({ type: "ERROR", object: status });
    this.compact();
  }

  /**
   * Sends a BOOKMARK at the current resourceVersion on a watch that is caught up.
   * @throws {RangeError} when the watch has events queued (a bookmark would skip them).
   */
  bookmark(watch: SimWatch): void {
    if (!watch.idle) throw new RangeError("Cannot bookmark a watch that is not caught up");
    const served = resolveServedResource(watch.resource);
    watch.queue.push({
      type: "BOOKMARK",
      object: {
        kind: served.kind,
        apiVersion: served.group === "" ? served.version : `${served.group}/${served.version}`,
        metadata: { name: "", resourceVersion: this.#server.resourceVersion },
      },
    });
    this.deliver(watch);
  }

  /** Drops the event history: a watch resuming from an older resourceVersion gets 410. */
  compact(): void {
    this.#history = [];
    this.#compactedRv = this.#rv();
  }

  #rv(): number {
    return Number(this.#server.resourceVersion);
  }

  #record(ev: MirrorEvent): void {
    if (this.#disposed || !WATCHED.has(ev.resource)) return;
    // The object is frozen, so every watch can share it.
    const entry: HistoryEvent = {
      resource: ev.resource,
      rv: ev.resourceVersion,
      event: { type: ev.type, object: ev.object },
    };
    this.#history.push(entry);
    while (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.shift();
      if (dropped !== undefined) this.#compactedRv = dropped.rv;
    }
    for (const w of this.#watches) {
      if (w.resource === ev.resource) w.queue.push(entry.event);
    }
  }

  /** Runs one request of `client`; `exec` is the server-side work. */
  call<R>(client: string, verb: Verb, label: string, meta: RuleTarget, exec: () => R): Promise<R> {
    if (this.#dead.has(client)) return new Promise(() => {}); // a dead process sends nothing
    const { fault, latency } = this.#decide(verb, meta);
    const entry: PendingEntry = {
      id: ++this.#ids,
      client,
      label,
      applied: false,
      abandoned: false,
      verb,
      sentSeq: this.#journal.nextSeq(),
      serverTimer: undefined,
      exec,
      outcome: undefined,
      settle: undefined,
      timer: undefined,
    };
    if (fault?.kind === "error") {
      this.#journal.count(faultName(fault), `${client} ${label}`);
      return Promise.reject(this.#injectedError(fault.code, verb, meta));
    }
    if (fault?.kind === "lostResponse") {
      this.#journal.count("api.lostResponse", `${client} ${label} (then ${fault.code})`);
      this.#apply(entry);
      return Promise.reject(this.#injectedError(fault.code, verb, meta));
    }
    if (fault?.kind === "slow") {
      if (latency) this.#journal.note(`api ${client} ${label} in flight`);
      else this.#journal.count("api.slow", `${client} ${label}`);
      if (fault.applyOnSend) this.#apply(entry);
      return new Promise<R>((resolve, reject) => {
        entry.settle = (o) => o.ok ? resolve(o.value as R) : reject(o.err);
        if (!entry.applied) {
          entry.serverTimer = this.#clock.setTimer(this.#serverTimeoutMs, () => {
            entry.serverTimer = undefined;
            if (entry.applied) return;
            this.#remove(entry);
            this.#journal.note(`api ${client} ${label} dropped by the server (request timeout)`);
          });
        }
        entry.timer = (this.#clocks.get(client) ?? this.#clock).setTimer(this.#timeoutMs, () => {
          entry.timer = undefined;
          entry.abandoned = true;
          if (entry.applied) this.#remove(entry);
          this.#journal.note(`api ${client} ${label} timed out`);
          reject(
            new ApiError(
              0,
              "Timeout",
              `${requestText(verb, meta)}: request timed out after ${this.#timeoutMs / 1000}s`,
            ),
          );
        });
        this.#pending.push(entry);
      });
    }
    this.#apply(entry);
    const outcome = entry.outcome!;
    this.#journal.note(`api ${client} ${label} -> ${outcomeText(outcome)}`);
    return outcome.ok ? Promise.resolve(outcome.value as R) : Promise.reject(outcome.err);
  }

  /** Opens a watch for `client`. */
  watch(client: string, res: Resource, opts: WatchOptions): AsyncIterable<WatchEvent<KubeObject>> {
    const fromRv = Number(opts.resourceVersion);
    const rule = this.#takeRule("watch", { resource: res.plural, name: "", subresource: "" });
    const fail = this.#dead.has(client)
      ? undefined
      : rule?.fault.kind === "error"
      ? rule.fault.code
      : this.faultsEnabled && this.silent
      ? 0
      : this.faultsEnabled && this.#prng.chance(this.#rates.fault / 2)
      ? 0
      : undefined;
    const w = new SimWatch(++this.#ids, client, res.plural, () => {
      this.#watches = this.#watches.filter((x) => x !== w);
      timer.cancel();
      opts.signal.removeEventListener("abort", onAbort);
    });
    const onAbort = () => w.end();
    const timer = this.#clock.setTimer(opts.timeoutSeconds * 1000, () => {
      this.#journal.note(`watch ${client}/${res.plural} closed by the server (timeoutSeconds)`);
      w.end();
    });
    opts.signal.addEventListener("abort", onAbort, { once: true });
    this.#watches.push(w);
    if (this.#dead.has(client) || opts.signal.aborted) {
      w.end();
    } else if (fail !== undefined) {
      this.#journal.count("api.watchRequestFailed", `${client}/${res.plural}`);
      w.fail(
        this.#injectedError(fail, "watch", { resource: res.plural, name: "", subresource: "" }),
      );
    } else if (!Number.isFinite(fromRv) || fromRv < this.#compactedRv) {
      // Too old: the watch cache answers 200 and an ERROR event, etcd a 410 answer.
      const expired = resourceExpired(fromRv, this.#compactedRv);
      this.#journal.count(
        "api.watchStart410",
        `${client}/${res.plural} rv=${opts.resourceVersion}`,
      );
      if (this.#prng.chance(0.5)) w.queue.push({ type: "ERROR", object: expired.status });
      else w.fail(expired);
    } else {
      for (const h of this.#history) {
        if (h.resource === res.plural && h.rv > fromRv) w.queue.push(h.event);
      }
      this.#journal.note(
        `watch ${client}/${res.plural} opened at rv=${fromRv} backlog=${w.queue.length}`,
      );
    }
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => w.next(),
        return: () => {
          w.end();
          return Promise.resolve({ value: undefined, done: true });
        },
      }),
    };
  }

  #remove(p: PendingEntry): void {
    this.#pending = this.#pending.filter((e) => e !== p);
  }

  #settle(p: PendingEntry): void {
    p.timer?.cancel();
    p.timer = undefined;
    p.settle?.(p.outcome!);
  }

  /** Handles the request on the server, recording its outcome and reporting what it stored. */
  #apply(p: PendingEntry): void {
    p.applied = true;
    p.serverTimer?.cancel();
    p.serverTimer = undefined;
    this.#handling = p;
    try {
      p.outcome = { ok: true, value: p.exec() };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      p.outcome = { ok: false, err };
    } finally {
      this.#handling = undefined;
    }
  }

  /** Runs a write on the server and reports the change to the hooks. */
  write<R>(client: string, target: RuleTarget, run: () => R): R {
    const before = this.#mirror.find(target.resource, target.name, target.namespace ?? "");
    const result = run();
    const after = this.#mirror.find(target.resource, target.name, target.namespace ?? "");
    if (before !== undefined || after !== undefined) {
      const w: ApiWrite = {
        client,
        resource: target.resource,
        name: target.name,
        subresource: target.subresource,
        before,
        after,
        sentSeq: this.#handling?.sentSeq ?? this.#journal.nextSeq(),
      };
      this.#journal.note(
        `stored ${target.resource}/${target.name} by ${client}: finalizers [${
          finalizerList(before)
        }] -> ${after === undefined ? "deleted" : `[${finalizerList(after)}]`}`,
      );
      for (const hook of this.#writeHooks) hook(w);
    }
    return result;
  }

  /** The fault for one request; `latency` when it is only late (no fault). */
  #decide(verb: Verb, meta: RuleTarget): { fault: ApiFault | undefined; latency: boolean } {
    const rule = this.#takeRule(verb, meta);
    if (rule) return { fault: rule.fault, latency: false };
    if (this.faultsEnabled && this.silent) {
      return { fault: { kind: "error", code: 0 }, latency: false };
    }
    if (this.faultsEnabled && this.throttled) {
      const fault: ApiFault = this.#prng.chance(0.25)
        ? { kind: "error", code: 429 }
        : { kind: "slow", applyOnSend: false };
      return { fault, latency: false };
    }
    const write = verb !== "get" && verb !== "list";
    if (this.faultsEnabled && this.#prng.chance(this.#rates.fault)) {
      const kind = this.#prng.weighted<string>(
        write
          ? [["409", 3], ["500", 2], ["timeout", 2], ["lost", 3], ["slow", 3]]
          : [["500", 2], ["timeout", 2], ["slow", 4]],
      );
      const fault: ApiFault = kind === "409"
        ? { kind: "error", code: 409 }
        : kind === "500"
        ? { kind: "error", code: 500 }
        : kind === "timeout"
        ? { kind: "error", code: 0 }
        : kind === "lost"
        ? { kind: "lostResponse", code: this.#prng.pick([0, 500]) }
        : { kind: "slow", applyOnSend: this.#prng.chance(0.5) };
      return { fault, latency: false };
    }
    if (this.#prng.chance(this.#rates.latency)) {
      return { fault: { kind: "slow", applyOnSend: this.#prng.chance(0.5) }, latency: true };
    }
    return { fault: undefined, latency: false };
  }

  #takeRule(verb: Verb, meta: RuleTarget): ApiFaultRule | undefined {
    const i = this.#rules.findIndex((r) =>
      (r.verb === undefined || r.verb === verb) &&
      (r.resource === undefined || r.resource === meta.resource) &&
      (r.name === undefined || r.name === meta.name) &&
      (r.subresource === undefined || r.subresource === meta.subresource)
    );
    const rule = this.#rules[i];
    if (rule === undefined) return undefined;
    const left = (rule.times ?? 1) - 1;
    if (left <= 0) this.#rules.splice(i, 1);
    else rule.times = left;
    return rule;
  }

  #injectedError(code: number, verb: Verb, meta: RuleTarget): ApiError {
    if (code === 0) {
      return new ApiError(0, "Timeout", `${requestText(verb, meta)}: request timed out`);
    }
    const served = resolveServedResource(meta.resource);
    return errorForCode(code, served, meta.name, code === 500 ? "injected failure" : undefined);
  }
}

/** The resources informers watch. */
const WATCHED = new Set(["volumeattachments", "persistentvolumes", "csinodes"]);

/** What a request targets, for scripted rules and write hooks. */
export interface RuleTarget {
  /** Plural resource name. */
  resource: string;
  name: string;
  subresource: "" | "status";
  namespace?: string;
}

/** A request as an error message names it, e.g. `Patch "volumeattachments/va-1/status"`. */
function requestText(verb: Verb, meta: RuleTarget): string {
  const path = [meta.namespace, meta.resource, meta.name, meta.subresource].filter((p) => p)
    .join("/");
  return `${verb[0]!.toUpperCase()}${verb.slice(1)} "${path}"`;
}

function faultName(fault: { kind: "error"; code: number }): string {
  switch (fault.code) {
    case 0:
      return "api.timeout";
    case 409:
      return "api.conflict";
    case 429:
      return "api.throttled429";
    default:
      return `api.error${fault.code}`;
  }
}

function outcomeText(o: { ok: true; value: unknown } | { ok: false; err: unknown }): string {
  if (o.ok) return "ok";
  return o.err instanceof ApiError ? `${o.err.code} ${o.err.reason}` : "error";
}

/** One controller instance's view of {@link FaultyKubeApi}. */
class FaultyKubeClient implements KubeApi {
  #net: FaultyKubeApi;
  #store: MemoryApiServer;
  #client: string;

  constructor(net: FaultyKubeApi, store: MemoryApiServer, client: string) {
    this.#net = net;
    this.#store = store;
    this.#client = client;
  }

  list<T extends KubeObject>(
    res: Resource,
    opts: ObjectOptions & { resourceVersion?: string } = {},
  ): Promise<ObjectList<T>> {
    const server = this.#server();
    return this.#net.call(
      this.#client,
      "list",
      `LIST ${res.plural}`,
      { resource: res.plural, name: "", subresource: "" },
      () => server.list<T>(res, opts.namespace),
    );
  }

  watch<T extends KubeObject>(res: Resource, opts: WatchOptions): AsyncIterable<WatchEvent<T>> {
    return this.#net.watch(this.#client, res, opts) as AsyncIterable<WatchEvent<T>>;
  }

  get<T extends KubeObject>(res: Resource, name: string, opts: ObjectOptions = {}): Promise<T> {
    const server = this.#server();
    const ns = opts.namespace ?? "";
    return this.#net.call(
      this.#client,
      "get",
      `GET ${res.plural}/${ns ? `${ns}/` : ""}${name}`,
      { resource: res.plural, name, subresource: "", namespace: ns },
      () => server.get<T>(res, name, ns),
    );
  }

  create<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    return this.#writeObject(
      "create",
      "POST",
      res,
      obj,
      opts,
      (server, copy) => server.create<T>(res, copy),
    );
  }

  update<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    return this.#writeObject(
      "update",
      "PUT",
      res,
      obj,
      opts,
      (server, copy) => server.update<T>(res, copy),
    );
  }

  /** A create or update of a whole object: through the network, then written to the server. */
  #writeObject<T extends KubeObject>(
    verb: "create" | "update",
    method: "POST" | "PUT",
    res: Resource,
    obj: T,
    opts: ObjectOptions,
    apply: (server: MemoryApiServer, copy: T) => T,
  ): Promise<T> {
    if (refusedByFence(opts)) return Promise.reject(new FencedError());
    const server = this.#server();
    const target: RuleTarget = {
      resource: res.plural,
      name: obj.metadata.name,
      subresource: "",
      namespace: opts.namespace ?? obj.metadata.namespace ?? "",
    };
    return this.#net.call(
      this.#client,
      verb,
      `${method} ${res.plural}/${obj.metadata.name}`,
      target,
      () => this.#net.write(this.#client, target, () => apply(server, structuredClone(obj))),
    );
  }

  patch<T extends KubeObject>(
    res: Resource,
    name: string,
    patch: Patch,
    opts: ObjectOptions & { subresource?: "status" } = {},
  ): Promise<T> {
    if (refusedByFence(opts)) return Promise.reject(new FencedError());
    const server = this.#server();
    const subresource = opts.subresource ?? "";
    const target: RuleTarget = {
      resource: res.plural,
      name,
      subresource,
      namespace: opts.namespace ?? "",
    };
    const body = structuredClone(patch);
    return this.#net.call(
      this.#client,
      "patch",
      `PATCH ${res.plural}/${name}${subresource ? `/${subresource}` : ""} ${
        JSON.stringify(body.body)
      }`,
      target,
      () =>
        this.#net.write(this.#client, target, () =>
          server.patch<T>(res, name, body, {
            namespace: opts.namespace ?? "",
            ...(subresource === "status" ? { subresource: "status" as const } : {}),
          })),
    );
  }

  delete(res: Resource, name: string, opts: ObjectOptions = {}): Promise<void> {
    if (refusedByFence(opts)) return Promise.reject(new FencedError());
    const server = this.#server();
    const ns = opts.namespace ?? "";
    const target: RuleTarget = { resource: res.plural, name, subresource: "", namespace: ns };
    return this.#net.call(
      this.#client,
      "delete",
      `DELETE ${res.plural}/${name}`,
      target,
      () => {
        this.#net.write(this.#client, target, () => server.delete(res, name, ns));
      },
    );
  }

  #server(): MemoryApiServer {
    return this.#store;
  }
}

/**
 * As the HTTP/1.1 transport does: a write's fence is asked at the moment its request would be
 * sent (here, when it enters the network), and a no sends nothing.
 */
function refusedByFence(opts: ObjectOptions): boolean {
  return opts.fence !== undefined && !opts.fence.valid();
}
