/**
 * The quick chaos sweep (200 random fault schedules against the real controller), the proof that
 * a seed replays exactly, and the proof that the invariant checks catch the bugs they target.
 * The long sweep is `deno task chaos -- --schedules 10000`.
 */

import assert from "node:assert/strict";
import { runSchedule, type ScheduleResult } from "./simulation.ts";
import { formatViolation, summarize } from "./sweep.ts";

/** Schedules of the quick sweep. */
const QUICK_SCHEDULES = 200;

Deno.test("chaos: 200 random fault schedules keep every invariant and converge", async () => {
  const results: ScheduleResult[] = [];
  for (let seed = 1; seed <= QUICK_SCHEDULES; seed++) {
    // Shorter chaos phases than the long sweep, to keep the suite fast.
    results.push(await runSchedule({ seed, chaosSteps: 30 + (seed * 37) % 90 }));
  }
  const summary = summarize(results);
  assert.deepEqual(
    summary.violations.map(formatViolation),
    [],
    "invariants broke (replay a seed with `deno task chaos -- --replay <seed> --steps <n>`)",
  );
  // A schedule that reaches a window the Go attacher has too stops there (see InherentWindow).
  assert.equal(summary.converged + summary.inherent.length, QUICK_SCHEDULES);
  // The sweep must really inject what it claims to.
  for (
    const kind of [
      "api.conflict",
      "api.lostResponse",
      "api.watchExpired410",
      "csi.deadlineAfterPublish",
      "csi.slowBeyondTimeout",
      "process.kill",
      "process.replicaSwitch",
      "process.pausePastLease",
      "process.shortPause",
      "process.stoppedLeadingAfterPause",
      "fence.refusedAct",
      "user.deleteAttachedVolumeAttachment",
    ]
  ) {
    assert.ok((summary.counts[kind] ?? 0) > 0, `the sweep injected no ${kind}`);
  }
});

Deno.test("chaos: a seed replays exactly", async () => {
  const a = await runSchedule({ seed: 4242, chaosSteps: 150 });
  const b = await runSchedule({ seed: 4242, chaosSteps: 150 });
  assert.equal(a.traceHash, b.traceHash);
  assert.deepEqual(a.counts, b.counts);
  assert.equal(a.steps, b.steps);
  const c = await runSchedule({ seed: 4243, chaosSteps: 150 });
  assert.notEqual(c.traceHash, a.traceHash, "different seeds should give different schedules");
});

/** Runs seeds until one breaks an invariant; returns the invariants broken. */
async function firstBreach(
  sabotage: "storeNoFinalizer" | "fakeUnpublish" | "logSecrets",
): Promise<number[]> {
  for (let seed = 1; seed <= 40; seed++) {
    const result = await runSchedule({ seed, chaosSteps: 120, sabotage });
    if (result.violations.length > 0) return result.violations.map((v) => v.invariant);
  }
  return [];
}

Deno.test("chaos: publishing before the finalizer is stored breaks invariant 1", async () => {
  assert.deepEqual(await firstBreach("storeNoFinalizer"), [1]);
});

Deno.test("chaos: removing the finalizer without a real unpublish breaks invariant 2", async () => {
  // A seed may break invariant 1 first: the finalizer goes while another replica's publish of the
  // volume is still with the driver, which finishes it afterwards. Some seed breaks 2 at the write.
  const seen: number[][] = [];
  for (let seed = 1; seed <= 40; seed++) {
    const result = await runSchedule({ seed, chaosSteps: 120, sabotage: "fakeUnpublish" });
    const broken = result.violations.map((v) => v.invariant);
    if (broken.length > 0) seen.push(broken);
    if (broken.includes(2)) return;
  }
  assert.fail(`no seed broke invariant 2; breaches: ${JSON.stringify(seen)}`);
});

Deno.test("chaos: logging a publish request's secrets breaks invariant 6", async () => {
  assert.deepEqual(await firstBreach("logSecrets"), [6]);
});

Deno.test("chaos: a VA re-created under its name while its attach waits on a throttled API is never published (seeds that broke invariant 3 before the finalizer patch carried the uid)", async () => {
  // In each, a throttling storm holds the PV finalizer patch of an attach; meanwhile the VA is
  // deleted and created again under the same name. A finalizer patch by name alone lands on the
  // new VA, the driver publishes for it, and the PV's finalizer goes while it is still in use.
  for (const seed of [4043, 5633, 7729]) {
    const result = await runSchedule({ seed, serializeVolumeOps: true });
    assert.deepEqual(result.violations.map(formatViolation), [], `seed ${seed}`);
    assert.ok(result.converged, `seed ${seed} converged`);
  }
});
