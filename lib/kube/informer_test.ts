import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { Informer, type InformerOptions } from "./informer.ts";
import { ApiError, PERSISTENT_VOLUMES } from "./api.ts";
import type { Fields, Logger } from "../observe/logger.ts";
import type { KubeObject, PersistentVolume, Status } from "./types.ts";
import { FakeListWatch, flushPromises } from "../../testkit/fakes/fake_list_watch.ts";

interface LogLine {
  level: "info" | "error";
  msg: string;
  err?: unknown;
  fields: Fields;
}

/** The resourceVersion of the last cache replacement (list or watch list) the informer logged. */
function listedResourceVersion(lines: LogLine[]): unknown {
  return lines.findLast((l) => l.msg === "Listed")?.fields.resourceVersion;
}

/** A logger that keeps every line, at every verbosity. */
function recordingLogger(lines: LogLine[], bound: Fields = {}): Logger {
  const info = (msg: string, fields?: Fields) =>
    lines.push({ level: "info", msg, fields: { ...bound, ...fields } });
  return {
    info,
    error: (err, msg, fields) =>
      lines.push({ level: "error", msg, err, fields: { ...bound, ...fields } }),
    v: () => ({ info }),
    enabled: () => true,
    with: (fields) => recordingLogger(lines, { ...bound, ...fields }),
  };
}

function pv(name: string, rv: string, extra: Record<string, unknown> = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name,
      resourceVersion: rv,
      managedFields: [{ manager: "kube-controller-manager", operation: "Update" }],
    },
    spec: { csi: { driver: "d", volumeHandle: `h-${name}` }, ...extra },
  };
}

/** The bookmark that ends a watch list's initial events. */
function initialEventsEnd(resourceVersion: string) {
  return {
    type: "BOOKMARK" as const,
    object: {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "",
        resourceVersion,
        annotations: { "k8s.io/initial-events-end": "true" },
      },
    } as unknown as PersistentVolume,
  };
}

function status(code: number, reason: string, message: string): Status {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    code,
    reason,
    message,
  };
}

/** `name@rv` of an object, for compact event records. */
function id(obj: KubeObject): string {
  return `${obj.metadata.name}@${obj.metadata.resourceVersion}`;
}

interface Setup {
  api: FakeListWatch;
  clock: FakeClock;
  informer: Informer<PersistentVolume>;
  /** Events as `add a@1`, `update a@1>a@2`, `delete a@2`. */
  events: string[];
  /** Every [old, new] pair given to update. */
  updates: Array<[PersistentVolume, PersistentVolume]>;
  deleted: PersistentVolume[];
  logs: LogLine[];
  ctl: AbortController;
  done: Promise<void>;
  /** Aborts, waits for run() and checks that no timer is left behind. */
  stop(): Promise<void>;
}

function setup(
  opts: Partial<InformerOptions<PersistentVolume>> = {},
  random: () => number = () => 0,
): Setup {
  const api = new FakeListWatch();
  const clock = new FakeClock(0);
  const logs: LogLine[] = [];
  const informer = new Informer<PersistentVolume>(
    { kube: api, clock, log: recordingLogger(logs), random },
    { resource: PERSISTENT_VOLUMES, resyncMs: 0, ...opts },
  );
  const events: string[] = [];
  const updates: Array<[PersistentVolume, PersistentVolume]> = [];
  const deleted: PersistentVolume[] = [];
  informer.addHandlers({
    add: (o) => events.push(`add ${id(o)}`),
    update: (o, n) => {
      events.push(`update ${id(o)}>${id(n)}`);
      updates.push([o, n]);
    },
    delete: (o) => {
      events.push(`delete ${id(o)}`);
      deleted.push(o);
    },
  });
  const ctl = new AbortController();
  const done = informer.run(ctl.signal);
  return {
    api,
    clock,
    informer,
    events,
    updates,
    deleted,
    logs,
    ctl,
    done,
    async stop() {
      ctl.abort();
      await done;
      assert.equal(clock.pendingTimers(), 0, "timers left after run() resolved");
    },
  };
}

/** The delay of the only pending timer (the backoff sleep). */
function pendingDelay(clock: FakeClock): number {
  assert.equal(clock.pendingTimers(), 1, "expected exactly one pending timer");
  return clock.nextTimerAt()! - clock.now();
}

/** Starts a setup and answers its first list with `items` at resourceVersion `rv`. */
async function synced(
  items: PersistentVolume[],
  rv: string,
  opts: Partial<InformerOptions<PersistentVolume>> = {},
  random?: () => number,
): Promise<Setup> {
  const s = setup(opts, random);
  (await s.api.expectList()).resolve(items, rv);
  await flushPromises();
  return s;
}

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
