/**
 * Leader election over real HTTP: two electors, each with its own KubeClient, against the
 * in-memory API server. Time is a FakeClock; the test steps it from timer to timer and waits
 * for the requests in flight to finish before each step.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { RecordingKubeObserver } from "../../testkit/fakes/recording_kube_observer.ts";
import { EVENTS, type KubeApi, LEASES } from "../kube/api.ts";
import { KubeClient } from "../kube/client.ts";
import { connectionFromKubeconfigs } from "../kube/config.ts";
import { LeaderElector } from "./elector.ts";
import { nullLogger } from "../observe/logger.ts";
import { EventRecorder } from "../events/recorder.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { formatMicroTime } from "../kube/time.ts";
import type { KubeObject, Lease } from "../kube/types.ts";

const NAME = "external-attacher-leader-csi-example-com";
const NAMESPACE = "kube-system";
const T0 = 1_700_000_000_000;
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** Counts the requests in flight through a KubeApi. */
class InFlight {
  count = 0;
  wrap(api: KubeApi): KubeApi {
    const track = <T>(p: Promise<T>): Promise<T> => {
      this.count++;
      return p.finally(() => this.count--);
    };
    return {
      list: (res, opts) => track(api.list(res, opts)),
      watch: (res, opts) => api.watch(res, opts),
      get: (res, name, opts) => track(api.get(res, name, opts)),
      create: (res, obj, opts) => track(api.create(res, obj, opts)),
      update: (res, obj, opts) => track(api.update(res, obj, opts)),
      patch: (res, name, patch, opts) => track(api.patch(res, name, patch, opts)),
      delete: (res, name, opts) => track(api.delete(res, name, opts)),
    };
  }

  /** Resolves once no request has been in flight for a few event-loop turns. */
  async idle(): Promise<void> {
    let quiet = 0;
    for (let i = 0; i < 2000 && quiet < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      quiet = this.count === 0 ? quiet + 1 : 0;
    }
    assert.equal(this.count, 0, "requests still in flight");
  }
}

Deno.test("LeaderElector over HTTP: one leader, release on cancel, takeover by the standby", async () => {
  await using server = await MemoryApiServer.start();
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  await using clientA = new KubeClient({ connection }, {});
  await using clientB = new KubeClient({ connection }, {});
  const clock = new FakeClock(T0);
  const inFlight = new InFlight();

  // Each replica's Event path, as runAttacher wires it: a recorder posting through its client.
  const stopEvents = new AbortController();
  const recorders: EventRecorder[] = [];
  const posting: Promise<void>[] = [];
  const elector = (kube: KubeApi, identity: string) => {
    const events = new EventRecorder({ kube: inFlight.wrap(kube), clock, log: nullLogger }, {
      component: "csi-attacher",
    });
    recorders.push(events);
    posting.push(events.run(stopEvents.signal));
    return new LeaderElector({
      kube: inFlight.wrap(kube),
      events,
      clock,
      log: nullLogger,
      random: () => 0,
    }, {
      name: NAME,
      namespace: NAMESPACE,
      identity,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 5_000,
      releaseOnCancel: true,
    });
  };
  const a = elector(clientA, "replica-a");
  const b = elector(clientB, "replica-b");
  const stopA = new AbortController();
  const stopB = new AbortController();
  const leading: string[] = [];
  const callbacks = (who: string) => ({
    onStartedLeading: (signal: AbortSignal) => {
      leading.push(who);
      return new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    },
    onStoppedLeading: () => assert.fail(`${who} lost the lease`),
  });

  /** Steps the clock from timer to timer up to `at`, letting the HTTP requests finish. */
  async function advanceTo(at: number): Promise<void> {
    await inFlight.idle();
    for (;;) {
      const next = clock.nextTimerAt();
      if (next === undefined || next > at) break;
      clock.advance(Math.max(0, next - clock.now()));
      await inFlight.idle();
    }
    clock.advance(at - clock.now());
    await inFlight.idle();
  }

  const runA = a.run(stopA.signal, callbacks("replica-a"));
  await inFlight.idle();
  const runB = b.run(stopB.signal, callbacks("replica-b"));
  await advanceTo(T0 + 12_000);
  assert.deepEqual(leading, ["replica-a"]);
  assert.equal(b.getLeader(), "replica-a");
  let lease = server.get<Lease>(LEASES, NAME, NAMESPACE);
  assert.equal(lease.spec.holderIdentity, "replica-a");
  assert.equal(lease.spec.renewTime, formatMicroTime(T0 + 10_000));
  assert.equal(lease.spec.leaseTransitions, 0);

  // A shuts down: it releases the lease and B takes it at its next attempt (+15 s).
  stopA.abort();
  await runA;
  await recorders[0]!.idle();
  lease = server.get<Lease>(LEASES, NAME, NAMESPACE);
  assert.equal(lease.spec.holderIdentity, "");
  assert.equal(lease.spec.leaseDurationSeconds, 1);
  await advanceTo(T0 + 15_000);
  assert.deepEqual(leading, ["replica-a", "replica-b"]);
  lease = server.get<Lease>(LEASES, NAME, NAMESPACE);
  assert.equal(lease.spec.holderIdentity, "replica-b");
  assert.equal(lease.spec.leaseTransitions, 1);
  assert.equal(lease.spec.acquireTime, formatMicroTime(T0 + 15_000));
  assert.match(lease.spec.renewTime ?? "", MICRO_TIME);

  // Every Lease write was a PUT or POST of the lease; the events went to the lease namespace.
  const writes = server.requests.filter((r) => r.resource === "leases" && r.verb !== "get");
  assert.ok(writes.every((r) => r.verb === "create" || r.verb === "update"));
  assert.equal(writes.filter((r) => r.verb === "create").length, 1);
  const messages = server.list<KubeObject & { message: string }>(EVENTS, NAMESPACE).items
    .map((e) => e.message).sort();
  assert.deepEqual(messages, [
    "replica-a became leader",
    "replica-a stopped leading",
    "replica-b became leader",
  ]);

  stopB.abort();
  await runB;
  for (const recorder of recorders) await recorder.idle();
  stopEvents.abort();
  await Promise.all(posting);
  await inFlight.idle();
  assert.equal(server.get<Lease>(LEASES, NAME, NAMESPACE).spec.holderIdentity, "");
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("a renewal throttled with 429 + Retry-After is retried within the renew deadline: the leader keeps the lease", async () => {
  await using server = await MemoryApiServer.start();
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver.kubeconfig", text: server.kubeconfig() },
  ]);
  const clock = new FakeClock(T0);
  // Tries in flight: a token is taken right before each try, which is reported when it ends.
  let tries = 0;
  await using client = new KubeClient({
    connection,
    clock,
    rateLimiter: {
      take: () => {
        tries++;
        return Promise.resolve();
      },
    },
    observer: new RecordingKubeObserver({ onTry: () => tries-- }),
  }, {});
  /** Steps the clock by 100 ms at a time, never while an HTTP request is in flight. */
  async function advanceTo(at: number): Promise<void> {
    while (clock.now() < at) {
      for (let i = 0; i < 2000 && tries > 0; i++) await new Promise((r) => setTimeout(r, 1));
      assert.equal(tries, 0, "a request is stuck");
      await new Promise((r) => setTimeout(r, 1));
      clock.advance(Math.min(100, at - clock.now()));
    }
  }
  const elector = new LeaderElector({ kube: client, clock, log: nullLogger, random: () => 0 }, {
    name: NAME,
    namespace: NAMESPACE,
    identity: "replica-a",
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 5_000,
    releaseOnCancel: false,
  });
  const stop = new AbortController();
  let lost = false;
  let leading = false;
  const running = elector.run(stop.signal, {
    onStartedLeading: (signal) => {
      leading = true;
      return new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    },
    onStoppedLeading: () => lost = true,
  });
  await advanceTo(T0 + 1_000);
  assert.ok(leading);

  // Every Lease request answered 429 for 6 tries: without retries the renewals at +5 s and
  // +10 s (an update and a get each) would all fail and the deadline at +15 s would end it.
  server.clearRequests();
  server.failNext({ resource: "leases", status: 429, retryAfterSeconds: 1, times: 6 });
  await advanceTo(T0 + 30_000);
  assert.equal(lost, false, "the lease was kept");
  assert.equal(elector.isLeader(), true);
  const lease = server.get<Lease>(LEASES, NAME, NAMESPACE);
  assert.equal(lease.spec.holderIdentity, "replica-a");
  assert.ok(Date.parse(lease.spec.renewTime ?? "") > T0 + 25_000, "renewed since");
  const updates = server.requests.filter((r) => r.resource === "leases" && r.method === "PUT");
  assert.ok(updates.length >= 7, `retried updates: ${updates.length}`);
  stop.abort();
  await running;
});
