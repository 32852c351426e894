import assert from "node:assert/strict";
import type { VolumeAttachment } from "../lib/kube/types.ts";
import { CANARY, type FixtureSpec, volumeAttachment } from "./fixtures.ts";
import { attachedSeries, attachPace, SERIES_POINTS, Timeline } from "./timeline.ts";

const spec: FixtureSpec = { driver: "d", count: 2, nodes: 1, prefix: "t-" };

function attached(va: VolumeAttachment): VolumeAttachment {
  return { ...va, status: { attached: true } };
}

function deleting(va: VolumeAttachment): VolumeAttachment {
  return { ...va, metadata: { ...va.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } };
}

Deno.test("Timeline measures create → attached and delete → gone per VolumeAttachment", async () => {
  let now = 1000;
  const t = new Timeline({ now: () => now }, { spec });
  const [a, b] = [volumeAttachment(spec, 0), volumeAttachment(spec, 1)];
  t.observe("ADDED", volumeAttachment(spec, CANARY));
  now = 1500;
  t.observe("MODIFIED", attached(volumeAttachment(spec, CANARY)));
  assert.deepEqual(t.state("canary"), { done: true, count: 1, at: 1500 });

  now = 2000;
  t.attachStarted();
  t.observe("ADDED", a);
  t.observe("ADDED", b);
  const waiting = t.wait("attached", 60_000);
  now = 2100;
  t.observe("MODIFIED", attached(a));
  t.observe("MODIFIED", attached(a)); // a repeat changes nothing
  now = 2400;
  t.observe("MODIFIED", attached(b));
  assert.deepEqual(await waiting, { done: true, count: 2, at: 2400 });

  now = 3000;
  t.detachStarted();
  t.observe("MODIFIED", deleting(attached(a)));
  t.observe("MODIFIED", deleting(attached(b)));
  now = 3050;
  t.observe("DELETED", deleting(a));
  assert.deepEqual(t.state("gone"), { done: false, count: 1, at: NaN });
  now = 3300;
  t.observe("DELETED", deleting(b));
  t.observe("ADDED", { ...a, metadata: { name: "other" } }); // not ours

  const r = t.report();
  assert.equal(r.canaryAttachedAt, 1500);
  assert.equal(r.attachStartedAt, 2000);
  assert.equal(r.attachCreatedAt, 2000);
  assert.equal(r.lastAttachedAt, 2400);
  assert.equal(r.detachIssuedAt, 3000);
  assert.equal(r.lastGoneAt, 3300);
  assert.deepEqual([r.attachLatencyMs.p50, r.attachLatencyMs.max], [100, 400]);
  assert.deepEqual([r.detachLatencyMs.p50, r.detachLatencyMs.max], [50, 300]);
  // Of two, the first is the tenth and the second the ninetieth percent.
  assert.deepEqual(r.attachPace, { attaches: 1, tenthAt: 2100, ninetiethAt: 2400 });
});

Deno.test("Timeline.wait() answers not done at its timeout", async () => {
  const t = new Timeline({}, { spec });
  assert.deepEqual(await t.wait("gone", 10), { done: false, count: 0, at: NaN });
  assert.equal(t.report().attachLatencyMs.count, 0);
});

Deno.test("attachedSeries() counts what is attached and not gone at each step", () => {
  const nan = NaN;
  const attachedAt = new Float64Array([1100, 1250, nan]);
  const goneAt = new Float64Array([1450, nan, 1300]); // the third was never attached
  const s = attachedSeries(attachedAt, goneAt, 1000, 1500);
  assert.equal(s.stepMs, 100);
  assert.deepEqual(s.counts, [0, 1, 1, 2, 2, 1]);
  assert.deepEqual(attachedSeries(attachedAt, goneAt, NaN, 1500).counts, []);
  const long = attachedSeries(attachedAt, goneAt, 0, 1_000_000);
  assert.ok(long.counts.length <= SERIES_POINTS + 1, String(long.counts.length));
});

Deno.test("attachPace() times the tenth and the ninetieth percent of the attaches", () => {
  // Attached in no particular order; one of the 20 never was.
  const times = Array.from({ length: 20 }, (_, i) => i === 7 ? NaN : 1000 + 10 * ((i * 7) % 20));
  const pace = attachPace(new Float64Array(times), 20);
  // The 2nd and the 18th attach of the 19 that happened, in time order.
  const sorted = times.filter(Number.isFinite).sort((x, y) => x - y);
  assert.deepEqual(pace, { attaches: 16, tenthAt: sorted[1], ninetiethAt: sorted[17] });
  // Fewer attached than nine tenths: no ninetieth percent yet.
  const few = attachPace(new Float64Array([1000, 1100, NaN, NaN, NaN]), 5);
  assert.deepEqual([few.tenthAt, few.ninetiethAt], [1000, NaN]);
  assert.deepEqual(attachPace(new Float64Array(0), 0), {
    attaches: 0,
    tenthAt: NaN,
    ninetiethAt: NaN,
  });
});
