/**
 * KubeClient's retries against MemoryApiServer's scripted throttling (`429`/`503` with
 * `Retry-After`) and, through the loopback TCP proxy, broken connections.
 */

import assert from "node:assert/strict";
import { ApiError, LEASES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { KubeClient, type RequestInfo, type RetryInfo } from "../../lib/kube/client.ts";
import { isBrokenConnection } from "../../lib/kube/request/connection_errors.ts";
import { MAX_RETRIES, retryAfterMs } from "../../lib/kube/request/retry.ts";
import { type Clock, type Timer } from "../../lib/clock.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { TcpProxy } from "../../testkit/tcp_proxy.ts";
import { RecordingKubeObserver } from "../../testkit/fakes/recording_kube_observer.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import {
  plainConnection as connectionTo,
  plainPersistentVolume as pv,
  plainVolumeAttachment as va,
} from "../../testkit/harness/client_fixtures.ts";
import type { Fields, Logger } from "../../lib/observe/logger.ts";

/** A clock whose sleeps end at once; it records each one and moves its time by it. */
class InstantClock implements Clock {
  #now = 1_700_000_000_000;
  readonly sleeps: number[] = [];
  now(): number {
    return this.#now;
  }
  wallNow(): number {
    return this.#now;
  }
  setTimer(_ms: number, _fn: () => void): Timer {
    return { cancel: () => {} };
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.sleeps.push(ms);
    this.#now += ms;
    return Promise.resolve();
  }
}

/** A logger that keeps the lines of verbosity 4. */
function v4Lines(): { log: Logger; lines: { msg: string; fields: Fields }[] } {
  const lines: { msg: string; fields: Fields }[] = [];
  const make = (level: number): Logger => ({
    enabled: (v: number) => v <= 4,
    v: (v: number) => make(v),
    with: () => make(level),
    info: (msg: string, fields: Fields = {}) => {
      if (level === 4) lines.push({ msg, fields });
    },
    error: () => {},
  } as unknown as Logger);
  return { log: make(0), lines };
}

interface Env extends AsyncDisposable {
  server: MemoryApiServer;
  client: KubeClient;
  clock: InstantClock;
  retries: readonly RetryInfo[];
  tries: readonly RequestInfo[];
  takes: number;
  lines: { msg: string; fields: Fields }[];
}

async function env(): Promise<Env> {
  const server = await MemoryApiServer.start();
  const clock = new InstantClock();
  const { log, lines } = v4Lines();
  const observer = new RecordingKubeObserver();
  const e: Env = {
    server,
    clock,
    retries: observer.retries,
    tries: observer.tries,
    takes: 0,
    lines,
    client: undefined as unknown as KubeClient,
    [Symbol.asyncDispose]: async () => {
      await e.client.close();
      await server.close();
    },
  };
  e.client = new KubeClient({
    connection: connectionTo(server.url),
    clock,
    log,
    rateLimiter: {
      take: () => {
        e.takes++;
        return Promise.resolve();
      },
    },
    observer,
  });
  return e;
}

Deno.test("a PATCH answered 429 with Retry-After is sent again after the delay, each try rate limited", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  e.server.failNext({ verb: "patch", status: 429, retryAfterSeconds: 1, times: 3 });
  const patched = await e.client.patch<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: { status: { attached: true } },
  }, { subresource: "status" });
  assert.equal(patched.status?.attached, true);

  const patches = e.server.requests.filter((r) => r.verb === "patch");
  assert.equal(patches.length, 4);
  for (const p of patches) assert.deepEqual(p.body, { status: { attached: true } });
  assert.deepEqual(e.clock.sleeps, [1000, 1000, 1000]);
  assert.equal(e.takes, 4, "every try takes a token");
  assert.deepEqual(e.tries.map((t) => t.code), [429, 429, 429, 200]);
  assert.deepEqual(
    e.retries.map((r) => [r.method, r.verb, r.resource, r.code, r.attempt, r.delayMs]),
    [1, 2, 3].map((n) => ["PATCH", "patch", "volumeattachments", 429, n, 1000]),
  );
  assert.equal(e.retries[0]?.host, new URL(e.server.url).host);
  assert.equal(e.lines.length, 3, "each retry is logged at v4");
  assert.equal(e.lines[0]?.fields.status, 429);
});

Deno.test("PUT, POST and DELETE answered 503 with Retry-After are replayed and applied once", async () => {
  await using e = await env();
  e.server.failNext({ verb: "create", status: 503, retryAfterSeconds: 2 });
  await e.client.create(PERSISTENT_VOLUMES, pv("pv1"));
  const stored = e.server.get<PersistentVolume>(PERSISTENT_VOLUMES, "pv1");

  e.server.failNext({ verb: "update", status: 503, retryAfterSeconds: 0 });
  const updated = await e.client.update(PERSISTENT_VOLUMES, {
    ...stored,
    metadata: { ...stored.metadata, labels: { a: "b" } },
  });
  assert.deepEqual(updated.metadata.labels, { a: "b" });

  e.server.failNext({ verb: "delete", status: 500, retryAfterSeconds: 1 });
  await e.client.delete(PERSISTENT_VOLUMES, "pv1");
  assert.equal(e.server.find(PERSISTENT_VOLUMES, "pv1"), undefined);

  assert.deepEqual(e.clock.sleeps, [2000, 0, 1000]);
  assert.deepEqual(
    e.server.requests.map((r) => r.verb),
    ["create", "create", "update", "update", "delete", "delete"],
  );
});

Deno.test("a request still throttled after 10 retries fails with the server's answer", async () => {
  await using e = await env();
  e.server.failNext({ verb: "get", status: 429, retryAfterSeconds: 1, times: 100 });
  await assert.rejects(
    e.client.get(LEASES, "l1", { namespace: "default" }),
    (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.code, 429);
      assert.equal(err.reason, "TooManyRequests");
      assert.equal(
        err.message,
        "the server responded with HTTP 429: Too many requests, please try again later.",
      );
      return true;
    },
  );
  assert.equal(e.server.requests.length, MAX_RETRIES + 1);
  assert.equal(e.retries.length, MAX_RETRIES);
});

Deno.test("errors without Retry-After, and other codes, are not retried", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  for (const status of [500, 503, 429, 409, 403, 404]) {
    e.server.failNext({ verb: "patch", status });
    await assert.rejects(
      e.client.patch(VOLUME_ATTACHMENTS, "va1", { type: "merge", body: {} }),
      (err: unknown) => err instanceof ApiError && err.code === status,
    );
  }
  // A 4xx other than 429 is not retried even with Retry-After.
  e.server.failNext({ verb: "patch", status: 409, retryAfterSeconds: 1 });
  await assert.rejects(e.client.patch(VOLUME_ATTACHMENTS, "va1", { type: "merge", body: {} }));
  assert.equal(e.server.requests.length, 7);
  assert.deepEqual(e.retries, []);
});

Deno.test("Retry-After: only whole seconds count, and the wait is capped", () => {
  assert.equal(retryAfterMs("1"), 1000);
  assert.equal(retryAfterMs(" 3 "), 3000);
  assert.equal(retryAfterMs("0"), 0);
  assert.equal(retryAfterMs("-5"), 0);
  assert.equal(retryAfterMs("3600"), 30_000);
  assert.equal(retryAfterMs("1.5"), undefined);
  assert.equal(retryAfterMs("Wed, 21 Oct 2015 07:28:00 GMT"), undefined);
  assert.equal(retryAfterMs(""), undefined);
  assert.equal(retryAfterMs(undefined), undefined);
});

Deno.test("aborting during a Retry-After wait rejects with the signal's reason and sends nothing more", async () => {
  const server = await MemoryApiServer.start();
  const clock = new FakeClock();
  const client = new KubeClient({ connection: connectionTo(server.url), clock });
  try {
    server.create(VOLUME_ATTACHMENTS, va("va1"));
    server.failNext({ verb: "patch", status: 429, retryAfterSeconds: 5, times: 5 });
    const ac = new AbortController();
    const pending = client.patch(VOLUME_ATTACHMENTS, "va1", { type: "merge", body: {} }, {
      signal: ac.signal,
    });
    // The request's own timeout is a timer of the clock too: wait for the answer to be read and
    // the Retry-After wait to be the one timer left.
    for (let i = 0; i < 400 && clock.nextTimerAt() !== clock.now() + 5000; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal(clock.pendingTimers(), 1);
    assert.equal(clock.nextTimerAt(), clock.now() + 5000);
    const reason = new Error("renew deadline");
    ac.abort(reason);
    await assert.rejects(pending, (err: unknown) => err === reason);
    assert.equal(server.requests.length, 1);
  } finally {
    await client.close();
    await server.close();
  }
});

Deno.test("a GET whose connection breaks before the answer is retried after 1s; a PATCH is not", async () => {
  await using e = await env();
  await using proxy = await TcpProxy.start({ port: Number(new URL(e.server.url).port) });
  const observer = new RecordingKubeObserver();
  // A fresh client for each request, so that it opens a new connection: the runtime itself
  // resends a request whose reused keep-alive connection closes before the answer.
  const fresh = () =>
    new KubeClient({
      connection: connectionTo(`http://127.0.0.1:${proxy.port}`),
      clock: e.clock,
      observer,
    });
  e.server.create(PERSISTENT_VOLUMES, pv("pv1"));

  proxy.breakNextRequests(2);
  {
    await using client = fresh();
    const got = await client.get<PersistentVolume>(PERSISTENT_VOLUMES, "pv1");
    assert.equal(got.metadata.name, "pv1");
  }
  assert.equal(proxy.broken, 2);
  assert.deepEqual(observer.retries.map((r) => [r.method, r.code, r.delayMs]), [
    ["GET", 0, 1000],
    ["GET", 0, 1000],
  ]);

  proxy.breakNextRequests(1);
  {
    await using client = fresh();
    await assert.rejects(
      client.patch(PERSISTENT_VOLUMES, "pv1", { type: "merge", body: {} }),
      (err: unknown) => {
        assert.ok(isBrokenConnection(err), `a broken connection, got ${err}`);
        return true;
      },
    );
  }
  assert.equal(proxy.broken, 3);
  assert.equal(observer.retries.length, 2, "a write on a broken connection is not retried");
  assert.equal(e.server.requests.filter((r) => r.verb === "patch").length, 0);
});
