import assert from "node:assert/strict";
import { Informer } from "./informer.ts";
import { ApiError, PERSISTENT_VOLUMES } from "./api.ts";
import type { PersistentVolume } from "./types.ts";
import { FakeListWatch, flushPromises } from "../../testkit/fakes/fake_list_watch.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import {
  id,
  initialEventsEnd,
  listedResourceVersion,
  type LogLine,
  pendingDelay,
  pv,
  setup,
  status,
  synced,
} from "../../testkit/harness/informer_rig.ts";

Deno.test("Informer: a bookmark advances the resourceVersion of the next watch only", async () => {
  const s = await synced([pv("a", "1")], "10");
  const w1 = await s.api.expectWatch();
  s.events.length = 0;
  w1.send({ type: "BOOKMARK", object: { metadata: { name: "", resourceVersion: "50" } } });
  await flushPromises();
  assert.deepEqual(s.events, []);
  assert.deepEqual(s.informer.list().map(id), ["a@1"]);
  w1.end();
  const w2 = await s.api.expectWatch();
  assert.equal(w2.opts.resourceVersion, "50");
  assert.equal(s.api.lists.length, 1);
  await s.stop();
});

Deno.test("Informer: a watch the server closes is resumed from the last resourceVersion, no list", async () => {
  const s = await synced([pv("a", "1")], "10");
  const w1 = await s.api.expectWatch();
  w1.send({ type: "MODIFIED", object: pv("a", "20") });
  await flushPromises();
  s.clock.advance(300_000);
  w1.end();
  const w2 = await s.api.expectWatch();
  assert.equal(w2.opts.resourceVersion, "20");
  assert.equal(w1.closed, true);
  assert.equal(s.api.lists.length, 1, "no new list");
  assert.equal(s.clock.pendingTimers(), 1, "only the deadline of the new watch, no backoff");

  // A quiet watch that lasted a while (no events) is resumed at once as well.
  s.clock.advance(2_000);
  w2.end();
  const w3 = await s.api.expectWatch();
  assert.equal(w3.opts.resourceVersion, "20");
  await s.stop();
});

Deno.test("Informer: a watch closed at once with no event backs off before the next watch", async () => {
  const s = await synced([], "10");
  const w1 = await s.api.expectWatch();
  w1.end();
  await s.api.expectNoCall();
  assert.equal(pendingDelay(s.clock), 800);
  assert.equal(s.logs.some((l) => l.level === "error" && l.msg === "Failed to watch"), true);
  s.clock.advance(800);
  const w2 = await s.api.expectWatch();
  assert.equal(w2.opts.resourceVersion, "10");
  assert.equal(s.api.lists.length, 1);
  await s.stop();
});

Deno.test("Informer: an ERROR 410 event leads to a new list that delivers updates, adds and deletes", async () => {
  const s = await synced([pv("a", "1"), pv("b", "2"), pv("c", "3")], "10");
  const w1 = await s.api.expectWatch();
  s.events.length = 0;
  w1.send({ type: "ERROR", object: status(410, "Expired", "too old resource version: 10 (40)") });
  await s.api.expectNoCall();
  assert.equal(w1.closed, true, "the expired watch is closed");
  assert.equal(pendingDelay(s.clock), 800);
  s.clock.advance(800);

  const relist = await s.api.expectList();
  relist.resolve([pv("a", "41"), pv("b", "2"), pv("d", "42")], "45");
  const w2 = await s.api.expectWatch();
  assert.deepEqual(s.events, [
    "update a@1>a@41",
    "update b@2>b@2",
    "add d@42",
    "delete c@3",
  ]);
  assert.deepEqual(s.informer.list().map(id).sort(), ["a@41", "b@2", "d@42"]);
  assert.equal(w2.opts.resourceVersion, "45");
  assert.equal(listedResourceVersion(s.logs), "45");
  await s.stop();
});

Deno.test("Informer: a watch rejected with 410 Gone lists again", async () => {
  const s = await synced([pv("a", "1")], "10");
  const w1 = await s.api.expectWatch();
  w1.fail(new ApiError(410, "Gone", "resourceVersion too old"));
  await s.api.expectNoCall();
  s.clock.advance(pendingDelay(s.clock));
  (await s.api.expectList()).resolve([], "60");
  const w2 = await s.api.expectWatch();
  assert.equal(w2.opts.resourceVersion, "60");
  assert.deepEqual(s.events, ["add a@1", "delete a@1"]);
  await s.stop();
});

Deno.test("Informer: a failing watch is retried from the last resourceVersion with a growing, capped backoff", async () => {
  const s = await synced([pv("a", "1")], "10");
  const delays: number[] = [];
  for (let i = 0; i < 9; i++) {
    const w = await s.api.expectWatch();
    assert.equal(w.opts.resourceVersion, "10");
    w.fail(new ApiError(0, "", "connection reset"));
    await s.api.expectNoCall();
    const delay = pendingDelay(s.clock);
    delays.push(delay);
    s.clock.advance(delay);
  }
  assert.deepEqual(delays, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]);
  assert.equal(s.api.lists.length, 1, "a failed watch does not list again");
  const errors = s.logs.filter((l) => l.level === "error");
  assert.equal(errors.length, 9);
  assert.equal(errors[0]?.msg, "Failed to watch");
  assert.equal((errors[0]?.err as Error).message, "connection reset");
  assert.deepEqual(errors[0]?.fields, {
    informer: "persistentvolumes",
    resourceVersion: "10",
    retryAfterMs: 800,
  });
  assert.equal(errors[8]?.fields.retryAfterMs, 30000);

  // An ERROR event other than 410 is a failure too, with the next backoff step.
  const w = await s.api.expectWatch();
  w.send({ type: "ERROR", object: status(500, "InternalError", "etcd unavailable") });
  await s.api.expectNoCall();
  assert.equal(pendingDelay(s.clock), 30000);
  assert.equal(s.logs.at(-1)?.msg, "Failed to watch");
  assert.equal((s.logs.at(-1)?.err as ApiError).code, 500);
  await s.stop();
});

Deno.test("Informer: the backoff adds up to 100% jitter and starts over after two quiet minutes", async () => {
  let r = 0.5;
  const s = await synced([], "10", {}, () => r);
  const delays: number[] = [];
  for (let i = 0; i < 8; i++) {
    const w = await s.api.expectWatch();
    w.fail(new Error("boom"));
    await s.api.expectNoCall();
    const delay = pendingDelay(s.clock);
    delays.push(delay);
    s.clock.advance(delay);
  }
  assert.deepEqual(delays, [1200, 2400, 4800, 9600, 19200, 38400, 45000, 45000]);

  r = 0.999999;
  let w = await s.api.expectWatch();
  w.fail(new Error("boom"));
  await s.api.expectNoCall();
  const top = pendingDelay(s.clock);
  assert.ok(top >= 30000 && top < 60000, `jittered wait ${top} must stay below 60s`);
  s.clock.advance(top);

  // A watch that lasts more than two minutes resets the backoff.
  r = 0;
  w = await s.api.expectWatch();
  s.clock.advance(121_000);
  w.fail(new Error("reset by peer"));
  await s.api.expectNoCall();
  assert.equal(pendingDelay(s.clock), 800);
  await s.stop();
});

Deno.test("Informer: a failing list is retried with backoff and never gives up", async () => {
  const s = setup();
  const delays: number[] = [];
  for (let i = 0; i < 12; i++) {
    const list = await s.api.expectList();
    list.reject(new ApiError(403, "Forbidden", "persistentvolumes is forbidden"));
    await s.api.expectNoCall();
    const delay = pendingDelay(s.clock);
    delays.push(delay);
    s.clock.advance(delay);
  }
  assert.deepEqual(delays.slice(0, 8), [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
  assert.equal(Math.max(...delays), 30000);
  assert.equal(s.informer.hasSynced(), false);
  const errors = s.logs.filter((l) => l.level === "error");
  assert.equal(errors.length, 12);
  assert.equal(errors[0]?.msg, "Failed to list");
  assert.equal(errors[0]?.fields.retryAfterMs, 800);

  (await s.api.expectList()).resolve([pv("a", "1")], "7");
  await s.informer.waitForSync(s.ctl.signal);
  assert.deepEqual(s.events, ["add a@1"]);
  assert.equal((await s.api.expectWatch()).opts.resourceVersion, "7");
  await s.stop();
});

Deno.test("Informer: watch timeoutSeconds is random in [min, 2 × min)", async () => {
  for (const [r, want] of [[0, 300], [0.5, 450], [0.9999999, 599]] as const) {
    const s = await synced([], "1", {}, () => r);
    assert.equal((await s.api.expectWatch()).opts.timeoutSeconds, want);
    await s.stop();
  }
  const s = await synced([], "1", { minWatchTimeoutMs: 60_000 }, () => 0.25);
  assert.equal((await s.api.expectWatch()).opts.timeoutSeconds, 75);
  await s.stop();

  const seen = new Set<number>();
  const real = await synced([], "1", {}, Math.random);
  for (let i = 0; i < 20; i++) {
    const w = await real.api.expectWatch();
    seen.add(w.opts.timeoutSeconds);
    assert.ok(w.opts.timeoutSeconds >= 300 && w.opts.timeoutSeconds < 600);
    w.send({ type: "BOOKMARK", object: { metadata: { name: "", resourceVersion: `${i + 2}` } } });
    w.end();
  }
  assert.ok(seen.size > 1, "timeouts vary");
  await real.stop();
});

Deno.test("Informer: a watch the server does not close in time is cancelled and resumed", async () => {
  const s = await synced([], "10");
  const w1 = await s.api.expectWatch();
  s.clock.advance(300_000 + 29_999);
  assert.equal(w1.closed, false);
  s.clock.advance(1);
  const w2 = await s.api.expectWatch();
  assert.equal(w1.closed, true);
  assert.equal(w2.opts.resourceVersion, "10");
  assert.equal(s.api.lists.length, 1);
  await s.stop();
});

Deno.test("Informer: abort stops the loop during a watch, a list or a backoff", async () => {
  // During a watch.
  let s = await synced([pv("a", "1")], "10", { resyncMs: 1000 });
  const w = await s.api.expectWatch();
  await s.stop();
  assert.equal(w.closed, true);
  assert.deepEqual(s.events, ["add a@1"]);

  // During a list.
  s = setup();
  const list = await s.api.expectList();
  const waiting = s.informer.waitForSync(s.ctl.signal);
  await s.stop();
  await assert.rejects(waiting);
  list.resolve([pv("a", "1")], "1"); // too late: ignored
  await flushPromises();
  assert.deepEqual(s.events, []);
  assert.equal(s.api.watches.length, 0);

  // During a backoff.
  s = await synced([], "10");
  (await s.api.expectWatch()).fail(new Error("boom"));
  await s.api.expectNoCall();
  assert.equal(s.clock.pendingTimers(), 1);
  await s.stop();
  await s.api.expectNoCall();
});

Deno.test("Informer: a watch list replaces the cache at its end bookmark and goes on watching", async () => {
  const s = setup({ watchList: true });
  const w = await s.api.expectWatch();
  assert.equal(w.opts.sendInitialEvents, true);
  assert.equal(w.opts.resourceVersion, "");
  assert.equal(w.opts.allowWatchBookmarks, true);
  w.send({ type: "ADDED", object: pv("a", "1") });
  w.send({ type: "ADDED", object: pv("b", "2") });
  await flushPromises();
  assert.equal(s.informer.hasSynced(), false, "not before the end bookmark");
  assert.deepEqual(s.events, []);
  w.send(initialEventsEnd("12"));
  await flushPromises();
  assert.equal(s.informer.hasSynced(), true);
  assert.deepEqual(s.events, ["add a@1", "add b@2"]);
  assert.equal(listedResourceVersion(s.logs), "12");
  w.send({ type: "MODIFIED", object: pv("a", "13") });
  await flushPromises();
  assert.deepEqual(s.events, ["add a@1", "add b@2", "update a@1>a@13"]);
  assert.equal(s.api.lists.length, 0, "no LIST");
  await s.stop();
});

Deno.test("Informer: a watch list that ends before its end bookmark falls back to a list", async () => {
  const s = setup({ watchList: true });
  const w = await s.api.expectWatch();
  w.send({ type: "ADDED", object: pv("a", "1") });
  w.end();
  const list = await s.api.expectList();
  assert.equal(list.opts?.limit, 500);
  assert.equal(s.informer.hasSynced(), false, "the partial initial events are dropped");
  list.resolve([pv("a", "1"), pv("b", "2")], "10");
  await flushPromises();
  assert.deepEqual(s.events, ["add a@1", "add b@2"]);
  const w2 = await s.api.expectWatch();
  assert.equal(w2.opts.resourceVersion, "10");
  assert.equal(w2.opts.sendInitialEvents, undefined);
  await s.stop();
});

Deno.test("Informer: a watch list's initial events are transformed as they arrive", async () => {
  const seen: string[] = [];
  const s = setup({
    watchList: true,
    transform: (obj) => {
      seen.push(id(obj));
      return obj;
    },
  });
  const w = await s.api.expectWatch();
  w.send({ type: "ADDED", object: pv("a", "1") });
  w.send({ type: "ADDED", object: pv("b", "2") });
  await flushPromises();
  assert.deepEqual(seen, ["a@1", "b@2"], "before the end bookmark, one at a time");
  assert.equal(s.informer.hasSynced(), false);
  w.send(initialEventsEnd("12"));
  await flushPromises();
  assert.deepEqual(seen, ["a@1", "b@2"], "each object transformed once");
  assert.deepEqual(s.events, ["add a@1", "add b@2"]);
  assert.equal(s.informer.get("a")?.metadata.managedFields, undefined);
  await s.stop();
});

Deno.test("Informer: a 410 on the watch after a watch list is logged as after a list, and lists again", async () => {
  const expired = () => ({
    type: "ERROR" as const,
    object: status(410, "Expired", "too old resource version: 12 (40)"),
  });
  const lines: LogLine[][] = [];
  for (const watchList of [false, true]) {
    const s = setup({ watchList });
    if (watchList) {
      const w = await s.api.expectWatch();
      w.send({ type: "ADDED", object: pv("a", "1") });
      w.send(initialEventsEnd("12"));
    } else {
      (await s.api.expectList()).resolve([pv("a", "1")], "12");
    }
    await flushPromises();
    // After a watch list its stream goes on as the watch; after a list a watch starts.
    const watch = watchList ? s.api.watches.at(-1)! : await s.api.expectWatch();
    s.logs.length = 0;
    watch.send(expired());
    await s.api.expectNoCall();
    lines.push(s.logs.filter((l) => l.msg !== "Watch closed"));
    s.clock.advance(pendingDelay(s.clock));
    // Both list again: a plain LIST, or a new watch list.
    if (watchList) assert.equal((await s.api.expectWatch()).opts.sendInitialEvents, true);
    else await s.api.expectList();
    await s.stop();
  }
  assert.deepEqual(lines[0], lines[1]);
  assert.deepEqual(lines[0]?.map((l) => [l.level, l.msg]), [
    ["info", "Watch expired, listing again"],
  ]);
});

Deno.test("Informer: a watch list keeps none of its initial objects once they are replaced", async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  assert.equal(typeof gc, "function", "needs --v8-flags=--expose-gc (as `deno task test` runs it)");
  const api = new FakeListWatch();
  const clock = new FakeClock(0);
  const initial: WeakRef<PersistentVolume>[] = [];
  const informer = new Informer<PersistentVolume>({ kube: api, clock, random: () => 0 }, {
    resource: PERSISTENT_VOLUMES,
    resyncMs: 0,
    watchList: true,
    transform: (obj) => {
      if (obj.metadata.resourceVersion === "1") initial.push(new WeakRef(obj));
      return obj;
    },
  });
  const ctl = new AbortController();
  const done = informer.run(ctl.signal);
  const w = await api.expectWatch();
  for (let i = 0; i < 100; i++) w.send({ type: "ADDED", object: pv(`pv-${i}`, "1") });
  w.send(initialEventsEnd("2"));
  await flushPromises(2000);
  assert.equal(informer.hasSynced(), true);
  // Every object changes; the watch that delivered them stays open.
  for (let i = 0; i < 100; i++) w.send({ type: "MODIFIED", object: pv(`pv-${i}`, "3") });
  await flushPromises(2000);
  assert.equal(informer.get("pv-99")?.metadata.resourceVersion, "3");
  // A WeakRef's target outlives the task that created it: collect in a later one.
  await new Promise((resolve) => setTimeout(resolve, 0));
  gc!();
  const kept = initial.filter((ref) => ref.deref() !== undefined).length;
  assert.equal(kept, 0, `${kept} of 100 first versions still reachable while the watch is open`);
  ctl.abort();
  await done;
});

Deno.test("Informer: onListedObject is called per listed object after its transform, not for watch events", async () => {
  const calls: string[] = [];
  const s = setup({
    watchList: true,
    transform: (obj) => {
      calls.push(`transform ${id(obj)}`);
      return obj;
    },
    onListedObject: () => calls.push("listed"),
  });
  const w = await s.api.expectWatch();
  w.send({ type: "ADDED", object: pv("a", "1") });
  w.send({ type: "ADDED", object: pv("b", "2") });
  await flushPromises();
  assert.deepEqual(
    calls,
    ["transform a@1", "listed", "transform b@2", "listed"],
    "as each initial event is read, before the end bookmark",
  );
  assert.equal(s.informer.hasSynced(), false);
  w.send(initialEventsEnd("12"));
  w.send({ type: "MODIFIED", object: pv("a", "13") });
  await flushPromises();
  assert.deepEqual(calls.slice(4), ["transform a@13"], "a watch event is not a listed object");
  // A 410 lists again: those objects count as listed too.
  w.send({ type: "ERROR", object: status(410, "Expired", "too old resource version: 13 (40)") });
  await s.api.expectNoCall();
  s.clock.advance(800);
  const w2 = await s.api.expectWatch();
  assert.equal(w2.opts.sendInitialEvents, true);
  w2.send({ type: "ADDED", object: pv("c", "41") });
  await flushPromises();
  assert.deepEqual(calls.slice(5), ["transform c@41", "listed"]);
  await s.stop();
});

Deno.test("Informer: onListedObject is called per item of a LIST, before the cache is replaced", async () => {
  const calls: string[] = [];
  const s = setup({ onListedObject: () => calls.push(`listed, synced=${s.informer.hasSynced()}`) });
  const list = await s.api.expectList();
  list.resolve([pv("a", "1"), pv("b", "2"), pv("c", "3")], "10");
  await flushPromises();
  assert.deepEqual(calls, Array(3).fill("listed, synced=false"));
  assert.equal(s.informer.hasSynced(), true);
  await s.stop();
});
