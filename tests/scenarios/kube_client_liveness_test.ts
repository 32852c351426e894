/**
 * Dead connections: KubeClient and the informer against MemoryApiServer through the loopback
 * TCP proxy, which goes silent without closing (a vanished API server node, a load balancer
 * failing over). Idle timeouts run on a fake clock.
 */

import assert from "node:assert/strict";
import {
  ApiError,
  PERSISTENT_VOLUMES,
  VOLUME_ATTACHMENTS,
  type WatchEvent,
} from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { IdleWatchdog } from "../../lib/kube/request/watch_stream.ts";
import { Informer } from "../../lib/kube/informer.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { TcpProxy } from "../../testkit/tcp_proxy.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import {
  plainConnection as connectionTo,
  plainPersistentVolume as pv,
  plainVolumeAttachment as va,
} from "../../testkit/harness/client_fixtures.ts";

/** Real time passes (sockets, the server) without relying on its length. */
function tick(ms = 5): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Waits (polling real time, at most ~5 s) until `cond` holds. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (cond()) return;
    await tick();
  }
  assert.fail(`timed out waiting for ${what}`);
}

interface Env extends AsyncDisposable {
  server: MemoryApiServer;
  proxy: TcpProxy;
  clock: FakeClock;
  client: KubeClient;
}

async function env(timeoutMs = 30_000): Promise<Env> {
  const server = await MemoryApiServer.start({ bookmarkIntervalMs: 0 });
  const proxy = await TcpProxy.start({ port: Number(new URL(server.url).port) });
  const clock = new FakeClock();
  const client = new KubeClient({
    connection: connectionTo(`http://127.0.0.1:${proxy.port}`),
    clock,
  }, { timeoutMs });
  return {
    server,
    proxy,
    clock,
    client,
    [Symbol.asyncDispose]: async () => {
      await client.close();
      await proxy.close();
      await server.close();
    },
  };
}

/** Three requests at once, so that the pool keeps three idle connections. */
async function pooledConnections(e: Env): Promise<void> {
  e.server.create(PERSISTENT_VOLUMES, pv("pv1"));
  await Promise.all([1, 2, 3].map(() => e.client.get(PERSISTENT_VOLUMES, "pv1")));
  assert.equal(e.proxy.accepted, 3);
}

Deno.test("IdleWatchdog fires once after the idle time, counted from the last touch", () => {
  const clock = new FakeClock(0);
  let fired = 0;
  const w = new IdleWatchdog(clock, 30_000, () => fired++);
  clock.advance(20_000);
  w.touch();
  clock.advance(29_999);
  assert.equal(fired, 0);
  clock.advance(1);
  assert.equal(fired, 1);
  assert.equal(w.fired, true);
  clock.advance(100_000);
  assert.equal(fired, 1);
  const stopped = new IdleWatchdog(clock, 1000, () => fired++);
  stopped.stop();
  clock.advance(5000);
  assert.equal(fired, 1);
  assert.equal(clock.pendingTimers(), 0);
  assert.throws(() => new IdleWatchdog(clock, 0, () => {}), RangeError);
});

Deno.test("a watch silent for its idle time ends, and the silent pooled connections are not reused", async () => {
  // A reused silent connection would fail the GET below with a timeout after 2 s.
  await using e = await env(2_000);
  await pooledConnections(e);
  e.proxy.silenceExisting();

  const events: WatchEvent<VolumeAttachment>[] = [];
  const watching = (async () => {
    for await (
      const ev of e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
        resourceVersion: e.server.resourceVersion,
        timeoutSeconds: 600,
        allowWatchBookmarks: true,
        signal: new AbortController().signal,
        idleTimeoutMs: 30_000,
      })
    ) events.push(ev);
  })();
  // The watch went out on a pooled connection that is silent: nothing comes back.
  await until(() => e.clock.pendingTimers() > 0, "the idle timer");
  await tick(50);
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  e.clock.advance(29_999);
  await tick(20);
  e.clock.advance(1);
  await watching; // ends without an error
  assert.deepEqual(events, []);

  // The other pooled connection is silent too; it must not carry the next request.
  const accepted = e.proxy.accepted;
  const got = await e.client.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  assert.equal(got.metadata.name, "va1");
  assert.ok(e.proxy.accepted > accepted, "a new connection");
});

Deno.test("a watch that keeps delivering is not cut by the idle timeout", async () => {
  await using e = await env();
  const ac = new AbortController();
  const events: string[] = [];
  const watching = (async () => {
    for await (
      const ev of e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
        resourceVersion: e.server.resourceVersion,
        timeoutSeconds: 600,
        allowWatchBookmarks: true,
        signal: ac.signal,
        idleTimeoutMs: 30_000,
      })
    ) events.push(ev.type);
  })();
  await e.server.whenWatching(1);
  for (let i = 0; i < 4; i++) {
    e.clock.advance(20_000);
    e.server.bookmark();
    await until(() => events.length === i + 1, `bookmark ${i + 1}`);
  }
  assert.equal(e.server.watchCount, 1, "still the first watch, 80 s later");
  ac.abort();
  await watching;
});

Deno.test("a request that times out closes the pooled connections, so the next one opens a new connection", async () => {
  await using e = await env(300);
  await pooledConnections(e);
  e.proxy.silenceExisting();
  const getting = e.client.get(PERSISTENT_VOLUMES, "pv1");
  // The request timeout runs on the client's clock.
  await until(() => e.clock.pendingTimers() > 0, "the request timer");
  e.clock.advance(300);
  await assert.rejects(
    getting,
    (err: unknown) => err instanceof ApiError && err.reason === "Timeout",
  );
  const got = await e.client.get<PersistentVolume>(PERSISTENT_VOLUMES, "pv1");
  assert.equal(got.metadata.name, "pv1");
  assert.ok(e.proxy.accepted > 3, "a new connection");
});

Deno.test("an informer whose watch went silent resumes from its resourceVersion and sees a new object", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va0"));
  const informer = new Informer<VolumeAttachment>({ kube: e.client, clock: e.clock }, {
    resource: VOLUME_ATTACHMENTS,
    resyncMs: 0,
  });
  const added: string[] = [];
  informer.addHandlers({ add: (obj) => added.push(obj.metadata.name) });
  const ac = new AbortController();
  const running = informer.run(ac.signal);
  await informer.waitForSync(ac.signal);
  await until(() => e.server.watchCount === 1, "the watch");
  // The resourceVersion the informer watches from: no event came since its list.
  const rv = e.server.requests.find((r) => r.watch)?.query.resourceVersion;
  assert.equal(rv, e.server.resourceVersion);

  e.proxy.silenceExisting();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  await tick(50);
  assert.deepEqual(added, ["va0"], "the silent watch delivers nothing");
  const watchesBefore = e.server.requests.filter((r) => r.watch).length;
  e.clock.advance(30_000);
  await until(() => added.includes("va1"), "va1 through a new watch");
  const watches = e.server.requests.filter((r) => r.watch);
  // At least one new watch; on a loaded machine a second may start before `until` looks. Each
  // resumes from the informer's resourceVersion: nothing is listed again.
  const resumed = watches.slice(watchesBefore);
  assert.ok(resumed.length >= 1, "a new watch");
  assert.equal(resumed[0]?.query.resourceVersion, rv, "resumed, no new list");
  assert.equal(e.server.requests.filter((r) => r.verb === "list").length, 1);
  ac.abort();
  await running;
});

Deno.test("a large answer that keeps arriving is not cut by the request timeout; a stalled one is", async () => {
  const encoder = new TextEncoder();
  let stall = false;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(encoder.encode('{"kind":"PersistentVolumeList","apiVersion":"v1",'));
        for (let i = 0; i < 12; i++) {
          await tick(stall && i === 4 ? 2000 : 50);
          controller.enqueue(encoder.encode(i === 0 ? '"items":[' : ""));
          controller.enqueue(encoder.encode(" "));
        }
        controller.enqueue(encoder.encode('],"metadata":{"resourceVersion":"7"}}'));
        controller.close();
      },
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  });
  const client = new KubeClient({
    connection: connectionTo(`http://127.0.0.1:${server.addr.port}`),
  }, { timeoutMs: 450 });
  try {
    const list = await client.list(PERSISTENT_VOLUMES);
    assert.equal(list.resourceVersion, "7", "about 600 ms in all, never 450 ms without a byte");
    stall = true;
    await assert.rejects(
      client.list(PERSISTENT_VOLUMES),
      (err: unknown) => err instanceof ApiError && err.reason === "Timeout",
    );
  } finally {
    await client.close();
    await server.shutdown();
  }
});
