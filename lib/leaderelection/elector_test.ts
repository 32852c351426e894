import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { ApiError } from "../kube/api.ts";
import {
  DEFAULT_HEALTH_CHECK_TIMEOUT_MS,
  type LeaderElectionMetrics,
  LeaderElector,
  type LeaderElectorOptions,
} from "./elector.ts";
import { nullLogger } from "../observe/logger.ts";
import { fenceMarginMs } from "./term_fence.ts";
import type { LeaseFence } from "../lease_fence.ts";
import { EventRecorder } from "../events/recorder.ts";
import { formatMicroTime } from "../kube/time.ts";
import type { Lease } from "../kube/types.ts";
import { type FakeLeaseApi, FakeLeaseStore } from "../../testkit/fakes/fake_lease_api.ts";

const NAME = "external-attacher-leader-csi-example-com";
const NAMESPACE = "kube-system";
const T0 = 1_700_000_000_000;
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** Lets every pending promise continuation run (the fake API resolves on microtasks). */
function flush(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Moves the fake clock forward by `ms`, from timer to timer, letting the electors react after
 * each one: every continuation runs at the exact time its timer fired.
 */
async function advance(clock: FakeClock, ms: number): Promise<void> {
  await advanceTo(clock, clock.now() + ms);
}

/** Advances to the absolute fake time `at`; see {@link advance}. */
async function advanceTo(clock: FakeClock, at: number): Promise<void> {
  assert.ok(at >= clock.now(), `cannot go back in time to ${at}`);
  await flush();
  for (;;) {
    const next = clock.nextTimerAt();
    if (next === undefined || next > at) break;
    clock.advance(Math.max(0, next - clock.now()));
    await flush();
  }
  clock.advance(at - clock.now());
  await flush();
}

class RecordingMetrics implements LeaderElectionMetrics {
  calls: string[] = [];
  setLeader(name: string, leading: boolean): void {
    this.calls.push(`setLeader(${name},${leading})`);
  }
  slowpathExercised(name: string): void {
    this.calls.push(`slowpath(${name})`);
  }
}

/** One replica under test: its own API client on the shared store, elector and callbacks. */
class Replica {
  readonly api: FakeLeaseApi;
  /** The replica's Event path (posting through its own API client), as `lib/run.ts` wires it. */
  readonly events: EventRecorder;
  readonly #stopEvents = new AbortController();
  readonly elector: LeaderElector;
  readonly metrics = new RecordingMetrics();
  readonly shutdown = new AbortController();
  started = 0;
  stopped = 0;
  newLeaders: string[] = [];
  leaderSignal: AbortSignal | undefined;
  /** The fence of each term, in order, as onStartedLeading got it. */
  readonly fences: LeaseFence[] = [];
  /** When set, the work keeps running after the leader signal aborts until this is called. */
  holdWork = false;
  #finishWork: (() => void) | undefined;
  #workError: unknown;
  #failWork: ((err: unknown) => void) | undefined;
  done: Promise<void> | undefined;
  result: "pending" | "resolved" | "rejected" = "pending";
  error: unknown;

  constructor(
    store: FakeLeaseStore,
    clock: FakeClock,
    identity: string,
    extra: Partial<LeaderElectorOptions> = {},
  ) {
    this.api = store.client();
    this.events = new EventRecorder({ kube: this.api, clock, log: nullLogger }, {
      component: "csi-attacher",
    });
    this.elector = new LeaderElector({
      kube: this.api,
      events: this.events,
      clock,
      log: nullLogger,
      metrics: this.metrics,
      random: () => 0,
    }, {
      name: NAME,
      namespace: NAMESPACE,
      identity,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 5_000,
      releaseOnCancel: false,
      ...extra,
    });
  }

  /** The current term's fence: false before the first term. */
  fenceValid(): boolean {
    return this.fences.at(-1)?.valid() ?? false;
  }

  start(): this {
    const posting = this.events.run(this.#stopEvents.signal);
    this.done = this.elector.run(this.shutdown.signal, {
      onStartedLeading: (signal, fence) => {
        this.started++;
        this.leaderSignal = signal;
        this.fences.push(fence);
        return new Promise<void>((resolve, reject) => {
          this.#finishWork = resolve;
          this.#failWork = reject;
          signal.addEventListener("abort", () => {
            if (!this.holdWork) resolve();
          });
        });
      },
      onStoppedLeading: () => this.stopped++,
      onNewLeader: (identity) => this.newLeaders.push(identity),
    }).finally(async () => {
      // As runAttacher does: the Events queued by the end of the run are posted, then it stops.
      await this.events.idle();
      this.#stopEvents.abort();
      await posting;
    }).then(
      () => {
        this.result = "resolved";
      },
      (err) => {
        this.result = "rejected";
        this.error = err;
      },
    );
    return this;
  }

  finishWork(): void {
    this.#finishWork?.();
  }

  failWork(err: unknown): void {
    this.#workError = err;
    this.#failWork?.(this.#workError);
  }
}

function storedLease(store: FakeLeaseStore): Lease {
  const lease = store.lease(NAMESPACE, NAME);
  assert.ok(lease, "the Lease exists");
  return lease;
}

/** A Lease held by a replica that is not under test. */
function foreignLease(spec: Partial<Lease["spec"]>, labels?: Record<string, string>): Lease {
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: NAME, namespace: NAMESPACE, ...(labels ? { labels } : {}) },
    spec: {
      holderIdentity: "other",
      leaseDurationSeconds: 15,
      acquireTime: "2000-01-01T00:00:00.000000Z",
      renewTime: "2000-01-01T00:00:00.000000Z",
      leaseTransitions: 3,
      ...spec,
    },
  };
}

/** Ends the replicas' runs and waits for them. */
async function stopAll(clock: FakeClock, ...replicas: Replica[]): Promise<void> {
  for (const r of replicas) {
    r.shutdown.abort();
    r.finishWork();
  }
  for (let i = 0; i < 200 && replicas.some((r) => r.result === "pending"); i++) {
    await advance(clock, 1000);
  }
  assert.deepEqual(replicas.map((r) => r.result === "pending"), replicas.map(() => false));
  assert.equal(clock.pendingTimers(), 0, "no timer left behind");
}

Deno.test("LeaderElector: of two replicas started together exactly one leads", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  const b = new Replica(store, clock, "replica-b").start();
  await flush();
  for (let t = 0; t < 60_000; t += 1000) {
    await advance(clock, 1000);
    assert.equal(Number(a.elector.isLeader()) + Number(b.elector.isLeader()), 1, `at +${t}`);
  }
  const [leader, standby] = a.elector.isLeader() ? [a, b] : [b, a];
  assert.equal(leader.started, 1);
  assert.equal(standby.started, 0);
  const lease = storedLease(store);
  assert.equal(lease.spec.holderIdentity, leader.elector.getLeader());
  assert.equal(standby.elector.getLeader(), leader.elector.getLeader());
  assert.equal(lease.spec.leaseTransitions, 0);
  assert.equal(lease.spec.leaseDurationSeconds, 15);
  assert.deepEqual(standby.newLeaders, [leader.elector.getLeader()]);
  // The loser of the create race got 409 AlreadyExists and only reads since.
  const standbyVerbs = standby.api.requests.map((r) => r.verb);
  assert.deepEqual(standbyVerbs.slice(0, 2), ["get", "create"]);
  assert.ok(standbyVerbs.slice(2).every((v) => v === "get"));
  assert.deepEqual(leader.metrics.calls, [`setLeader(${NAME},true)`]);
  assert.deepEqual(standby.metrics.calls, []);
  await stopAll(clock, a, b);
  assert.equal(a.stopped + b.stopped, 0, "cancellation is not a loss");
});

for (
  const [title, renewTime] of [
    ["far in the past", "2000-01-01T00:00:00.000000Z"],
    ["far in the future", "2999-12-31T23:59:59.999999Z"],
    ["equal to the local clock", formatMicroTime(T0)],
  ] as const
) {
  Deno.test(`LeaderElector: a standby waits a whole lease duration of its own clock (remote renewTime ${title})`, async () => {
    const clock = new FakeClock(T0);
    const store = new FakeLeaseStore();
    store.putLease(foreignLease({ renewTime, acquireTime: renewTime }));
    const b = new Replica(store, clock, "replica-b").start();
    await advanceTo(clock, T0 + 14_999);
    assert.equal(b.elector.isLeader(), false);
    assert.equal(b.elector.getLeader(), "other");
    assert.equal(b.started, 0);
    await advanceTo(clock, T0 + 15_000);
    assert.equal(b.elector.isLeader(), true);
    assert.equal(b.started, 1);
    const lease = storedLease(store);
    assert.equal(lease.spec.holderIdentity, "replica-b");
    assert.equal(lease.spec.leaseTransitions, 4, "transitions go up when the holder changes");
    assert.equal(lease.spec.acquireTime, formatMicroTime(T0 + 15_000));
    assert.deepEqual(b.newLeaders, ["other", "replica-b"]);
    await stopAll(clock, b);
  });
}

Deno.test("LeaderElector: a standby never takes over while the record keeps changing, whatever times it holds", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  store.putLease(foreignLease({}));
  const b = new Replica(store, clock, "replica-b").start();
  await flush();
  // The holder renews every 5 s (at +2.5 s, +7.5 s, ...) but its clock is a year behind.
  let lastChange = 0;
  for (let i = 0; i < 12; i++) {
    await advanceTo(clock, T0 + 2_500 + i * 5_000);
    const skewed = formatMicroTime(T0 - 365 * 86_400_000 + i * 5_000);
    store.putLease({
      ...storedLease(store),
      spec: { ...storedLease(store).spec, renewTime: skewed },
    });
    lastChange = clock.now();
    assert.equal(b.elector.isLeader(), false);
  }
  // B sees the last change at its next attempt (+60 s) and takes over 15 s of its time later.
  const observedAt = Math.ceil((lastChange - T0) / 5_000) * 5_000 + T0;
  await advanceTo(clock, observedAt + 14_999);
  assert.equal(b.elector.isLeader(), false);
  await advanceTo(clock, observedAt + 15_000);
  assert.equal(b.elector.isLeader(), true);
  await stopAll(clock, b);
});

Deno.test("LeaderElector: a leader whose writes fail stops leading before its lease could pass", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  assert.equal(a.elector.isLeader(), true);
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 10_000);
  // A renewed at +10 s; from now on every write of A fails.
  a.api.onRequest = (req) =>
    req.verb === "update" ? new ApiError(500, "InternalError", "etcd is down") : undefined;
  // The round starting at +15 s tries at +15 s and +20 s; client-go would give up at its renew
  // deadline, +25 s, but the lease renewed by the request that started at +10 s could pass to
  // B at +25 s: the fence closes a margin (1 s) before, at +24 s.
  await advanceTo(clock, T0 + 23_999);
  assert.equal(a.stopped, 0);
  assert.equal(a.leaderSignal?.aborted, false);
  assert.equal(a.fenceValid(), true);
  await advanceTo(clock, T0 + 24_000);
  assert.equal(a.stopped, 1, "onStoppedLeading is called once");
  assert.equal(a.fenceValid(), false);
  assert.equal(a.leaderSignal?.aborted, true);
  await flush();
  assert.equal(a.result, "resolved");
  assert.deepEqual(a.metrics.calls.filter((c) => c.startsWith("setLeader")), [
    `setLeader(${NAME},true)`,
    `setLeader(${NAME},false)`,
  ]);
  // B sees A's last renewal (+10 s) at its attempt at +10 s or +15 s, depending on which
  // timer fires first, and takes over 15 s later.
  await advanceTo(clock, T0 + 30_000);
  assert.equal(b.elector.isLeader(), true);
  assert.equal(storedLease(store).spec.holderIdentity, "replica-b");
  assert.equal(storedLease(store).spec.leaseTransitions, 1);
  await stopAll(clock, a, b);
});

Deno.test("LeaderElector: a renewal that hangs is cut off when the fence closes", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  a.api.onRequest = (req) => req.resource === "leases" ? "hang" : undefined;
  // Acquired at +0 s; the renewal at +5 s hangs; the fence closes at +14 s, before the renew
  // deadline (+15 s).
  await advanceTo(clock, T0 + 13_999);
  assert.equal(a.stopped, 0);
  assert.equal(a.api.hanging, 1);
  await advanceTo(clock, T0 + 14_000);
  assert.equal(a.stopped, 1);
  assert.equal(a.api.hanging, 0, "the hanging request was aborted");
  await stopAll(clock, a);
});

Deno.test("LeaderElector: release on cancel lets the standby acquire at its next attempt", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a", { releaseOnCancel: true }).start();
  await flush();
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 7_000);
  const before = storedLease(store);
  a.shutdown.abort();
  await flush();
  assert.equal(a.result, "resolved");
  assert.equal(a.stopped, 0, "onStoppedLeading is only for a lost lease");
  const released = storedLease(store);
  assert.deepEqual(released.spec, {
    holderIdentity: "",
    leaseDurationSeconds: 1,
    acquireTime: formatMicroTime(T0 + 7_000),
    renewTime: formatMicroTime(T0 + 7_000),
    leaseTransitions: before.spec.leaseTransitions,
  });
  assert.equal(a.elector.isLeader(), false);
  assert.deepEqual(a.metrics.calls, [`setLeader(${NAME},true)`, `setLeader(${NAME},false)`]);
  // B's next attempt is at +10 s.
  await advanceTo(clock, T0 + 9_999);
  assert.equal(b.elector.isLeader(), false);
  await advanceTo(clock, T0 + 10_000);
  assert.equal(b.elector.isLeader(), true);
  assert.equal(storedLease(store).spec.leaseTransitions, 1);
  assert.deepEqual(b.newLeaders, ["replica-a", "replica-b"]);
  await stopAll(clock, b);
});

Deno.test("LeaderElector: without releaseOnCancel the lease stays held until it expires", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 7_000);
  a.shutdown.abort();
  await flush();
  assert.equal(a.result, "resolved");
  assert.equal(storedLease(store).spec.holderIdentity, "replica-a");
  // A's last renewal was at +5 s; B saw it at +5 s and takes over at +20 s.
  await advanceTo(clock, T0 + 19_999);
  assert.equal(b.elector.isLeader(), false);
  await advanceTo(clock, T0 + 20_000);
  assert.equal(b.elector.isLeader(), true);
  await stopAll(clock, b);
});

Deno.test("LeaderElector: on cancel it keeps renewing until the work has finished, then releases", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a", { releaseOnCancel: true }).start();
  a.holdWork = true;
  await flush();
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 1_000);
  a.shutdown.abort();
  await flush();
  assert.equal(a.leaderSignal?.aborted, true, "the work is told to stop");
  // The work drains for 40 s, far beyond the lease duration: A keeps the lease meanwhile.
  await advanceTo(clock, T0 + 41_000);
  assert.equal(a.result, "pending");
  assert.equal(b.elector.isLeader(), false);
  assert.equal(storedLease(store).spec.holderIdentity, "replica-a");
  assert.equal(storedLease(store).spec.renewTime, formatMicroTime(T0 + 40_000));
  a.finishWork();
  await flush();
  assert.equal(a.result, "resolved");
  assert.equal(storedLease(store).spec.holderIdentity, "");
  await advanceTo(clock, T0 + 45_000);
  assert.equal(b.elector.isLeader(), true);
  await stopAll(clock, b);
});

Deno.test("LeaderElector: a 409 on the fast path falls back to a fresh read and renews", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  await advanceTo(clock, T0 + 1_000);
  // Someone else edits the Lease (a new label): the resourceVersion A holds is stale.
  const lease = storedLease(store);
  store.putLease({ ...lease, metadata: { ...lease.metadata, labels: { team: "storage" } } });
  a.api.takeRequests();
  await advanceTo(clock, T0 + 5_000);
  assert.deepEqual(a.api.takeRequests(), [
    `update leases/${NAME}`,
    `get leases/${NAME}`,
    `update leases/${NAME}`,
  ]);
  assert.equal(a.elector.isLeader(), true);
  const renewed = storedLease(store);
  assert.equal(renewed.spec.renewTime, formatMicroTime(T0 + 5_000));
  assert.equal(renewed.spec.acquireTime, lease.spec.acquireTime, "acquireTime is kept");
  assert.equal(renewed.spec.leaseTransitions, 0);
  assert.deepEqual(renewed.metadata.labels, { team: "storage" }, "other writers' labels are kept");
  assert.ok(a.metrics.calls.includes(`slowpath(${NAME})`));
  await stopAll(clock, a);
});

Deno.test("LeaderElector: of two replicas racing for an expired lease exactly one wins", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  store.putLease(foreignLease({ leaseTransitions: 7 }));
  const a = new Replica(store, clock, "replica-a").start();
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 15_000);
  assert.equal(Number(a.elector.isLeader()) + Number(b.elector.isLeader()), 1);
  const loser = a.elector.isLeader() ? b : a;
  assert.ok(
    loser.api.requests.some((r) => r.verb === "update"),
    "the loser tried to update and got 409",
  );
  assert.equal(storedLease(store).spec.leaseTransitions, 8);
  await advanceTo(clock, T0 + 60_000);
  assert.equal(Number(a.elector.isLeader()) + Number(b.elector.isLeader()), 1);
  assert.equal(storedLease(store).spec.leaseTransitions, 8);
  await stopAll(clock, a, b);
});

Deno.test("LeaderElector: every time written is a MicroTime with six fraction digits", async () => {
  const clock = new FakeClock(T0 + 0.25);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a", { releaseOnCancel: true }).start();
  await advance(clock, 12_345);
  const writes = a.api.requests.filter((r) => r.verb !== "get" && r.resource === "leases");
  a.shutdown.abort();
  await flush();
  writes.push(...a.api.requests.filter((r) => r.verb === "update").slice(-1));
  assert.ok(writes.length >= 4);
  for (const req of writes) {
    const spec = (req.body as Lease).spec;
    assert.match(spec.acquireTime ?? "", MICRO_TIME);
    assert.match(spec.renewTime ?? "", MICRO_TIME);
  }
  assert.equal((writes[0]?.body as Lease).spec.acquireTime, "2023-11-14T22:13:20.000250Z");
  await stopAll(clock, a);
});

Deno.test("LeaderElector: labels are put on a created Lease and merged into a taken-over one", async () => {
  const labels = { "app.kubernetes.io/name": "csi-attacher", tier: "control" };
  const clock = new FakeClock(T0);
  const created = new FakeLeaseStore();
  const a = new Replica(created, clock, "replica-a", { labels }).start();
  await advance(clock, 6_000);
  assert.deepEqual(storedLease(created).metadata.labels, labels);
  await stopAll(clock, a);

  const taken = new FakeLeaseStore();
  taken.putLease(foreignLease({ holderIdentity: "" }, { keep: "me", tier: "old" }));
  const b = new Replica(taken, clock, "replica-b", { labels }).start();
  await flush();
  assert.equal(b.elector.isLeader(), true, "an empty holder is taken at once");
  assert.deepEqual(storedLease(taken).metadata.labels, { keep: "me", ...labels });
  await stopAll(clock, b);
});

Deno.test("LeaderElector.healthCheck() fails once the leader has not renewed for leaseDuration + 20 s", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 10_000);
  assert.equal(a.elector.healthCheck(), undefined);
  a.api.onRequest = () => new ApiError(0, "", "connection refused");
  await advanceTo(clock, T0 + 10_000 + 15_000 + DEFAULT_HEALTH_CHECK_TIMEOUT_MS);
  assert.equal(a.stopped, 1);
  assert.equal(a.elector.isLeader(), true, "its last observed record still names it");
  assert.equal(a.elector.healthCheck(), undefined, "exactly leaseDuration + 20 s is still ok");
  clock.advance(1);
  const err = a.elector.healthCheck();
  assert.ok(err instanceof Error);
  assert.equal(err.message, `failed election to renew leadership on lease ${NAME}`);
  assert.equal(b.elector.isLeader(), true);
  assert.equal(b.elector.healthCheck(), undefined);
  const c = new Replica(store, new FakeClock(T0 + 1e12), "replica-c");
  assert.equal(c.elector.healthCheck(), undefined, "non-leaders are always ok");
  await stopAll(clock, a, b);
});

Deno.test("LeaderElector emits LeaderElection events and only logs when that fails", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a", { releaseOnCancel: true }).start();
  await flush();
  await stopAll(clock, a);
  assert.deepEqual(
    store.events.map((e) => [
      e.metadata.namespace,
      (e as unknown as { reason: string }).reason,
      (e as unknown as { message: string }).message,
      (e as unknown as { involvedObject: { kind: string; name: string } }).involvedObject.kind,
      (e as unknown as { source: { component: string } }).source.component,
    ]),
    [
      [NAMESPACE, "LeaderElection", "replica-a became leader", "Lease", `${NAME}/replica-a`],
      [NAMESPACE, "LeaderElection", "replica-a stopped leading", "Lease", `${NAME}/replica-a`],
    ],
  );

  const failing = new FakeLeaseStore();
  const b = new Replica(failing, clock, "replica-b");
  b.api.onRequest = (req) =>
    req.resource === "events" ? new ApiError(403, "Forbidden", "events is forbidden") : undefined;
  b.start();
  await flush();
  assert.equal(b.elector.isLeader(), true);
  assert.equal(failing.events.length, 0);
  await stopAll(clock, b);
});

Deno.test("LeaderElector.run() resolves without leading when the signal aborts first", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a");
  a.api.onRequest = () => "hang";
  a.start();
  await flush();
  assert.equal(a.api.hanging, 1);
  a.shutdown.abort();
  await flush();
  assert.equal(a.result, "resolved");
  assert.equal(a.api.hanging, 0);
  assert.equal(a.started + a.stopped, 0);
  assert.equal(clock.pendingTimers(), 0);

  const pre = new Replica(store, clock, "replica-b");
  pre.shutdown.abort();
  pre.start();
  await flush();
  assert.equal(pre.result, "resolved");
  assert.deepEqual(pre.api.requests, []);
});

Deno.test("LeaderElector: acquire attempts are jittered by up to 1.2 retry periods", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  store.putLease(foreignLease({ leaseDurationSeconds: 3600 }));
  const api = store.client();
  const randoms = [0.5, 1, 0];
  const elector = new LeaderElector({
    kube: api,
    clock,
    log: nullLogger,
    random: () => randoms.shift() ?? 0,
  }, {
    name: NAME,
    namespace: NAMESPACE,
    identity: "replica-a",
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 5_000,
    releaseOnCancel: false,
  });
  const shutdown = new AbortController();
  const times: number[] = [];
  api.onRequest = () => {
    times.push(clock.now() - T0);
    return undefined;
  };
  const done = elector.run(shutdown.signal, {
    onStartedLeading: () => {},
    onStoppedLeading: () => {},
  });
  await advance(clock, 40_000);
  assert.deepEqual(times, [0, 8_000, 19_000, 24_000, 29_000, 34_000, 39_000]);
  shutdown.abort();
  await done;
});

Deno.test("LeaderElector.run() rejects when the leader's work fails, without releasing", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a", { releaseOnCancel: true }).start();
  await advance(clock, 6_000);
  const boom = new Error("controller crashed");
  a.failWork(boom);
  await flush();
  assert.equal(a.result, "rejected");
  assert.equal(a.error, boom);
  assert.equal(a.leaderSignal?.aborted, true);
  assert.equal(storedLease(store).spec.holderIdentity, "replica-a");
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("LeaderElector.run() refuses a second concurrent run", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  await assert.rejects(
    () =>
      a.elector.run(new AbortController().signal, { onStartedLeading() {}, onStoppedLeading() {} }),
    { message: "Cannot run leader elector: it is already running" },
  );
  await stopAll(clock, a);
});

Deno.test("LeaderElector validates its timing as client-go does", () => {
  const base: LeaderElectorOptions = {
    name: NAME,
    namespace: NAMESPACE,
    identity: "a",
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 5_000,
    releaseOnCancel: false,
  };
  const deps = { kube: new FakeLeaseStore().client(), log: nullLogger };
  const cases: Array<[Partial<LeaderElectorOptions>, ErrorConstructor, string]> = [
    [{ leaseDurationMs: 10_000 }, RangeError, "leaseDuration must be greater than renewDeadline"],
    [
      { renewDeadlineMs: 6_000 },
      RangeError,
      "renewDeadline must be greater than retryPeriod*JitterFactor",
    ],
    [{ retryPeriodMs: 0 }, RangeError, "retryPeriod must be greater than zero"],
    [
      { leaseDurationMs: 0, renewDeadlineMs: -1, retryPeriodMs: -2 },
      RangeError,
      "leaseDuration must be greater than zero",
    ],
    [
      { leaseDurationMs: Number.NaN },
      RangeError,
      "Cannot create leader elector: leaseDurationMs must be a finite number",
    ],
    [{ identity: "" }, TypeError, "Lock identity is empty"],
    [{ namespace: "" }, TypeError, "Cannot create leader elector: lease namespace is empty"],
  ];
  for (const [change, type, message] of cases) {
    assert.throws(() => new LeaderElector(deps, { ...base, ...change }), {
      name: type.name,
      message,
    });
  }
  // 1.2 × 5 s = 6 s: a renew deadline just above is fine.
  new LeaderElector(deps, { ...base, renewDeadlineMs: 6_001 });
});

Deno.test("LeaderElector: a leader keeps its lease when the wall clock steps back an hour", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 7_000);
  assert.equal(a.elector.isLeader(), true);
  clock.stepWall(-3_600_000);
  assert.equal(a.fenceValid(), true, "the fence reads the monotonic clock only");
  clock.stepWall(2 * 86_400_000);
  assert.equal(a.fenceValid(), true);
  clock.stepWall(-2 * 86_400_000);
  await advanceTo(clock, T0 + 67_000);
  assert.equal(a.elector.isLeader(), true);
  assert.equal(a.fenceValid(), true);
  assert.equal(a.stopped, 0);
  assert.equal(b.elector.isLeader(), false);
  assert.equal(a.elector.healthCheck(), undefined);
  // The renewals wrote the (stepped) wall time.
  assert.equal(storedLease(store).spec.renewTime, formatMicroTime(T0 + 65_000 - 3_600_000));
  await stopAll(clock, a, b);
});

Deno.test("LeaderElector: a standby's failover is not delayed by a wall clock step", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 7_000);
  a.shutdown.abort();
  await flush();
  assert.equal(a.result, "resolved");
  // A's last renewal was at +5 s; B saw it at +5 s and takes over at +20 s whatever the wall
  // clock says in between.
  clock.stepWall(-3_600_000);
  await advanceTo(clock, T0 + 19_999);
  assert.equal(b.elector.isLeader(), false);
  await advanceTo(clock, T0 + 20_000);
  assert.equal(b.elector.isLeader(), true);
  await stopAll(clock, b);
});

Deno.test("LeaderElector: after a pause past the lease the fence is closed before any timer or request", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  await advanceTo(clock, T0 + 5_000); // renewed by the request that started at +5 s
  assert.equal(a.fenceValid(), true);
  a.api.takeRequests();
  // Stopped for 10 s: the fence opened by the +5 s renewal closes at +19 s (15 s − 1 s margin).
  clock.pause(14_000 - 1);
  assert.equal(a.fenceValid(), true, "a pause shorter than the fence costs nothing");
  clock.pause(1);
  assert.equal(a.fenceValid(), false);
  assert.equal(a.leaderSignal?.aborted, true, "the leader signal aborts at the first question");
  assert.deepEqual(a.api.takeRequests(), [], "before any request");
  assert.equal(a.fenceValid(), false, "and it stays closed");
  await advance(clock, 0); // the late timers fire: no renewal of a term that is over
  assert.equal(a.stopped, 1);
  assert.equal(a.result, "resolved");
  assert.deepEqual(a.api.takeRequests().filter((r) => r.includes("leases/")), []);
  assert.deepEqual(a.metrics.calls.filter((c) => c.startsWith("setLeader")), [
    `setLeader(${NAME},true)`,
    `setLeader(${NAME},false)`,
  ]);
  await stopAll(clock, a);
});

Deno.test("LeaderElector: a pause shorter than the fence, then a late renewal, keeps the term", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  // Stopped 4 s before its renewal at +5 s: it renews late, at +9 s, and goes on.
  await advanceTo(clock, T0 + 1_000);
  clock.pause(8_000);
  await advance(clock, 0);
  assert.equal(a.fenceValid(), true);
  await advanceTo(clock, T0 + 60_000);
  assert.equal(a.stopped, 0);
  assert.equal(a.leaderSignal?.aborted, false);
  assert.equal(a.fenceValid(), true);
  await stopAll(clock, a);
});

Deno.test("LeaderElector: a renewal that reads the Lease held by another replica stops at once", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  await advanceTo(clock, T0 + 5_000);
  // Another replica wrote the Lease (A was stopped, say, and its lease taken over).
  store.putLease(foreignLease({ leaseTransitions: 1 }));
  await advanceTo(clock, T0 + 9_999);
  assert.equal(a.stopped, 0, "nothing is known before the next renewal");
  await advanceTo(clock, T0 + 10_000);
  // The fast-path update fails with 409, the fresh read names "other": stop, without polling
  // on until the renew deadline (+20 s).
  assert.equal(a.stopped, 1);
  assert.equal(a.leaderSignal?.aborted, true);
  assert.equal(a.fenceValid(), false);
  assert.equal(a.elector.getLeader(), "other");
  assert.equal(storedLease(store).spec.holderIdentity, "other", "A never wrote it back");
  assert.equal(a.result, "resolved");
  await stopAll(clock, a);
});

Deno.test("LeaderElector: failed renewals within the fence keep the term", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await flush();
  const b = new Replica(store, clock, "replica-b").start();
  // The first two updates fail (500): the fast-path and slow-path updates of the attempt at
  // +5 s. The attempt at +10 s succeeds: the fence opened at +0 s would have closed at +14 s.
  let failures = 0;
  a.api.onRequest = (req) => {
    if (req.verb !== "update" && req.verb !== "get") return undefined;
    if (clock.now() < T0 + 10_001 && failures < 2 && req.verb === "update") {
      failures++;
      return new ApiError(500, "InternalError", "etcd is down");
    }
    return undefined;
  };
  await advanceTo(clock, T0 + 4_000);
  assert.equal(a.fenceValid(), true);
  await advanceTo(clock, T0 + 13_000);
  assert.equal(failures, 2);
  assert.equal(a.fenceValid(), true);
  assert.equal(a.stopped, 0);
  a.api.onRequest = undefined;
  await advanceTo(clock, T0 + 60_000);
  assert.equal(a.stopped, 0);
  assert.equal(a.fenceValid(), true);
  assert.equal(b.elector.isLeader(), false);
  await stopAll(clock, a, b);
});

Deno.test("LeaderElector: the fence follows the duration written into the Lease, minus the margin", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  // 2.9 s is written as 2 s: the other replicas count 2 s; the margin is 200 ms.
  const a = new Replica(store, clock, "replica-a", {
    leaseDurationMs: 2_900,
    renewDeadlineMs: 2_000,
    retryPeriodMs: 500,
  }).start();
  await flush();
  assert.equal(fenceMarginMs(2), 200);
  assert.equal(fenceMarginMs(15), 1000);
  assert.equal(fenceMarginMs(137), 1000);
  a.api.onRequest = (req) => req.resource === "leases" ? "hang" : undefined;
  await advanceTo(clock, T0 + 1_799);
  assert.equal(a.fenceValid(), true);
  await advanceTo(clock, T0 + 1_800);
  assert.equal(a.fenceValid(), false);
  assert.equal(a.stopped, 1);
  await stopAll(clock, a);
});

Deno.test("LeaderElector: the fence is closed to a replica that does not lead", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  store.putLease(foreignLease({}));
  const b = new Replica(store, clock, "replica-b").start();
  await advanceTo(clock, T0 + 5_000);
  assert.equal(b.elector.isLeader(), false);
  assert.equal(b.fenceValid(), false);
  assert.equal(b.started, 0, "no term, no fence handed out");
  await stopAll(clock, b);
});

Deno.test("LeaderElector: each term hands its own fence to the work, closed for good when the term ends", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const a = new Replica(store, clock, "replica-a").start();
  await advance(clock, 1_000);
  assert.equal(a.started, 1);
  const first = a.fences[0]!;
  assert.equal(first.valid(), true);
  await stopAll(clock, a);
  assert.equal(first.valid(), false, "the term ended, the lease not yet lapsed");
  // A second run of the same elector: a new term with a new fence; the first stays closed.
  const fences: LeaseFence[] = [];
  const shutdown = new AbortController();
  const done = a.elector.run(shutdown.signal, {
    onStartedLeading: (_signal, fence) => {
      fences.push(fence);
    },
    onStoppedLeading: () => {},
  });
  await advance(clock, 1_000);
  assert.equal(fences.length, 1);
  const second = fences[0]!;
  assert.notEqual(second, first);
  assert.equal(second.valid(), true);
  assert.equal(first.valid(), false, "a later term does not reopen an earlier one");
  shutdown.abort();
  await advance(clock, 1_000);
  await done;
  assert.equal(second.valid(), false);
});
