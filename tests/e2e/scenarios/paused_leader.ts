/**
 * Scenario 19: a leader paused (SIGSTOP) for longer than its lease, then resumed (SIGCONT), as a
 * frozen VM or cgroup, a live migration or a stopped container does to a process.
 *
 * Two replicas with `--leader-election` (6 s lease, 4 s renew deadline, 1 s retry period) at the
 * default QPS (5, burst 10: an attach costs three API writes, so queued work waits for tokens),
 * 60 VolumeAttachments pending. Three trials: the current leader is stopped for 12 s once it is
 * attaching, the standby takes the Lease, the leader is resumed. What the resumed replica did
 * after SIGCONT is read from its own "GRPC call" lines (logged before each request is sent) and
 * from the driver's log (the calls it served, attributed with `replica_calls.ts`), and when it
 * exited. It is restarted as the new standby, and the next trial stops the other one. Then the
 * leader is stopped for 2 s, less than the renew deadline: that must change nothing (the same
 * holder, no exit, every VolumeAttachment attached).
 *
 * client-go's elector stops leading only when its renew deadline passes, timed from the last
 * renewal it started, so after a long pause a replica goes on acting until its next renew
 * attempt fails for the renew deadline (`leaderelection.go`, `renew`). Ours must make no
 * ControllerPublishVolume or ControllerUnpublishVolume call after the resume and exit within 1 s;
 * the Go csi-attacher runs the same experiment (two Go replicas, each in its own UTS namespace for
 * a distinct identity) and its figures are printed, not asserted.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Lease, VolumeAttachment } from "../../../lib/kube/types.ts";
import type { ScenarioContext } from "../context.ts";
import { PUBLISH, UNPUBLISH } from "../driver_log.ts";
import { parseAttacherLog, sleep, waitUntil } from "../kit.ts";
import { PATHS } from "../objects.ts";
import type { ManagedProcess } from "../process.ts";
import { attributeCalls, loggedCalls, unsentCalls } from "../replica_calls.ts";
import { LEASE_FLAGS, leaseName } from "./leader_failover.ts";

/** What the scenario needs besides the cluster. */
export interface PausedLeaderOptions {
  /** The Go csi-attacher binary (bench/build_go_attacher.ts). */
  goAttacher: string;
  /** Its release, for the output. */
  goVersion: string;
}

/** The long pause: twice the lease, so the standby has led for a while when it ends. */
export const PAUSE_MS = 12_000;
/** The short pause: less than the renew deadline (4 s). */
export const SHORT_PAUSE_MS = 2_000;
/** VolumeAttachments waiting when each pause starts. */
const PENDING = 60;
const TRIALS = 3;
/** How soon ours must exit after SIGCONT. */
const OURS_EXIT_MS = 1_000;

/** What one trial measured. */
export interface TrialFigures {
  paused: string;
  standby: string;
  /** SIGSTOP → the standby holds the Lease. */
  takeoverMs: number;
  /** The resumed replica's acting calls after SIGCONT, from its own log ("GRPC call"). */
  publishes: number;
  unpublishes: number;
  /** Of those, refused by its fence before a byte was sent ("request not sent"). */
  unsent: number;
  /** Of those, served by the driver (attributed from the driver's log). */
  served: number;
  /** ms after SIGCONT of its first and last logged acting call. */
  firstMs: number | undefined;
  lastMs: number | undefined;
  /** SIGCONT → exit. */
  exitMs: number;
  exit: string;
  stoppedLeading: boolean;
}

/** What the short pause measured. */
export interface ShortPauseFigures {
  leader: string;
  holderAfter: string;
  transitionsBefore: number;
  transitionsAfter: number;
  exited: boolean;
  /** Acting calls the leader logged after SIGCONT (it goes on working). */
  callsAfter: number;
  attached: number;
  total: number;
}

/** One attacher under test. */
interface Flavor {
  label: string;
  tag: string;
  entry?: string;
  ownHostname?: boolean;
}

/** Scenario 19: ours asserted, the Go csi-attacher printed. */
export async function pausedLeader(
  ctx: ScenarioContext,
  options: PausedLeaderOptions,
): Promise<void> {
  const ours = await experiment(ctx, { label: "ours", tag: "ours" });
  printFigures(ours.label, ours.trials, ours.short);
  await dropLease(ctx);
  const go = await experiment(ctx, {
    label: `Go csi-attacher ${options.goVersion}`,
    tag: "go",
    entry: options.goAttacher,
    ownHostname: true,
  });
  printFigures(go.label, go.trials, go.short);

  for (const [i, t] of ours.trials.entries()) {
    const what = `ours, trial ${i + 1} (${t.paused} resumed)`;
    assert.equal(
      t.publishes + t.unpublishes - t.unsent,
      0,
      `${what}: acting calls sent after SIGCONT (its log)`,
    );
    assert.equal(t.served, 0, `${what}: acting calls the driver served after SIGCONT`);
    assert.ok(t.exitMs <= OURS_EXIT_MS, `${what}: exited ${t.exitMs} ms after SIGCONT`);
    assert.equal(t.exit, "status 1", `${what}: exit`);
    assert.ok(t.stoppedLeading, `${what}: logged "Stopped leading"`);
  }
  const s = ours.short;
  assert.equal(s.holderAfter, s.leader, "ours, 2 s pause: the Lease holder");
  assert.equal(s.transitionsAfter, s.transitionsBefore, "ours, 2 s pause: leaseTransitions");
  assert.ok(!s.exited, "ours, 2 s pause: the leader exited");
  assert.equal(s.attached, s.total, "ours, 2 s pause: VolumeAttachments attached");
  await ctx.checkRepublishes(["hand-over"], "ours: volumes published more than once", "s19-ours-");
}

async function dropLease(ctx: ScenarioContext): Promise<void> {
  const path = `${PATHS.leases("default")}/${leaseName(ctx.cluster.info.driverName)}`;
  await ctx.kit.api.deleteOk(path);
}

/** Three long pauses and one short one against `flavor`; its replicas are stopped at the end. */
async function experiment(
  ctx: ScenarioContext,
  flavor: Flavor,
): Promise<{ label: string; trials: TrialFigures[]; short: ShortPauseFigures }> {
  const { kit } = ctx;
  const leasePath = `${PATHS.leases("default")}/${leaseName(ctx.cluster.info.driverName)}`;
  const lease = () => kit.api.find<Lease>(leasePath);
  const holder = async () => (await lease())?.spec.holderIdentity ?? "";
  const identity = (name: string) => `${kit.prefix}-${flavor.tag}-${name}`;
  const replicas = new Map<string, ManagedProcess>();
  const start = (name: string) => {
    const p = ctx.startAttacher(`${flavor.tag}-${name}`, {
      args: LEASE_FLAGS,
      entry: flavor.entry,
      ownHostname: flavor.ownHostname,
    });
    replicas.set(identity(name), p);
    return p;
  };
  const waitHolder = (who: string, timeoutMs: number) =>
    waitUntil(`${who} to hold the Lease`, async () => (await holder()) === who, timeoutMs, 50);
  const acquiring = /attempting to acquire leader lease/gi;
  const waitStandby = (p: ManagedProcess, seen: number) =>
    waitUntil(
      `${p.spec.name} to wait for the Lease`,
      async () => {
        if (p.exitStatus !== undefined) {
          throw new Error(`${p.spec.name} exited:\n${await p.tail()}`);
        }
        return ((await p.output()).match(acquiring)?.length ?? 0) > seen;
      },
      60_000,
      100,
    );

  start("a");
  await waitHolder(identity("a"), 60_000);
  await waitStandby(start("b"), 0);

  const names: string[] = [];
  const volumeOf = new Map<string, string>();
  let made = 0;
  const attached = async (): Promise<Set<string>> => {
    const list = await kit.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
    return new Set(list.items.filter((va) => va.status?.attached).map((va) => va.metadata.name));
  };
  const topUp = async () => {
    const done = await attached();
    const missing = PENDING - names.filter((n) => !done.has(n)).length;
    const batch = Array.from({ length: Math.max(0, missing) }, () => made++);
    const created = await Promise.all(batch.map(async (i) => {
      const v = await kit.makeVolume(`${flavor.tag}-vol${i}`);
      const va = await kit.createVa(`${flavor.tag}-va${i}`, ctx.nodes[i % ctx.nodes.length]!, v.pv);
      volumeOf.set(va, v.volumeId);
      return va;
    }));
    names.push(...created);
  };
  const waitWorking = async () => {
    const before = (await attached()).size;
    await waitUntil(
      "the leader to attach 3 more",
      async () => {
        return (await attached()).size >= before + 3;
      },
      60_000,
      100,
    );
  };

  const trials: TrialFigures[] = [];
  for (let trial = 0; trial < TRIALS; trial++) {
    const leader = await holder();
    const paused = replicas.get(leader);
    assert.ok(paused !== undefined, `the Lease holder "${leader}" is one of the replicas`);
    const standby = [...replicas.keys()].find((id) => id !== leader)!;
    await topUp();
    await waitWorking();
    paused.kill("SIGSTOP");
    const stoppedAt = Date.now();
    await waitHolder(standby, PAUSE_MS + 20_000);
    const takeoverMs = Date.now() - stoppedAt;
    await sleep(Math.max(0, stoppedAt + PAUSE_MS - Date.now()));
    const resumedAt = Date.now();
    paused.kill("SIGCONT");
    const status = await Promise.race([
      paused.status,
      sleep(30_000).then(() => undefined),
    ]);
    const exitMs = Date.now() - resumedAt;
    assert.ok(status !== undefined, `${leader} still runs 30 s after SIGCONT`);
    const log = await paused.output();
    const own = loggedCalls(leader, log).filter((c) => c.time >= resumedAt);
    const all = await Promise.all(
      [...replicas].map(async ([id, p]) => loggedCalls(id, await p.output())),
    );
    const served = attributeCalls(await ctx.cluster.driverCalls(), all.flat()).filter((c) =>
      c.logged?.replica === leader && c.logged.time >= resumedAt
    );
    trials.push({
      paused: leader,
      standby,
      takeoverMs,
      publishes: own.filter((c) => c.method === PUBLISH).length,
      unpublishes: own.filter((c) => c.method === UNPUBLISH).length,
      unsent: unsentCalls(log).filter((time) => time >= resumedAt).length,
      served: served.length,
      firstMs: own.length > 0 ? own[0]!.time - resumedAt : undefined,
      lastMs: own.length > 0 ? own[own.length - 1]!.time - resumedAt : undefined,
      exitMs,
      exit: status.signal !== null ? `signal ${status.signal}` : `status ${status.code}`,
      stoppedLeading: parseAttacherLog(log).some((l) =>
        l.time >= resumedAt && /^stopped leading$/i.test(l.msg)
      ),
    });
    const seen = (await paused.output()).match(acquiring)?.length ?? 0;
    await paused.restart();
    await waitStandby(paused, seen);
  }

  // The short pause: the leader keeps its Lease and its work.
  const leader = await holder();
  const leaderProcess = replicas.get(leader)!;
  const transitionsBefore = (await lease())?.spec.leaseTransitions ?? 0;
  await waitWorking();
  leaderProcess.kill("SIGSTOP");
  await sleep(SHORT_PAUSE_MS);
  const resumedAt = Date.now();
  leaderProcess.kill("SIGCONT");
  // Longer than a lease: a standby that thought the lease free would have taken it by then.
  let holderAfter = leader;
  const watchUntil = Date.now() + 8_000;
  while (Date.now() < watchUntil && holderAfter === leader) {
    holderAfter = await holder();
    await sleep(200);
  }
  await kit.waitAllAttached(names, 180_000).catch(() => {});
  const done = await attached();
  if (holderAfter === leader) holderAfter = await holder();
  const short: ShortPauseFigures = {
    leader,
    holderAfter,
    transitionsBefore,
    transitionsAfter: (await lease())?.spec.leaseTransitions ?? 0,
    exited: leaderProcess.exitStatus !== undefined,
    callsAfter: loggedCalls(leader, await leaderProcess.output())
      .filter((c) => c.time >= resumedAt).length,
    attached: names.filter((n) => done.has(n)).length,
    total: names.length,
  };
  if (short.attached === short.total) {
    const published = await kit.publishedVolumes(ctx.nodeId);
    const unpublished = names.filter((n) => !published.has(volumeOf.get(n)!));
    assert.deepEqual(
      unpublished,
      [],
      `${flavor.label}: attached VolumeAttachments whose volume the driver has not published`,
    );
  }
  // Stopped before the next flavor; the suite strips the finalizers at the end.
  for (const p of replicas.values()) await p.stop(20_000);
  return { label: flavor.label, trials, short };
}

function seconds(ms: number | undefined): string {
  return ms === undefined ? "-" : `${(ms / 1000).toFixed(2)} s`;
}

function printFigures(label: string, trials: TrialFigures[], short: ShortPauseFigures): void {
  for (const [i, t] of trials.entries()) {
    console.log(
      `    ${label}, trial ${i + 1}: ${t.paused} stopped ${PAUSE_MS / 1000} s, ${t.standby} ` +
        `led ${seconds(t.takeoverMs)} after SIGSTOP; after SIGCONT ${t.publishes} ` +
        `ControllerPublishVolume + ${t.unpublishes} ControllerUnpublishVolume logged ` +
        `(first ${seconds(t.firstMs)}, last ${seconds(t.lastMs)}` +
        `${t.unsent > 0 ? `; ${t.unsent} of them refused by the fence, not sent` : ""}), ` +
        `${t.served} served by the ` +
        `driver; out ${seconds(t.exitMs)} after SIGCONT (${t.exit}` +
        `${t.stoppedLeading ? ', "stopped leading"' : ""})`,
    );
  }
  console.log(
    `    ${label}, ${SHORT_PAUSE_MS / 1000} s pause of ${short.leader}: holder after ` +
      `${short.holderAfter}, leaseTransitions ${short.transitionsBefore} → ` +
      `${short.transitionsAfter}, ${short.exited ? "exited" : "still running"}, ` +
      `${short.callsAfter} acting calls after SIGCONT, ${short.attached}/${short.total} attached`,
  );
}
