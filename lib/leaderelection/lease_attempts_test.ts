import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { FakeLeaseStore } from "../../testkit/fakes/fake_lease_api.ts";
import { nullLogger } from "../observe/logger.ts";
import { formatMicroTime } from "../kube/time.ts";
import type { Lease } from "../kube/types.ts";
import { LeaseAttempts, type RequestSignal } from "./lease_attempts.ts";
import { LeaseLock } from "./lease_lock.ts";
import { ObservedRecord } from "./observed_record.ts";

const NAME = "external-attacher-leader-csi-example-com";
const NAMESPACE = "kube-system";
const T0 = 1_700_000_000_000;

/** One replica's attempts on the Lease of `store`, with what they reported. */
function attempts(store: FakeLeaseStore, clock: FakeClock, identity = "replica-a") {
  const api = store.client();
  const observed = new ObservedRecord(clock);
  const reported = { wrote: [] as number[], slowpath: 0 };
  const lock = new LeaseLock(api, { name: NAME, namespace: NAMESPACE, labels: undefined });
  const lease = new LeaseAttempts({
    lock,
    observed,
    clock,
    log: nullLogger,
    slowpathExercised: () => void reported.slowpath++,
    wrote: (startedAt) => void reported.wrote.push(startedAt),
  }, { identity, leaseDurationMs: 15_000 });
  return { api, observed, reported, lease };
}

/** A signal that never aborts, for one request. */
function request(): RequestSignal {
  return { signal: new AbortController().signal, done: () => {} };
}

function held(holderIdentity: string): Lease {
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: NAME, namespace: NAMESPACE },
    spec: {
      holderIdentity,
      leaseDurationSeconds: 15,
      acquireTime: "2000-01-01T00:00:00.000000Z",
      renewTime: "2000-01-01T00:00:00.000000Z",
      leaseTransitions: 3,
    },
  };
}

Deno.test("LeaseAttempts: a missing Lease is created naming this replica, the write reported", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const { api, lease, reported } = attempts(store, clock);
  assert.equal(await lease.tryAcquireOrRenew(request().signal), "ok");
  assert.deepEqual(api.takeRequests(), [`get leases/${NAME}`, `create leases/${NAME}`]);
  const stored = store.lease(NAMESPACE, NAME)!;
  assert.equal(stored.spec.holderIdentity, "replica-a");
  assert.equal(stored.spec.leaseDurationSeconds, lease.writtenSeconds());
  assert.equal(stored.spec.acquireTime, formatMicroTime(T0));
  assert.deepEqual(reported.wrote, [clock.now()]);
  assert.equal(lease.isLeader(), true);
});

Deno.test("LeaseAttempts: the leader renews on the fast path, a stale one on the slow path", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const { api, lease, reported } = attempts(store, clock);
  await lease.tryAcquireOrRenew(request().signal);
  api.takeRequests();
  clock.advance(2_000);
  assert.equal(await lease.tryAcquireOrRenew(request().signal), "ok");
  assert.deepEqual(api.takeRequests(), [`update leases/${NAME}`], "one optimistic update");
  assert.equal(reported.slowpath, 0);

  const current = store.lease(NAMESPACE, NAME)!;
  store.putLease({ ...current, metadata: { ...current.metadata, labels: { team: "storage" } } });
  clock.advance(2_000);
  assert.equal(await lease.tryAcquireOrRenew(request().signal), "ok");
  assert.deepEqual(api.takeRequests(), [
    `update leases/${NAME}`,
    `get leases/${NAME}`,
    `update leases/${NAME}`,
  ]);
  assert.equal(reported.slowpath, 1);
  const renewed = store.lease(NAMESPACE, NAME)!;
  assert.equal(renewed.spec.acquireTime, formatMicroTime(T0), "acquireTime kept");
  assert.equal(renewed.spec.renewTime, formatMicroTime(T0 + 4_000));
  assert.equal(reported.wrote.length, 3);
});

Deno.test("LeaseAttempts: another replica's valid lease is held; once unchanged for its duration, taken", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  store.putLease(held("other"));
  const { lease, reported } = attempts(store, clock);
  assert.equal(await lease.tryAcquireOrRenew(request().signal), "held");
  assert.equal(lease.isLeader(), false);
  assert.deepEqual(reported.wrote, []);
  clock.advance(15_001);
  assert.equal(await lease.tryAcquireOrRenew(request().signal), "ok");
  const taken = store.lease(NAMESPACE, NAME)!;
  assert.equal(taken.spec.holderIdentity, "replica-a");
  assert.equal(taken.spec.leaseTransitions, 4, "one more transition");
});

Deno.test("LeaseAttempts.release() hands the lease back, never over another holder's record", async () => {
  const clock = new FakeClock(T0);
  const store = new FakeLeaseStore();
  const { lease } = attempts(store, clock);
  await lease.tryAcquireOrRenew(request().signal);
  let requests = 0;
  await lease.release(() => (requests++, request()));
  assert.equal(requests, 2, "the read and the write, each under its own signal");
  const released = store.lease(NAMESPACE, NAME)!;
  assert.equal(released.spec.holderIdentity, "");
  assert.equal(released.spec.leaseDurationSeconds, 1);

  const again = attempts(store, clock, "replica-b");
  await again.lease.tryAcquireOrRenew(request().signal);
  const b = store.lease(NAMESPACE, NAME)!;
  store.putLease({ ...b, spec: { ...b.spec, holderIdentity: "replica-c" } });
  await again.lease.release(request);
  assert.equal(store.lease(NAMESPACE, NAME)!.spec.holderIdentity, "replica-c", "left as it was");
});
