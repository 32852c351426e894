/**
 * How informers fill their cache, against MemoryApiServer over HTTP: a streaming watch list
 * when the server serves one, else a paginated LIST (limit/continue), restarted when its
 * continue token expired.
 */

import assert from "node:assert/strict";
import {
  type KubeApi,
  type ListOptions,
  type ObjectList,
  PERSISTENT_VOLUMES,
  type Resource,
  type WatchEvent,
  type WatchOptions,
} from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { connectionFromKubeconfigs } from "../../lib/kube/config.ts";
import { Informer } from "../../lib/kube/informer.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { KubeObject, PersistentVolume } from "../../lib/kube/types.ts";

function pv(name: string): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: { csi: { driver: "csi/test", volumeHandle: name }, accessModes: ["ReadWriteOnce"] },
  };
}

interface Env extends AsyncDisposable {
  server: MemoryApiServer;
  client: KubeClient;
  clock: FakeClock;
}

async function env(count: number): Promise<Env> {
  const clock = new FakeClock();
  const server = await MemoryApiServer.start({ clock, compactionIntervalMs: 0 });
  for (let i = 0; i < count; i++) server.create(PERSISTENT_VOLUMES, pv(`pv${i}`));
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver.kubeconfig", text: server.kubeconfig() },
  ]);
  const client = new KubeClient({ connection, clock });
  return {
    server,
    client,
    clock,
    [Symbol.asyncDispose]: async () => {
      await client.close();
      await server.close();
    },
  };
}

/** Runs an informer until `check` passes, then stops it. */
async function withInformer(
  api: KubeApi,
  clock: FakeClock,
  opts: { watchList?: boolean; pageSize?: number },
  check: (informer: Informer<PersistentVolume>, log: FakeLogger) => Promise<void>,
): Promise<void> {
  const log = new FakeLogger();
  const informer = new Informer<PersistentVolume>({ kube: api, clock, log }, {
    resource: PERSISTENT_VOLUMES,
    resyncMs: 0,
    ...opts,
  });
  const ac = new AbortController();
  const running = informer.run(ac.signal);
  try {
    await informer.waitForSync(AbortSignal.timeout(10_000));
    await check(informer, log);
  } finally {
    ac.abort();
    await running;
  }
}

/** The resourceVersion of the informer's last cache replacement (list or watch list). */
function listedResourceVersion(log: FakeLogger): unknown {
  return log.withMessage("Listed").at(-1)?.fields.resourceVersion;
}

function names(informer: Informer<PersistentVolume>): string[] {
  return informer.list().map((o) => o.metadata.name).sort();
}

Deno.test("an informer starts with a watch list and keeps watching on the same stream", async () => {
  await using e = await env(3);
  await withInformer(e.client, e.clock, { watchList: true }, async (informer, log) => {
    assert.deepEqual(names(informer), ["pv0", "pv1", "pv2"]);
    assert.equal(listedResourceVersion(log), e.server.resourceVersion);
    e.server.create(PERSISTENT_VOLUMES, pv("pv3"));
    for (let i = 0; i < 500 && informer.get("pv3") === undefined; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok(informer.get("pv3"), "pv3 arrives on the watch list's stream");
  });
  const requests = e.server.requests;
  assert.deepEqual(requests.map((r) => r.verb), ["watch"], "no LIST, one watch");
  const q = requests[0]!.query;
  assert.equal(q.sendInitialEvents, "true");
  assert.equal(q.resourceVersionMatch, "NotOlderThan");
  assert.equal(q.allowWatchBookmarks, "true");
  assert.equal(q.resourceVersion, "");
});

Deno.test("a watch list the server refuses falls back to a paginated list, then a watch from its resourceVersion", async () => {
  await using e = await env(5);
  e.server.failNext({ verb: "watch", status: 400, message: "no watch lists here" });
  await withInformer(e.client, e.clock, { watchList: true, pageSize: 2 }, async (informer) => {
    assert.deepEqual(names(informer), ["pv0", "pv1", "pv2", "pv3", "pv4"]);
    await e.server.whenWatching(1);
  });
  const requests = e.server.requests;
  assert.deepEqual(requests.map((r) => r.verb), ["watch", "list", "list", "list", "watch"]);
  const lists = requests.filter((r) => r.verb === "list");
  assert.deepEqual(lists.map((r) => r.query.limit), ["2", "2", "2"]);
  assert.equal(lists[0]!.query.continue, undefined);
  assert.ok(lists[1]!.query.continue && lists[2]!.query.continue);
  const watch = requests.at(-1)!.query;
  assert.equal(watch.resourceVersion, e.server.resourceVersion);
  assert.equal(watch.sendInitialEvents, undefined);
});

Deno.test("a paginated list is not cut short: 1200 objects in pages of 500", async () => {
  await using e = await env(1200);
  await withInformer(e.client, e.clock, {}, (informer) => {
    assert.equal(informer.list().length, 1200);
    return Promise.resolve();
  });
  const lists = e.server.requests.filter((r) => r.verb === "list");
  assert.equal(lists.length, 3);
  assert.ok(lists.every((r) => r.query.limit === "500"));
});

/** The real client, but a compaction happens right after the first page is answered. */
class CompactAfterFirstPage implements KubeApi {
  #api: KubeClient;
  #server: MemoryApiServer;
  #pages = 0;
  constructor(api: KubeClient, server: MemoryApiServer) {
    this.#api = api;
    this.#server = server;
  }
  async list<T extends KubeObject>(res: Resource, opts?: ListOptions): Promise<ObjectList<T>> {
    const page = await this.#api.list<T>(res, opts);
    if (++this.#pages === 1) {
      this.#server.create(PERSISTENT_VOLUMES, pv("pv-late"));
      this.#server.compact();
    }
    return page;
  }
  watch<T extends KubeObject>(res: Resource, opts: WatchOptions): AsyncIterable<WatchEvent<T>> {
    return this.#api.watch<T>(res, opts);
  }
  get = this.#unused;
  create = this.#unused;
  update = this.#unused;
  patch = this.#unused;
  delete = this.#unused;
  #unused(): never {
    throw new Error("not used by this test");
  }
}

Deno.test("a list whose continue token expired starts over in one answer", async () => {
  await using e = await env(5);
  const api = new CompactAfterFirstPage(e.client, e.server);
  await withInformer(api, e.clock, { pageSize: 2 }, (informer, log) => {
    assert.deepEqual(names(informer), ["pv-late", "pv0", "pv1", "pv2", "pv3", "pv4"]);
    assert.equal(listedResourceVersion(log), e.server.resourceVersion);
    return Promise.resolve();
  });
  const lists = e.server.requests.filter((r) => r.verb === "list");
  assert.deepEqual(lists.map((r) => [r.query.limit, r.query.continue !== undefined]), [
    ["2", false],
    ["2", true],
    [undefined, false],
  ]);
});

Deno.test("MemoryApiServer pages lists with limit/continue and answers an expired token with 410", async () => {
  await using e = await env(3);
  const get = async (query: string) => {
    const res = await fetch(`${e.server.url}/api/v1/persistentvolumes?${query}`);
    return { status: res.status, body: await res.json() };
  };
  const first = await get("limit=2");
  assert.equal(first.status, 200);
  assert.deepEqual(first.body.items.map((i: KubeObject) => i.metadata.name), ["pv0", "pv1"]);
  assert.equal(first.body.metadata.remainingItemCount, 1);
  const token = first.body.metadata.continue as string;
  assert.deepEqual(
    JSON.parse(atob(token.replace(/-/g, "+").replace(/_/g, "/"))),
    { v: "meta.k8s.io/v1", rv: Number(e.server.resourceVersion), start: "pv1\u0000" },
  );
  e.server.create(PERSISTENT_VOLUMES, pv("pv00"));
  const second = await get(`limit=2&continue=${token}`);
  assert.deepEqual(second.body.items.map((i: KubeObject) => i.metadata.name), ["pv2"]);
  assert.equal(second.body.metadata.continue, undefined);
  assert.equal(second.body.metadata.resourceVersion, first.body.metadata.resourceVersion);

  e.server.compact();
  const expired = await get(`limit=2&continue=${token}`);
  assert.equal(expired.status, 410);
  assert.equal(expired.body.reason, "Expired");
  assert.match(
    expired.body.message,
    /^The provided continue parameter is too old to display a consistent list result\. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results\. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list\.[A-Za-z0-9_-]+$/,
  );
  const bad = await get("limit=2&continue=notatoken");
  assert.equal(bad.status, 400);
  assert.match(bad.body.message, /^continue key is not valid: /);
});
