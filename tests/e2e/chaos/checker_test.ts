import assert from "node:assert/strict";
import { type AuditEvent, replicaUser } from "../cluster.ts";
import { type DriverCall, PUBLISH, UNPUBLISH } from "../driver_log.ts";
import { holderChanges, leaseWrites } from "../lease_terms.ts";
import { attributeCalls, type LoggedCall } from "../replica_calls.ts";
import {
  apiWrites,
  type ChaosRecord,
  checkChaos,
  type LifecycleRecord,
  vaWrites,
} from "./checker.ts";
import { replicaOfUser } from "./replica_users.ts";

const T0 = Date.parse("2026-11-28T05:00:00Z");
const iso = (ms: number) => new Date(T0 + ms).toISOString().replace("Z", "123Z");
const LEASE = "external-attacher-leader-x";
const FINALIZER = "external-attacher/x";

function leaseEvent(ms: number, holder: string, verb = "update"): AuditEvent {
  return {
    verb,
    requestURI: `/apis/coordination.k8s.io/v1/namespaces/default/leases/${LEASE}`,
    user: { username: "u" },
    objectRef: { resource: "leases", name: LEASE, namespace: "default" },
    responseStatus: { code: 200 },
    stage: "ResponseComplete",
    requestReceivedTimestamp: iso(ms - 5),
    stageTimestamp: iso(ms),
    responseObject: {
      metadata: { name: LEASE },
      spec: { holderIdentity: holder, leaseDurationSeconds: 6 },
    },
  };
}

function vaEvent(ms: number, va: string, finalizers: string[]): AuditEvent {
  return {
    verb: "patch",
    requestURI: `/apis/storage.k8s.io/v1/volumeattachments/${va}`,
    user: { username: "u" },
    objectRef: { resource: "volumeattachments", name: va },
    responseStatus: { code: 200 },
    stage: "ResponseComplete",
    requestReceivedTimestamp: iso(ms - 2),
    stageTimestamp: iso(ms),
    responseObject: { metadata: { name: va, finalizers } },
  };
}

/** A write of `user` as the Metadata level records it: no bodies. */
function writeEvent(
  ms: number,
  user: string,
  resource: string,
  name: string,
  { verb = "patch", subresource, code = 200, stage = "ResponseComplete" }: {
    verb?: string;
    subresource?: string;
    code?: number;
    stage?: string;
  } = {},
): AuditEvent {
  return {
    verb,
    requestURI: `/x/${resource}/${name}${subresource ? `/${subresource}` : ""}`,
    user: { username: user },
    objectRef: { resource, name, ...(subresource ? { subresource } : {}) },
    responseStatus: { code },
    stage,
    requestReceivedTimestamp: iso(ms),
    stageTimestamp: iso(ms + 3),
  };
}

const REPLICA_OF = replicaOfUser(["a", "b"]);
/** The audit log's user names of replicas a and b. */
const A = replicaUser("a");
const B = replicaUser("b");

/** a's writes inside its term (the last within the tolerance after it), b's inside its own. */
const WRITES: AuditEvent[] = [
  writeEvent(1_900, A, "persistentvolumes", "pv1"),
  writeEvent(2_000, A, "volumeattachments", "va1"),
  writeEvent(3_000, A, "volumeattachments", "va1", { subresource: "status" }),
  writeEvent(16_100, A, "volumeattachments", "va1", { code: 409 }),
  writeEvent(19_000, B, "volumeattachments", "va2"),
];

function served(ms: number, method: string, volume: string): DriverCall {
  return {
    time: T0 + ms,
    completed: T0 + ms,
    method,
    request: { volume_id: volume, node_id: "n" },
    response: {},
    error: "",
  };
}

function logged(ms: number, replica: string, method: string, volume: string): LoggedCall {
  return { replica, time: T0 + ms, method, volumeId: volume, nodeId: "n" };
}

/** a leads from 0 s (renewing each second until 10 s), b takes over at 17 s. */
const AUDIT: AuditEvent[] = [
  leaseEvent(0, "a", "create"),
  ...Array.from({ length: 10 }, (_, i) => leaseEvent((i + 1) * 1000, "a")),
  leaseEvent(17_000, "b"),
  leaseEvent(18_000, "b"),
  vaEvent(2_000, "va1", [FINALIZER]),
  vaEvent(4_000, "va1", []),
  vaEvent(19_000, "va2", [FINALIZER]),
];

function record(over: Partial<ChaosRecord> = {}): ChaosRecord {
  const lifecycles: LifecycleRecord[] = [
    { va: "va1", pv: "pv1", volumeId: "v1", attachedAt: T0 + 3_000, goneAt: T0 + 5_000 },
    { va: "va2", pv: "pv2", volumeId: "v2", attachedAt: T0 + 20_000, goneAt: T0 + 25_000 },
  ];
  return {
    leaseWrites: leaseWrites(AUDIT, LEASE),
    calls: attributeCalls(
      [served(2_500, PUBLISH, "v1"), served(3_900, UNPUBLISH, "v1"), served(19_500, PUBLISH, "v2")],
      [
        logged(2_499, "a", PUBLISH, "v1"),
        logged(3_899, "a", UNPUBLISH, "v1"),
        logged(19_499, "b", PUBLISH, "v2"),
      ],
    ),
    lifecycles,
    vaWrites: vaWrites(AUDIT),
    apiWrites: apiWrites(WRITES, REPLICA_OF),
    finalVas: new Map(),
    finalPublished: new Set(),
    finalizer: FINALIZER,
    ...over,
  };
}

Deno.test("leaseWrites() and holderChanges() read the holder timeline from the audit log", () => {
  const writes = leaseWrites(AUDIT, LEASE);
  assert.equal(writes.length, 13);
  assert.equal(writes[0]!.leaseDurationMs, 6_000);
  assert.deepEqual(holderChanges(writes).map((c) => [Math.round(c.at - T0), c.holder]), [
    [0, "a"],
    [17_000, "b"],
  ]);
});

Deno.test("checkChaos() passes a run where each call lies in its replica's term", () => {
  const { violations, figures } = checkChaos(record());
  assert.deepEqual(violations, []);
  assert.equal(figures.publishes, 2);
  assert.equal(figures.unpublishes, 1);
  assert.deepEqual([...figures.byReplica], [["a", 2], ["b", 1]]);
});

Deno.test("checkChaos() flags a call after the lease ran out and one after another took it", () => {
  const base = record();
  const { violations, figures } = checkChaos({
    ...base,
    calls: attributeCalls(
      [served(16_500, PUBLISH, "v2"), served(17_800, PUBLISH, "v2")],
      [logged(16_400, "a", PUBLISH, "v2"), logged(17_700, "a", PUBLISH, "v2")],
    ),
    vaWrites: vaWrites([vaEvent(1_000, "va2", [FINALIZER])]),
  });
  assert.deepEqual(violations.map((v) => v.kind), ["outside-term", "outside-term"]);
  assert.match(violations[0]!.detail, /lease had run out 0\.50 s before/);
  assert.match(violations[1]!.detail, /b had taken the Lease 0\.80 s before/);
  assert.equal(figures.outside.get("a")?.calls, 2);
  assert.equal(Math.round(figures.outside.get("a")!.latestMs), 800);
});

Deno.test("checkChaos() flags an unattributed call, a publish without or after our finalizer", () => {
  const { violations } = checkChaos(record({
    calls: attributeCalls(
      [served(1_500, PUBLISH, "v1"), served(4_500, PUBLISH, "v1"), served(5_000, PUBLISH, "v1")],
      [logged(1_400, "a", PUBLISH, "v1"), logged(4_400, "a", PUBLISH, "v1")],
    ),
  }));
  assert.deepEqual(violations.map((v) => v.kind), [
    "unattributed",
    "no-finalizer",
    "no-finalizer",
    "no-finalizer",
  ]);
  assert.match(violations[1]!.detail, /no write of ours stored before/);
  assert.match(violations[2]!.detail, /finalizer removed before/);
});

Deno.test("checkChaos() flags lifecycles not finished and driver state unlike the VA", () => {
  const { violations } = checkChaos(record({
    lifecycles: [
      { va: "va1", pv: "pv1", volumeId: "v1", attachedAt: T0 + 3_000, goneAt: T0 + 5_000 },
      { va: "va2", pv: "pv2", volumeId: "v2", error: "timed out" },
      { va: "va3", pv: "pv3", volumeId: "v3", attachedAt: T0 + 3_000 },
    ],
    finalVas: new Map([["va2", false], ["va3", true]]),
    finalPublished: new Set(["v1"]),
  }));
  assert.deepEqual(violations.map((v) => [v.kind, v.detail]), [
    ["not-final", "va2: never attached (timed out)"],
    ["not-final", "va3: attached, never gone"],
    ["driver-state", "volume v1 is published, its VolumeAttachment va1 is gone"],
    ["driver-state", "volume v3 is not published, its VolumeAttachment va3 is attached"],
  ]);
});

Deno.test("apiWrites() attributes each write of a VA, its status or a PV to its replica's user", () => {
  const writes = apiWrites([
    ...WRITES,
    leaseEvent(500, "a"),
    writeEvent(600, A, "leases", "l", { verb: "update" }),
    writeEvent(700, A, "events", "e", { verb: "create" }),
    writeEvent(800, A, "volumeattachments", "va1", { verb: "get" }),
    writeEvent(900, A, "volumeattachments", "va1", { stage: "Panic" }),
    writeEvent(1_000, "csi-attacher-e2e-admin", "volumeattachments", "va1"),
    writeEvent(1_100, B, "persistentvolumes", "pv9", { verb: "delete" }),
  ], REPLICA_OF);
  assert.deepEqual(
    writes.map((w) => [Math.round(w.received - T0), w.replica, w.verb, w.resource, w.name, w.code]),
    [
      [1_100, "b", "delete", "persistentvolumes", "pv9", 200],
      [1_900, "a", "patch", "persistentvolumes", "pv1", 200],
      [2_000, "a", "patch", "volumeattachments", "va1", 200],
      [3_000, "a", "patch", "volumeattachments/status", "va1", 200],
      [16_100, "a", "patch", "volumeattachments", "va1", 409],
      [19_000, "b", "patch", "volumeattachments", "va2", 200],
    ],
  );
});

Deno.test("checkChaos() passes writes inside their replica's term and counts them", () => {
  const { violations, figures } = checkChaos(record());
  assert.deepEqual(violations, []);
  assert.deepEqual([...figures.writes], [
    ["a", { checked: 4, outside: 0, heldByNetwork: 0, latestMs: 0 }],
    ["b", { checked: 1, outside: 0, heldByNetwork: 0, latestMs: 0 }],
  ]);
});

Deno.test("checkChaos() flags writes after the lease ran out, after another took it, before any", () => {
  const { violations, figures } = checkChaos(record({
    apiWrites: apiWrites([
      ...WRITES,
      writeEvent(16_600, A, "volumeattachments", "va1", { subresource: "status" }),
      // Refused (the test op of the finalizer patch failed), yet sent outside the term.
      writeEvent(17_800, A, "persistentvolumes", "pv1", { code: 422 }),
      writeEvent(5_000, B, "volumeattachments", "va1"),
    ], REPLICA_OF),
  }));
  assert.deepEqual(violations.map((v) => v.kind), [
    "write-outside-term",
    "write-outside-term",
    "write-outside-term",
  ]);
  assert.match(violations[0]!.detail, /^patch of volumeattachments va1 .* from b: it never held/);
  assert.match(
    violations[1]!.detail,
    /^patch of volumeattachments\/status va1 \(answered 200\) received at 05:00:16\.600 from a: its lease had run out 0\.60 s before$/,
  );
  assert.match(
    violations[2]!.detail,
    /^patch of persistentvolumes pv1 \(answered 422\) .* from a: b had taken the Lease 0\.80 s before$/,
  );
  assert.deepEqual(figures.writes.get("b"), {
    checked: 2,
    outside: 1,
    heldByNetwork: 0,
    latestMs: 0,
  });
  const a = figures.writes.get("a")!;
  assert.deepEqual([a.checked, a.outside, Math.round(a.latestMs)], [6, 2, 800]);
});

Deno.test("checkChaos() judges a call when it arrived, and counts one that ended after the term", () => {
  const base = record();
  const slow = { ...served(15_000, PUBLISH, "v3"), completed: T0 + 18_000 };
  const { violations, figures } = checkChaos({
    ...base,
    calls: attributeCalls(
      [slow, served(18_500, PUBLISH, "v3")],
      [logged(14_999, "a", PUBLISH, "v3"), logged(18_499, "b", PUBLISH, "v3")],
    ),
  });
  assert.deepEqual(violations.filter((v) => v.kind === "outside-term"), []);
  assert.equal(figures.lateCompletions.length, 1);
  const late = figures.lateCompletions[0]!;
  assert.equal(late.replica, "a");
  assert.equal(late.volumeId, "v3");
  assert.equal(late.pastEndMs, 1_000, "b took the Lease at 17 s, the call ended at 18 s");
  assert.equal(late.next, "ControllerPublishVolume for b received 0.50 s after it ended");
});

Deno.test("checkChaos() counts a write a partition held past the term, not one sent into it", () => {
  const base = record();
  // a's term ends at 16 s (its last renewal received at 9.995 s, 6 s lease); the write arrives at
  // 16.8 s, outside it.
  const late = apiWrites(
    [writeEvent(16_800, A, "volumeattachments", "va9")],
    REPLICA_OF,
  );
  const check = (from: number, until: number) =>
    checkChaos({
      ...base,
      apiWrites: late,
      networkHolds: [{ replica: "a", from: T0 + from, until: T0 + until }],
    });
  const held = check(14_000, 16_500);
  assert.deepEqual(held.violations.filter((v) => v.kind === "write-outside-term"), []);
  assert.equal(held.figures.writes.get("a")!.heldByNetwork, 1);
  // A hold that began after the term's end cannot excuse the write: it was sent outside the term.
  const after = check(16_500, 16_700);
  assert.equal(after.violations.filter((v) => v.kind === "write-outside-term").length, 1);
  // Nor one that ended long before the write arrived.
  const before = check(14_000, 15_000);
  assert.equal(before.violations.filter((v) => v.kind === "write-outside-term").length, 1);
  // Nor another replica's.
  const other = checkChaos({
    ...base,
    apiWrites: late,
    networkHolds: [{ replica: "b", from: T0 + 14_000, until: T0 + 16_500 }],
  });
  assert.equal(other.violations.filter((v) => v.kind === "write-outside-term").length, 1);
});
