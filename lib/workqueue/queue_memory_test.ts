/**
 * What a burst of queued keys costs the queue itself: with 20 000 VolumeAttachments created at
 * once, every key is dirty and ready, and each of the queue's per-key tables (client-go keeps a
 * dirty set, the metrics' add times, ...) grows into V8's large-object space, with as much
 * garbage again left by its growth. Needs `--v8-flags=--expose-gc` (the `test` task sets it).
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { type QueueMetricsProvider } from "./metrics.ts";
import { LanedWorkQueue } from "./lanes.ts";
import { ItemExponentialFailureRateLimiter } from "./rate_limiters.ts";

const rateLimiter = new ItemExponentialFailureRateLimiter({ baseMs: 1000, maxMs: 300_000 });

const KEYS = 20_000;
/**
 * The queue's own bytes per ready key, the keys' strings excluded: 349 with a table per concern,
 * 174 with one record per key (measured on Deno 2.9.6).
 */
const MAX_BYTES_PER_KEY = 250;

const nothing = { inc() {}, dec() {}, set() {}, observe() {} };
/** Metrics that record nothing, but are not the no-op provider: the queue keeps its books. */
const provider: QueueMetricsProvider = {
  newDepthMetric: () => nothing,
  newAddsMetric: () => nothing,
  newLatencyMetric: () => nothing,
  newWorkDurationMetric: () => nothing,
  newUnfinishedWorkSecondsMetric: () => nothing,
  newLongestRunningProcessorSecondsMetric: () => nothing,
  newRetriesMetric: () => nothing,
};

function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("this test needs --v8-flags=--expose-gc");
  gc();
  gc();
  return Deno.memoryUsage().heapUsed;
}

Deno.test("LanedWorkQueue with lanes and metrics keeps 20 000 ready keys in under 250 bytes each", () => {
  const clock = new FakeClock(0.5);
  const keys = Array.from({ length: KEYS }, (_, i) => `volume-attachment-${i}`);
  const queue = new LanedWorkQueue({ rateLimiter, clock, metricsProvider: provider }, {
    name: "va",
    lanes: {
      names: ["attach", "detach"],
      laneOf: (key) => key.endsWith("7") ? "detach" : "attach",
    },
  });
  try {
    const before = heapAfterGc();
    for (const key of keys) {
      clock.advance(0.25);
      queue.add(key);
    }
    const perKey = (heapAfterGc() - before) / KEYS;
    assert.equal(queue.len(), KEYS);
    assert.ok(perKey < MAX_BYTES_PER_KEY, `${perKey.toFixed(0)} bytes per ready key`);
  } finally {
    queue.shutDown();
  }
});
