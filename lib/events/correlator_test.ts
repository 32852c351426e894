import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { formatTime } from "../kube/time.ts";
import {
  COMBINED_MESSAGE_PREFIX,
  type CoreEvent,
  EventCorrelator,
  type EventCorrelatorOptions,
} from "./correlator.ts";

function correlator(clock: FakeClock, opts: EventCorrelatorOptions = {}): EventCorrelator {
  return new EventCorrelator({ clock, formatTime }, opts);
}

function event(clock: FakeClock, message: string, overrides: Partial<CoreEvent> = {}): CoreEvent {
  const now = formatTime(clock.now());
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: `va1.${clock.now()}`, namespace: "default" },
    involvedObject: {
      kind: "VolumeAttachment",
      apiVersion: "storage.k8s.io/v1",
      name: "va1",
      uid: "uid-1",
    },
    reason: "AttachFailed",
    message,
    type: "Warning",
    source: { component: "csi-attacher" },
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
    reportingComponent: "csi-attacher",
    reportingInstance: "",
    ...overrides,
  };
}

/** Correlates `e`, then stores it as the server would (created or patched). */
function post(c: EventCorrelator, e: CoreEvent) {
  const result = c.correlate(e);
  if (!result.skip) {
    c.updateState({
      ...result.event,
      metadata: { ...result.event.metadata, resourceVersion: "1" },
    });
  }
  return result;
}

Deno.test("EventCorrelator.correlate() creates an Event once, then patches it with a growing count", () => {
  const clock = new FakeClock();
  const c = correlator(clock);
  const first = post(c, event(clock, "boom"));
  assert.ok(!first.skip);
  assert.equal(first.patch, undefined);
  const name = first.event.metadata.name;
  for (let i = 2; i <= 5; i++) {
    clock.advance(1000);
    const next = post(c, event(clock, "boom"));
    assert.ok(!next.skip);
    assert.equal(next.event.metadata.name, name);
    assert.equal(next.event.firstTimestamp, first.event.firstTimestamp);
    assert.deepEqual(next.patch, {
      count: i,
      lastTimestamp: formatTime(clock.now()),
      message: "boom",
    });
  }
});

Deno.test("EventCorrelator.correlate() lets 25 Events per object through, then one per 5 minutes", () => {
  const clock = new FakeClock();
  const c = correlator(clock);
  const posted: number[] = [];
  for (let i = 1; i <= 100; i++) {
    const result = post(c, event(clock, "boom"));
    if (!result.skip) posted.push(result.event.count);
    clock.advance(1000);
  }
  // The burst of 25, then nothing: 100 s refill 1/3 of a token.
  assert.deepEqual(posted, Array.from({ length: 25 }, (_, i) => i + 1));
  clock.advance(300_000);
  const later = post(c, event(clock, "boom"));
  assert.ok(!later.skip);
  // The filtered occurrences were counted all the same.
  assert.equal(later.event.count, 101);
  assert.equal(later.patch?.count, 101);
});

Deno.test("EventCorrelator.correlate() gives each object its own spam bucket", () => {
  const clock = new FakeClock();
  const c = correlator(clock, { spamBurst: 2 });
  assert.ok(!post(c, event(clock, "a")).skip);
  assert.ok(!post(c, event(clock, "a")).skip);
  assert.ok(post(c, event(clock, "a")).skip);
  const other = event(clock, "a");
  other.involvedObject = { ...other.involvedObject, name: "va2", uid: "uid-2" };
  assert.ok(!post(c, other).skip);
});

Deno.test("EventCorrelator.correlate() combines the 10th distinct message of a reason into one Event", () => {
  const clock = new FakeClock();
  const c = correlator(clock);
  for (let i = 1; i <= 9; i++) {
    const r = post(c, event(clock, `error ${i}`));
    assert.ok(!r.skip);
    assert.equal(r.event.message, `error ${i}`);
    assert.equal(r.patch, undefined);
  }
  const tenth = post(c, event(clock, "error 10"));
  assert.ok(!tenth.skip);
  assert.equal(tenth.event.message, `${COMBINED_MESSAGE_PREFIX}error 10`);
  assert.equal(tenth.patch, undefined);
  const eleventh = post(c, event(clock, "error 11"));
  assert.ok(!eleventh.skip);
  // The combined Event is patched: one object for all further distinct messages.
  assert.equal(eleventh.event.metadata.name, tenth.event.metadata.name);
  assert.deepEqual(eleventh.patch, {
    count: 2,
    lastTimestamp: formatTime(clock.now()),
    message: `${COMBINED_MESSAGE_PREFIX}error 11`,
  });
});

Deno.test("EventCorrelator.correlate() starts a new aggregate after 10 minutes without Events", () => {
  const clock = new FakeClock();
  const c = correlator(clock);
  for (let i = 1; i <= 9; i++) post(c, event(clock, `error ${i}`));
  clock.advance(600_001);
  const r = post(c, event(clock, "error 10"));
  assert.ok(!r.skip);
  assert.equal(r.event.message, "error 10");
});

Deno.test("EventCorrelator.correlate() keeps Warning and Normal Events apart", () => {
  const clock = new FakeClock();
  const c = correlator(clock);
  const warning = post(c, event(clock, "boom"));
  const normal = post(
    c,
    event(clock, "ok", {
      type: "Normal",
      reason: "Attached",
      metadata: { name: c.newEventName("va1"), namespace: "default" },
    }),
  );
  assert.ok(!warning.skip && !normal.skip);
  assert.equal(normal.patch, undefined);
  assert.notEqual(normal.event.metadata.name, warning.event.metadata.name);
  const again = post(c, event(clock, "boom"));
  assert.ok(!again.skip);
  assert.equal(again.event.metadata.name, warning.event.metadata.name);
  assert.equal(again.patch?.count, 2);
});

Deno.test("EventCorrelator.newEventName() never gives the same name twice in one millisecond", () => {
  const clock = new FakeClock();
  const c = correlator(clock);
  const names = new Set(Array.from({ length: 5 }, () => c.newEventName("va1")));
  assert.equal(names.size, 5);
  assert.match([...names][0]!, /^va1\.[0-9a-f]+$/);
});
