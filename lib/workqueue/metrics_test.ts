import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { DelayingWorkQueue } from "./delaying_queue.ts";
import { metricsEnabled, noopQueueMetricsProvider, type QueueMetricsProvider } from "./metrics.ts";
import { WorkQueue } from "./queue.ts";
import { ItemExponentialFailureRateLimiter } from "./rate_limiters.ts";
import { RateLimitingWorkQueue } from "./rate_limiting_queue.ts";
import { takeReady } from "../../testkit/harness/ready_work.ts";

/** A provider that records the metrics it created and every call made on them. */
class RecordingProvider implements QueueMetricsProvider {
  /** Metric kinds created, as `kind(name)`. */
  created: string[] = [];
  /** Every call, as `kind(name).method(value?)`. */
  calls: string[] = [];
  /** Current value of each gauge and counter, by `kind(name)`. */
  values = new Map<string, number>();

  #metric(kind: string, name: string) {
    const id = `${kind}(${name})`;
    this.created.push(id);
    this.values.set(id, 0);
    const record = (call: string, value: number) => {
      this.calls.push(`${id}.${call}`);
      this.values.set(id, value);
    };
    return {
      inc: () => record("inc()", this.values.get(id)! + 1),
      dec: () => record("dec()", this.values.get(id)! - 1),
      set: (v: number) => record(`set(${v})`, v),
      observe: (v: number) => record(`observe(${v})`, v),
    };
  }

  newDepthMetric = (name: string) => this.#metric("depth", name);
  newAddsMetric = (name: string) => this.#metric("adds", name);
  newLatencyMetric = (name: string) => this.#metric("latency", name);
  newWorkDurationMetric = (name: string) => this.#metric("workDuration", name);
  newUnfinishedWorkSecondsMetric = (name: string) => this.#metric("unfinished", name);
  newLongestRunningProcessorSecondsMetric = (name: string) => this.#metric("longest", name);
  newRetriesMetric = (name: string) => this.#metric("retries", name);

  /** Calls recorded since the last `take()`. */
  take(): string[] {
    const calls = this.calls;
    this.calls = [];
    return calls;
  }
}

Deno.test("WorkQueue creates its metrics once, under its name", () => {
  const clock = new FakeClock(0);
  const provider = new RecordingProvider();
  const q = new RateLimitingWorkQueue({
    clock,
    metricsProvider: provider,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1, maxMs: 1 }),
  }, { name: "csi-attacher-va" });
  assert.deepEqual(provider.created.sort(), [
    "adds(csi-attacher-va)",
    "depth(csi-attacher-va)",
    "latency(csi-attacher-va)",
    "longest(csi-attacher-va)",
    "retries(csi-attacher-va)",
    "unfinished(csi-attacher-va)",
    "workDuration(csi-attacher-va)",
  ]);
  q.shutDown();
});

Deno.test("WorkQueue metrics: adds, depth, queue latency and work duration in seconds", async () => {
  const clock = new FakeClock(0);
  const provider = new RecordingProvider();
  const q = new WorkQueue({ clock, metricsProvider: provider }, { name: "q" });
  q.add("a");
  q.add("a");
  assert.deepEqual(
    provider.take(),
    ["adds(q).inc()", "depth(q).inc()"],
    "a folded add counts once",
  );
  clock.advance(1500);
  provider.take();
  assert.equal(await takeReady(q), "a");
  assert.deepEqual(provider.take(), ["depth(q).dec()", "latency(q).observe(1.5)"]);
  q.add("a");
  assert.deepEqual(provider.take(), ["adds(q).inc()", "depth(q).inc()"], "add while processing");
  clock.advance(250);
  provider.take();
  q.done("a");
  assert.deepEqual(provider.take(), ["workDuration(q).observe(0.25)"]);
  assert.equal(await takeReady(q), "a");
  assert.deepEqual(provider.take(), ["depth(q).dec()", "latency(q).observe(0.25)"]);
  assert.equal(provider.values.get("depth(q)"), 0);
  assert.equal(provider.values.get("adds(q)"), 2);
  q.done("a");
  q.shutDown();
});

Deno.test("WorkQueue updates unfinished-work gauges every 500 ms until shut down", async () => {
  const clock = new FakeClock(0);
  const provider = new RecordingProvider();
  const q = new WorkQueue({ clock, metricsProvider: provider }, { name: "q" });
  assert.equal(clock.pendingTimers(), 1);
  clock.advance(500);
  assert.deepEqual(provider.take(), ["unfinished(q).set(0)", "longest(q).set(0)"]);
  q.add("a");
  q.add("b");
  assert.equal(await takeReady(q), "a");
  clock.advance(200);
  assert.equal(await takeReady(q), "b");
  provider.take();
  clock.advance(300);
  assert.deepEqual(provider.take(), ["unfinished(q).set(0.8)", "longest(q).set(0.5)"]);
  q.done("a");
  assert.deepEqual(provider.take(), ["workDuration(q).observe(0.5)"]);
  clock.advance(500);
  assert.deepEqual(provider.take(), ["unfinished(q).set(0.8)", "longest(q).set(0.8)"]);
  q.shutDown();
  assert.equal(clock.pendingTimers(), 0);
  clock.advance(5000);
  assert.deepEqual(provider.take(), []);
});

Deno.test("DelayingWorkQueue counts a retry for every accepted addAfter", () => {
  const clock = new FakeClock(0);
  const provider = new RecordingProvider();
  const q = new DelayingWorkQueue({ clock, metricsProvider: provider }, { name: "q" });
  q.addAfter("a", 100);
  q.addAfter("b", 0);
  assert.equal(provider.values.get("retries(q)"), 2);
  q.shutDown();
  q.addAfter("c", 100);
  assert.equal(provider.values.get("retries(q)"), 2, "no retry counted after shutDown");
});

Deno.test("RateLimitingWorkQueue.addRateLimited increments the retries counter", () => {
  const clock = new FakeClock(0);
  const provider = new RecordingProvider();
  const q = new RateLimitingWorkQueue({
    clock,
    metricsProvider: provider,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 }),
  }, { name: "q" });
  q.addRateLimited("a");
  q.addRateLimited("a");
  q.addRateLimited("b");
  assert.equal(provider.values.get("retries(q)"), 3);
  assert.equal(provider.values.get("adds(q)"), 0, "nothing added before the delay");
  clock.advance(1000);
  assert.equal(provider.values.get("adds(q)"), 2);
  assert.equal(provider.values.get("depth(q)"), 2);
  q.shutDown();
});

Deno.test("WorkQueue records nothing and runs no timer without metrics, or when unnamed", async () => {
  const clock = new FakeClock(0);
  const provider = new RecordingProvider();
  const unnamed = new WorkQueue({ clock, metricsProvider: provider }, { name: "" });
  const noop = new WorkQueue({ clock, metricsProvider: noopQueueMetricsProvider }, { name: "q" });
  const none = new WorkQueue({ clock }, { name: "q" });
  assert.equal(clock.pendingTimers(), 0);
  for (const q of [unnamed, noop, none]) {
    q.add("a");
    q.done((await takeReady(q))!);
  }
  assert.deepEqual(provider.created, []);
  assert.equal(metricsEnabled(provider, "q"), true);
  assert.equal(metricsEnabled(noopQueueMetricsProvider, "q"), false);
  assert.equal(metricsEnabled(undefined, "q"), false);
});

Deno.test("noopQueueMetricsProvider metrics accept every call", () => {
  const p = noopQueueMetricsProvider;
  p.newDepthMetric("q").inc();
  p.newDepthMetric("q").dec();
  p.newAddsMetric("q").inc();
  p.newLatencyMetric("q").observe(1);
  p.newWorkDurationMetric("q").observe(1);
  p.newUnfinishedWorkSecondsMetric("q").set(1);
  p.newLongestRunningProcessorSecondsMetric("q").set(1);
  p.newRetriesMetric("q").inc();
});
