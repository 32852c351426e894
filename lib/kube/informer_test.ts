import assert from "node:assert/strict";
import { Informer } from "./informer.ts";
import { PERSISTENT_VOLUMES } from "./api.ts";
import type { PersistentVolume } from "./types.ts";
import { FakeListWatch, flushPromises } from "../../testkit/fakes/fake_list_watch.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import {
  id,
  listedResourceVersion,
  pv,
  setup,
  synced,
} from "../../testkit/harness/informer_rig.ts";

Deno.test("Informer: the first list fires adds, fills the cache and marks it synced", async () => {
  const s = setup();
  assert.equal(s.informer.hasSynced(), false);
  let syncedSeen = false;
  const wait = s.informer.waitForSync(s.ctl.signal).then(() => syncedSeen = true);
  const list = await s.api.expectList();
  assert.equal(list.resource, PERSISTENT_VOLUMES);
  assert.equal(list.opts?.resourceVersion, undefined, "a consistent list, not from cache");
  await flushPromises();
  assert.equal(syncedSeen, false);
  list.resolve([pv("a", "1"), pv("b", "2")], "10");
  await wait;
  assert.equal(s.informer.hasSynced(), true);
  assert.deepEqual(s.events, ["add a@1", "add b@2"]);
  assert.deepEqual(s.informer.list().map(id).sort(), ["a@1", "b@2"]);
  assert.equal(s.informer.get("a")?.metadata.resourceVersion, "1");
  assert.equal(s.informer.get("zz"), undefined);
  assert.equal(listedResourceVersion(s.logs), "10");
  await s.informer.waitForSync(s.ctl.signal);

  const w = await s.api.expectWatch();
  assert.equal(w.opts.resourceVersion, "10");
  assert.equal(w.opts.allowWatchBookmarks, true);
  assert.equal(w.opts.timeoutSeconds, 300);
  await s.stop();
});

Deno.test("Informer: watch events fire add, update(old, new) and delete(last known)", async () => {
  const s = await synced([pv("a", "1")], "10");
  const w = await s.api.expectWatch();
  const inHandler: Array<string | undefined> = [];
  s.informer.addHandlers({
    update: (_o, n) => inHandler.push(s.informer.get(n.metadata.name)?.metadata.resourceVersion),
  });
  s.events.length = 0;

  w.send({ type: "ADDED", object: pv("b", "11") });
  w.send({ type: "MODIFIED", object: pv("a", "12") });
  w.send({ type: "MODIFIED", object: pv("a", "12") }); // duplicate: still delivered
  w.send({ type: "ADDED", object: pv("a", "13") }); // ADDED for a cached object: an update
  w.send({ type: "MODIFIED", object: pv("c", "14") }); // MODIFIED for an unknown object: an add
  w.send({ type: "DELETED", object: pv("b", "15") });
  w.send({ type: "DELETED", object: pv("nope", "16") }); // not cached: ignored
  await flushPromises();

  assert.deepEqual(s.events, [
    "add b@11",
    "update a@1>a@12",
    "update a@12>a@12",
    "update a@12>a@13",
    "add c@14",
    "delete b@15",
  ]);
  assert.deepEqual(inHandler, ["12", "12", "13"], "cache is updated before the callback runs");
  assert.equal(s.deleted[0]?.metadata.resourceVersion, "15", "delete gets the final state");
  assert.deepEqual(s.informer.list().map(id).sort(), ["a@13", "c@14"]);
  assert.equal(s.api.lists.length, 1);
  w.end();
  // The next watch starts from the last event's resourceVersion, the ignored delete's included.
  assert.equal((await s.api.expectWatch()).opts.resourceVersion, "16");
  await s.stop();
});

Deno.test("Informer: managedFields are stripped from listed and watched objects", async () => {
  const listed = pv("a", "1");
  const s = await synced([listed], "10", {
    transform: (o) => {
      assert.equal(o.metadata.managedFields, undefined, "user transform runs after the strip");
      o.metadata.labels = { seen: "yes" };
      return o;
    },
  });
  const w = await s.api.expectWatch();
  const watched = pv("b", "11");
  w.send({ type: "ADDED", object: watched });
  await flushPromises();

  for (const name of ["a", "b"]) {
    const cached = s.informer.get(name)!;
    assert.equal("managedFields" in cached.metadata, false);
    assert.deepEqual(cached.metadata.labels, { seen: "yes" });
    assert.equal(cached.spec.csi?.volumeHandle, `h-${name}`);
  }
  assert.equal(listed.metadata.managedFields?.length, 1, "the given object is not modified");
  assert.equal(watched.metadata.managedFields?.length, 1, "the given object is not modified");
  assert.equal(s.updates.length, 0);
  await s.stop();
});

Deno.test("Informer: resync delivers update(obj, obj) for every cached object every resyncMs", async () => {
  const s = await synced([pv("a", "1"), pv("b", "2")], "10", { resyncMs: 60_000 });
  await s.api.expectWatch();
  s.events.length = 0;
  s.clock.advance(59_999);
  assert.deepEqual(s.events, []);
  s.clock.advance(1);
  assert.deepEqual(s.events.sort(), ["update a@1>a@1", "update b@2>b@2"]);
  for (const [o, n] of s.updates) assert.equal(o, n, "the same object on both sides");
  s.clock.advance(120_000);
  assert.equal(s.events.length, 6);
  await s.stop();
});

Deno.test("Informer: resyncMs 0 never resyncs", async () => {
  const s = await synced([pv("a", "1")], "10");
  const w = await s.api.expectWatch();
  w.send({ type: "MODIFIED", object: pv("a", "11") });
  await flushPromises();
  s.clock.advance(3_600_000 * 24);
  w.end();
  await s.api.expectWatch();
  assert.deepEqual(s.events, ["add a@1", "update a@1>a@11"]);
  await s.stop();
});

Deno.test("Informer: a throwing handler is logged and does not stop the others or the informer", async () => {
  const s = setup();
  const later: string[] = [];
  s.informer.addHandlers({
    add: () => {
      throw new Error("handler bug");
    },
    update: () => {
      throw new Error("handler bug");
    },
  });
  s.informer.addHandlers({ add: (o) => later.push(id(o)), update: (_o, n) => later.push(id(n)) });
  (await s.api.expectList()).resolve([pv("a", "1")], "10");
  const w = await s.api.expectWatch();
  w.send({ type: "MODIFIED", object: pv("a", "11") });
  w.send({ type: "ADDED", object: pv("b", "12") });
  await flushPromises();
  assert.deepEqual(later, ["a@1", "a@11", "b@12"]);
  assert.deepEqual(s.events, ["add a@1", "update a@1>a@11", "add b@12"]);
  const failures = s.logs.filter((l) => l.msg === "Event handler failed");
  assert.equal(failures.length, 3);
  assert.deepEqual(failures[1]?.fields, {
    informer: "persistentvolumes",
    event: "update",
    object: "a",
  });
  assert.equal(s.informer.hasSynced(), true);
  await s.stop();
});

Deno.test("Informer: addHandlers after sync replays an add for every cached object", async () => {
  const s = await synced([pv("a", "1"), pv("b", "2")], "10");
  const w = await s.api.expectWatch();
  const seen: string[] = [];
  s.informer.addHandlers({
    add: (o) => seen.push(`add ${id(o)}`),
    update: (o, n) => seen.push(`update ${id(o)}>${id(n)}`),
  });
  assert.deepEqual(seen.sort(), ["add a@1", "add b@2"]);
  w.send({ type: "MODIFIED", object: pv("b", "3") });
  await flushPromises();
  assert.deepEqual(seen.at(-1), "update b@2>b@3");
  await s.stop();
});

Deno.test("Informer: namespaced objects are keyed namespace/name", async () => {
  const s = await synced([], "1");
  const w = await s.api.expectWatch();
  const obj = pv("x", "2");
  obj.metadata.namespace = "ns1";
  w.send({ type: "ADDED", object: obj });
  await flushPromises();
  assert.equal(s.informer.get("ns1/x")?.metadata.name, "x");
  assert.equal(s.informer.get("x"), undefined);
  await s.stop();
});

Deno.test("Informer.run() rejects a second start; the constructor rejects bad options", async () => {
  const s = await synced([], "1");
  await assert.rejects(s.informer.run(s.ctl.signal), /already started/);
  await s.stop();
  const api = new FakeListWatch();
  assert.throws(
    () => new Informer({ kube: api }, { resource: PERSISTENT_VOLUMES, resyncMs: -1 }),
    RangeError,
  );
  assert.throws(
    () =>
      new Informer({ kube: api }, {
        resource: PERSISTENT_VOLUMES,
        resyncMs: 0,
        minWatchTimeoutMs: 10,
      }),
    RangeError,
  );
});

Deno.test("Informer.waitForSync() rejects when its signal aborts first", async () => {
  const api = new FakeListWatch();
  const informer = new Informer<PersistentVolume>(
    { kube: api, clock: new FakeClock(0) },
    { resource: PERSISTENT_VOLUMES, resyncMs: 0 },
  );
  const ctl = new AbortController();
  const p = informer.waitForSync(ctl.signal);
  ctl.abort(new Error("shutting down"));
  await assert.rejects(p, /shutting down/);
  await assert.rejects(informer.waitForSync(ctl.signal), /shutting down/);
});
