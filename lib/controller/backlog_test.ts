import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { LanedWorkQueue } from "../workqueue/lanes.ts";
import { ItemExponentialFailureRateLimiter } from "../workqueue/rate_limiters.ts";
import { BACKLOG_MESSAGE, BacklogReporter } from "./backlog.ts";
import { takeReady } from "../../testkit/harness/ready_work.ts";

const rateLimiter = new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 });

function setup() {
  const clock = new FakeClock(0);
  const log = new FakeLogger(0);
  const state = new Map<string, string>();
  const va = new LanedWorkQueue({ rateLimiter, clock }, {
    name: "csi-attacher-va",
    lanes: { names: ["attach", "detach"], laneOf: (k) => state.get(k) ?? "attach" },
  });
  const pv = new LanedWorkQueue({ rateLimiter, clock }, { name: "csi-attacher-pv" });
  const reporter = new BacklogReporter({ clock, log }, {
    queues: [{ name: va.name, queue: va }, { name: pv.name, queue: pv }],
    intervalMs: 30_000,
  });
  return { clock, log, state, va, pv, reporter };
}

Deno.test("BacklogReporter logs nothing while no key has waited longer than the interval", async () => {
  const { clock, log, va, reporter } = setup();
  va.add("va-1");
  clock.advance(30_000);
  reporter.report();
  assert.deepEqual(log.withMessage(BACKLOG_MESSAGE), []);
  assert.equal(await takeReady(va), "va-1");
  clock.advance(60_000);
  reporter.report();
  assert.deepEqual(log.withMessage(BACKLOG_MESSAGE), [], "a key being processed is not waiting");
});

Deno.test("BacklogReporter names each lane that waits, its depth and its oldest key", () => {
  const { clock, log, state, va, pv, reporter } = setup();
  state.set("va-d1", "detach");
  state.set("va-d2", "detach");
  va.add("va-d1");
  clock.advance(10_000);
  va.add("va-d2");
  pv.add("pv-1");
  clock.advance(25_000);
  va.add("va-a1");
  reporter.report();
  assert.deepEqual(log.withMessage(BACKLOG_MESSAGE).map((l) => l.fields), [
    { queue: "csi-attacher-va-detach", depth: 2, oldest: "va-d1", oldestWaitSeconds: 35 },
  ]);
  clock.advance(6_000);
  log.lines.length = 0;
  reporter.report();
  assert.deepEqual(log.withMessage(BACKLOG_MESSAGE).map((l) => l.fields), [
    { queue: "csi-attacher-va-detach", depth: 2, oldest: "va-d1", oldestWaitSeconds: 41 },
    { queue: "csi-attacher-pv", depth: 1, oldest: "pv-1", oldestWaitSeconds: 31 },
  ]);
});

Deno.test("BacklogReporter.run reports once per interval until aborted", async () => {
  const { clock, log, va, reporter } = setup();
  va.add("va-1");
  const stop = new AbortController();
  const running = reporter.run(stop.signal);
  clock.advance(30_000);
  await Promise.resolve();
  assert.equal(log.withMessage(BACKLOG_MESSAGE).length, 0, "waited exactly the interval");
  clock.advance(30_000);
  await Promise.resolve();
  clock.advance(30_000);
  await Promise.resolve();
  assert.equal(log.withMessage(BACKLOG_MESSAGE).length, 2);
  stop.abort();
  await running;
  assert.equal(clock.pendingTimers(), 0, "no timer left behind");
});

Deno.test("BacklogReporter refuses a zero interval (0 means the caller does not start it)", () => {
  const { clock, log } = setup();
  assert.throws(
    () => new BacklogReporter({ clock, log }, { queues: [], intervalMs: 0 }),
    RangeError,
  );
});
