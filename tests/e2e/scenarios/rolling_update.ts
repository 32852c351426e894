/**
 * Scenario 17: a rolling update from the Go csi-attacher to ours and back, both replicas in the
 * same Lease election (`external-attacher-leader-<driver>`), as a Deployment's rolling update
 * runs them for a while.
 *
 * 1. The Go csi-attacher leads and attaches; ours, started next, waits for the Lease and makes no
 *    call to the driver beyond the start-up ones (Probe, GetPluginInfo, the capabilities). As a
 *    Deployment's rolling update (maxUnavailable 0) waits for the new pod's readiness probe before
 *    it stops an old one, the Go replica is stopped only once ours' `/healthz` answers ok as a
 *    standby (`/healthz/leader-election` too). The Go sidecar serves no `/healthz`: its
 *    replacement in step 3 is waited for by its log line instead.
 * 2. The Go replica gets SIGTERM. v4.13.0 keeps its Lease unless its `ReleaseLeaderElectionOnExit`
 *    gate is on (external-attacher `cmd/csi-attacher/main.go`; it is off by default), so ours takes
 *    over once the lease has expired. Meanwhile work piles up: some of the Go replica's
 *    VolumeAttachments are deleted, new ones created. Ours detaches the former and attaches the
 *    latter.
 * 3. A new Go replica starts and waits; ours gets SIGTERM. Ours runs with
 *    `--feature-gates=ReleaseLeaderElectionOnExit=true` (its default is false, as the Go
 *    sidecar's): it stops its workers, releases the Lease and exits 0, so the Go replica takes over
 *    within its retry period instead of the lease duration. It detaches some of ours' and attaches
 *    new ones.
 *
 * The takeover times both ways (from the signal to the new holder in the Lease) and the repeated
 * ControllerPublishVolume calls (from the driver's log) are printed. A repeat across a stop is
 * allowed only as a hand-over (the VolumeAttachment was not yet marked attached when the old
 * leader stopped); within ours' term none is; within a Go replica's term its own repeats (v4.13.0
 * re-publishes from a stale cache, see the suite's README) are printed, not failed: this scenario
 * is about the hand-over, and ours is held to none of them. Nothing is left without a finalizer,
 * every deleted VolumeAttachment was unpublished once, and the driver's publications match the
 * VolumeAttachments left.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Lease, VolumeAttachment } from "../../../lib/kube/types.ts";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, type DriverCall, PUBLISH, UNPUBLISH } from "../driver_log.ts";
import { parseAttacherLog, waitForLog, waitUntil } from "../kit.ts";
import { PATHS } from "../objects.ts";
import { LEASE_FLAGS, leaseName } from "./leader_failover.ts";

/** What the scenario needs besides the cluster. */
export interface RollingUpdateOptions {
  /** The Go csi-attacher binary (bench/build_go_attacher.ts). */
  goAttacher: string;
  /** Its release, for the output. */
  goVersion: string;
}

/** Calls a standby replica may make: the start-up calls before leader election. */
const STARTUP_CALLS = new Set([
  "/csi.v1.Identity/Probe",
  "/csi.v1.Identity/GetPluginInfo",
  "/csi.v1.Identity/GetPluginCapabilities",
  "/csi.v1.Controller/ControllerGetCapabilities",
]);

/** Ours releases the Lease on exit (the Go sidecar's gate of that name; off by default). */
export const RELEASE_GATE = "--feature-gates=ReleaseLeaderElectionOnExit=true";

/** The Go sidecar and ours hand the Lease over both ways. */
export async function rollingUpdate(
  ctx: ScenarioContext,
  options: RollingUpdateOptions,
): Promise<void> {
  const { kit } = ctx;
  const leasePath = `${PATHS.leases("default")}/${leaseName(ctx.cluster.info.driverName)}`;
  const holder = async () => (await kit.api.find<Lease>(leasePath))?.spec.holderIdentity ?? "";
  const waitHolder = (what: string, test: (id: string) => boolean, timeoutMs = 60_000) =>
    waitUntil(
      what,
      async () => {
        const id = await holder();
        return test(id) ? id : undefined;
      },
      timeoutMs,
      50,
    );
  const volumes = new Map<string, { pv: string; volumeId: string }>();
  const vaOfVolume = new Map<string, string>();
  let next = 0;
  const createVas = async (n: number): Promise<string[]> => {
    const made = [];
    for (let i = 0; i < n; i++, next++) {
      const v = await kit.makeVolume(`vol${next}`);
      const va = await kit.createVa(`va${next}`, ctx.nodes[next % ctx.nodes.length]!, v.pv);
      volumes.set(va, v);
      vaOfVolume.set(v.volumeId, va);
      made.push(va);
    }
    return made;
  };
  const attachedNow = async (): Promise<Set<string>> => {
    const list = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
    return new Set(list.items.filter((va) => va.status?.attached).map((va) => va.metadata.name));
  };

  // 1. Go leads, ours waits.
  const go = ctx.startAttacher("go", { entry: options.goAttacher, args: LEASE_FLAGS });
  const goId = await waitHolder("the Go csi-attacher to take the Lease", (id) => id !== "");
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const oursHttp = `127.0.0.1:${(probe.addr as Deno.NetAddr).port}`;
  probe.close();
  const ours = ctx.startAttacher("ours", {
    args: [...LEASE_FLAGS, RELEASE_GATE, `--http-endpoint=${oursHttp}`],
  });
  await waitForLog(ours, /"Attempting to acquire leader lease"/);
  // The readiness probe: a standby that has its driver is ready.
  const readiness = (path: string) =>
    fetch(`http://${oursHttp}${path}`).then(
      async (res) => `${res.status} ${await res.text()}`,
      (err: Error) => `no answer: ${err.message}`,
    );
  await waitUntil(
    "ours' readiness probe (/healthz) as a standby",
    async () => {
      const answer = await readiness("/healthz");
      return answer === "200 ok" ? answer : undefined;
    },
    30_000,
    100,
  );
  assert.equal(await readiness("/healthz/leader-election"), "200 ok");
  const oursId = `${kit.prefix}-ours`;
  assert.notEqual(goId, oursId);
  const phase1 = await createVas(8);
  await kit.waitAllAttached(phase1);
  assert.equal(await holder(), goId, "the Go replica still leads");

  // 2. Go gets SIGTERM; ours takes over once the lease expires. A leader's term ends when its
  // process has exited (it publishes nothing after); what is attached then is what it recorded.
  const goSignalAt = Date.now();
  go.kill("SIGTERM");
  const goStatus = await go.status;
  const goStop = { at: Date.now(), attached: await attachedNow() };
  const detachedByOurs = phase1.slice(0, 3);
  for (const va of detachedByOurs) await kit.api.deleteOk(`${PATHS.volumeAttachments}/${va}`);
  const phase2 = await createVas(4);
  await waitHolder("ours to take the Lease", (id) => id === oursId);
  // The Lease is written before the line is logged: wait for the line.
  await waitForLog(ours, /"Successfully acquired lease"/, 10_000);
  const oursAcquired = acquiredAt(await ours.output(), goSignalAt);
  const standbyCalls = grpcCalls(await ours.output()).filter((c) => c.time < oursAcquired);
  assert.deepEqual(
    standbyCalls.map((c) => c.method).filter((m) => !STARTUP_CALLS.has(m)),
    [],
    "ours called the driver while the Go replica led",
  );
  await kit.waitAllAttached(phase2);
  for (const va of detachedByOurs) await kit.waitGone(`${PATHS.volumeAttachments}/${va}`);

  // 3. A new Go replica waits; ours gets SIGTERM, releases the Lease, the Go replica takes over.
  const go2 = ctx.startAttacher("go-2", { entry: options.goAttacher, args: LEASE_FLAGS });
  await waitForLog(go2, /attempting to acquire leader lease/i);
  assert.equal(await holder(), oursId, "ours still leads while the new Go replica waits");
  const oursSignalAt = Date.now();
  ours.kill("SIGTERM");
  const goLeadsAt = waitHolder("the new Go replica to take the Lease", (id) => id === goId, 30_000)
    .then(() => Date.now());
  goLeadsAt.catch(() => {}); // awaited below; not unhandled while ours stops
  const oursStatus = await ours.status;
  const oursStop = { at: Date.now(), attached: await attachedNow() };
  const goTakeover = (await goLeadsAt) - oursSignalAt;
  assert.equal(oursStatus.code, 0, `ours' exit status on SIGTERM:\n${await ours.tail()}`);
  assert.match(await ours.output(), /"Released lease"/);
  const detachedByGo = phase2.slice(0, 2);
  for (const va of detachedByGo) await kit.api.deleteOk(`${PATHS.volumeAttachments}/${va}`);
  const phase3 = await createVas(3);
  await kit.waitAllAttached(phase3);
  for (const va of detachedByGo) await kit.waitGone(`${PATHS.volumeAttachments}/${va}`);

  // Nothing left without a finalizer; the driver's publications match the VAs left.
  const gone = new Set([...detachedByOurs, ...detachedByGo]);
  const left = [...volumes.keys()].filter((va) => !gone.has(va));
  for (const va of left) {
    assert.deepEqual((await kit.va(va))?.metadata.finalizers, [kit.finalizer], `${va} finalizers`);
    const pv = volumes.get(va)!.pv;
    assert.deepEqual((await kit.pv(pv))?.metadata.finalizers, [kit.finalizer], `${pv} finalizers`);
  }
  const published = await kit.publishedVolumes(ctx.nodeId);
  assert.deepEqual(
    [...volumes.values()].map((v) => v.volumeId).filter((id) => published.has(id)).sort(),
    left.map((va) => volumes.get(va)!.volumeId).sort(),
    "volumes published on the driver",
  );

  const calls = await ctx.cluster.driverCalls();
  const repeats = repeatedPublishes(calls, vaOfVolume, [
    { leader: "go", from: -Infinity, to: goStop.at, attachedAtEnd: goStop.attached },
    { leader: "ours", from: goStop.at, to: oursStop.at, attachedAtEnd: oursStop.attached },
    { leader: "go", from: oursStop.at, to: Infinity, attachedAtEnd: new Set() },
  ]);
  const unpublishes = countByVolume(calls, UNPUBLISH);
  for (const va of gone) {
    assert.equal(unpublishes.get(volumes.get(va)!.volumeId), 1, `unpublishes of ${va}`);
  }
  console.log(
    `    Go csi-attacher ${options.goVersion} → ours: ours led ` +
      `${((oursAcquired - goSignalAt) / 1000).toFixed(1)} s after the Go replica's SIGTERM ` +
      `(it keeps its Lease; lease duration 6 s; Go exit ${describeExit(goStatus)})`,
  );
  console.log(
    `    ours → Go csi-attacher ${options.goVersion}: the Go replica led ` +
      `${(goTakeover / 1000).toFixed(1)} s after ours' SIGTERM (ours released the Lease; exit 0)`,
  );
  const list = (names: string[]) => names.length > 0 ? ` [${names.join(", ")}]` : "";
  console.log(
    `    repeated ControllerPublishVolume calls: hand-over ${repeats.handOver.length}` +
      `${list(repeats.handOver)}; the Go replica's own re-syncs ${repeats.goOwn.length}` +
      `${list(repeats.goOwn)}; others ${repeats.other.length}${list(repeats.other)}`,
  );
  assert.deepEqual(repeats.other, [], "repeated ControllerPublishVolume calls (not a hand-over)");
}

/** The time of ours' "Successfully acquired lease" line after `since`. */
function acquiredAt(log: string, since: number): number {
  const line = parseAttacherLog(log).find((l) =>
    l.msg === "Successfully acquired lease" && l.time >= since - 1000
  );
  assert.ok(line !== undefined, "ours logged no acquired lease after the Go replica stopped");
  return line.time;
}

/** The "GRPC call" lines of our attacher's log (verbosity 5): their time and method. */
function grpcCalls(log: string): { time: number; method: string }[] {
  return parseAttacherLog(log).filter((l) => l.msg === "GRPC call").map((l) => ({
    time: l.time,
    method: /method="([^"]*)"/.exec(l.rest)?.[1] ?? "",
  }));
}

function describeExit(status: Deno.CommandStatus): string {
  return status.signal !== null ? `by ${status.signal}` : `status ${status.code}`;
}

/**
 * One leader's term: from its predecessor's exit to its own (`to`: Infinity for the last). A
 * leader publishes nothing after its process exited, and its successor nothing before.
 */
export interface Term {
  leader: "go" | "ours";
  from: number;
  to: number;
  /** VolumeAttachments attached when the term ended (its leader's process had exited). */
  attachedAtEnd: ReadonlySet<string>;
}

/** Repeated publishes, by what allows them (see {@link repeatedPublishes}). */
export interface Repeats {
  /** Across a stop, of a VA not yet attached then: the old leader may not have recorded it. */
  handOver: string[];
  /** Within a term of the Go replica: its own re-syncs (v4.13.0's `stale-cache` repeats). */
  goOwn: string[];
  /** Anything else: within ours' term, or across a stop of a VA already attached then. */
  other: string[];
}

/**
 * Each successful ControllerPublishVolume of a volume after its first, classified by the terms of
 * its previous publish and of itself. The Go csi-attacher v4.13.0 publishes again when it syncs a
 * VolumeAttachment from a cache that does not have its own status write yet (README of the suite:
 * `stale-cache`); that is its behaviour, not the hand-over's, so it is reported apart.
 */
export function repeatedPublishes(
  calls: readonly DriverCall[],
  vaOfVolume: ReadonlyMap<string, string>,
  terms: readonly Term[],
): Repeats {
  const out: Repeats = { handOver: [], goOwn: [], other: [] };
  const termOf = (time: number) => terms.find((t) => time >= t.from && time < t.to);
  const byVolume = new Map<string, number[]>();
  for (const c of calls) {
    if (c.method !== PUBLISH || c.error !== "") continue;
    const id = String(c.request.volume_id ?? "");
    if (!vaOfVolume.has(id)) continue;
    byVolume.set(id, [...(byVolume.get(id) ?? []), c.time]);
  }
  for (const [id, times] of byVolume) {
    const va = vaOfVolume.get(id)!;
    for (let i = 1; i < times.length; i++) {
      const before = termOf(times[i - 1]!);
      const now = termOf(times[i]!);
      const name = `${va} (${new Date(times[i]!).toISOString().slice(11, 23)})`;
      if (before === undefined || now === undefined) out.other.push(name);
      else if (before === now) (now.leader === "go" ? out.goOwn : out.other).push(name);
      else if (before.attachedAtEnd.has(va)) out.other.push(name);
      else out.handOver.push(name);
    }
  }
  return out;
}
