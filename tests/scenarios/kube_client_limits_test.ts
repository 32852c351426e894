/**
 * KubeClient against a raw HTTP/1.1 server that breaks the limits a well-behaved API server
 * keeps: watch events over client-go's 16 MiB, lines that never end, bodies without end, event
 * types that do not exist.
 */

import assert from "node:assert/strict";
import { ApiError, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { MAX_WATCH_EVENT_BYTES } from "../../lib/kube/request/watch_stream.ts";
import { isTransportError } from "../../lib/wire/http1/errors.ts";
import { RawHttpServer } from "../../testkit/http1/raw_server.ts";
import { plainConnection } from "../../testkit/harness/client_fixtures.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { within } from "../../testkit/harness/within.ts";

/** Head of a watch answer whose body ends when the connection closes. */
const WATCH_HEAD = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";

/**
 * Every event of a watch of VolumeAttachments, or the error it ended with; the events are pushed
 * to `events` as they come.
 */
async function drain(
  client: KubeClient,
  opts: { idleTimeoutMs?: number; timeoutSeconds?: number } = {},
  events: string[] = [],
): Promise<{ events: string[]; error?: unknown }> {
  try {
    for await (
      const ev of client.watch(VOLUME_ATTACHMENTS, {
        resourceVersion: "1",
        timeoutSeconds: opts.timeoutSeconds ?? 60,
        allowWatchBookmarks: true,
        signal: new AbortController().signal,
        ...(opts.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: opts.idleTimeoutMs }),
      })
    ) events.push(ev.type);
    return { events };
  } catch (error) {
    return { events, error };
  }
}

/** Heap in use after a forced GC (`deno task test` runs with --expose-gc). */
function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("this test needs --v8-flags=--expose-gc");
  gc();
  return Deno.memoryUsage().heapUsed;
}

const MiB = 1024 * 1024;

/** Waits (polling, at most ~10 s) until `cond` holds. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), `timed out waiting for ${what}`);
}

Deno.test("KubeClient watch refuses an event over client-go's 16 MiB and keeps none of it", async () => {
  const big = "x".repeat(MAX_WATCH_EVENT_BYTES + MiB);
  await using server = RawHttpServer.start(async (ex) => {
    await ex.write(WATCH_HEAD);
    await ex.write(
      `{"type":"ADDED","object":{"metadata":{"name":"small"}}}\n` +
        `{"type":"ADDED","object":{"metadata":{"name":"big"},"data":"${big}"}}\n`,
    );
    return "close";
  });
  await using client = new KubeClient({ connection: plainConnection(server.url) });
  const before = heapAfterGc();
  const { events, error } = await within(drain(client), 20_000, "the watch");
  assert.deepEqual(events, ["ADDED"], "the small event came first");
  assert.ok(
    error instanceof ApiError && error.reason === "InvalidResponse" &&
      /object to decode was longer than maximum allowed size/.test(error.message),
    String(error),
  );
  // The server's own copy of the line is let go once its write ends.
  await until(() => server.ended === 1, "the server to finish its answer");
  const grown = heapAfterGc() - before;
  assert.ok(grown < 8 * MiB, `heap grew by ${grown} bytes`);
});

Deno.test("KubeClient watch: a line that streams without ending does not keep the idle watchdog alive", async () => {
  await using server = RawHttpServer.start(async (ex) => {
    await ex.write(WATCH_HEAD);
    await ex.write(`{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n{"type":"ADD`);
    await ex.flood("E", { delayMs: 20 });
    return "close";
  });
  const clock = new FakeClock();
  await using client = new KubeClient({ connection: plainConnection(server.url), clock }, {
    watchGraceMs: 0,
  });
  const events: string[] = [];
  let settled = false;
  const watching = drain(client, { idleTimeoutMs: 300, timeoutSeconds: 10 }, events)
    .finally(() => settled = true);
  await until(() => events.length === 1, "the first event");
  // The clock moves 100 ms at a time while the endless line keeps arriving: the watch ends when
  // 300 ms have passed since the last event, not at its 10 s deadline.
  for (let step = 1; step <= 3; step++) {
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(settled, false, `still watching after ${step - 1}00 ms`);
    clock.advance(100);
  }
  const { error } = await within(watching, 5_000, "the watch");
  assert.equal(error, undefined, "ended as idle, not by an error");
  assert.deepEqual(events, ["ADDED"]);
});

Deno.test("KubeClient watch fails on an event type a watch does not have, as client-go does", async () => {
  await using server = RawHttpServer.start(async (ex) => {
    await ex.write(WATCH_HEAD);
    await ex.write(
      `{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n` +
        `{"type":"SURPRISE","object":{"metadata":{"name":"b"}}}\n` +
        `{"type":"DELETED","object":{"metadata":{"name":"a"}}}\n`,
    );
    return "close";
  });
  await using client = new KubeClient({ connection: plainConnection(server.url) });
  const { events, error } = await within(drain(client), 10_000, "the watch");
  assert.deepEqual(events, ["ADDED"], "nothing after the unknown type is delivered");
  assert.ok(
    error instanceof ApiError && error.reason === "InvalidResponse" &&
      error.message.endsWith(
        "unable to decode an event from the watch stream: got invalid watch event type: SURPRISE",
      ),
    String(error),
  );
});

Deno.test("KubeClient refuses a non-watch answer over 64 MiB with a too-large error", async () => {
  await using server = RawHttpServer.start(async (ex) => {
    await ex.write(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
    );
    await ex.write('{"kind":"PersistentVolumeList","items":[');
    await ex.flood(new Uint8Array(MiB).fill(0x20), { maxBytes: 100 * MiB });
    await ex.write('],"metadata":{"resourceVersion":"1"}}');
    return "close";
  });
  await using client = new KubeClient({ connection: plainConnection(server.url) });
  const before = heapAfterGc();
  const err = await within(client.list(PERSISTENT_VOLUMES).catch((e) => e), 30_000, "the list");
  assert.ok(
    err instanceof ApiError && err.reason === "ConnectionError" &&
      isTransportError(err.cause, "too-large") && /over 67108864 bytes/.test(err.message),
    String(err),
  );
  await until(() => server.ended === 1, "the server to finish its answer");
  const grown = heapAfterGc() - before;
  assert.ok(grown < 8 * MiB, `heap grew by ${grown} bytes`);
});

Deno.test("KubeClient ends a request whose body keeps streaming at its deadline", async () => {
  await using server = RawHttpServer.start(async (ex) => {
    await ex.write(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
    );
    await ex.flood(" ", { delayMs: 20 });
    return "close";
  });
  await using client = new KubeClient({ connection: plainConnection(server.url) }, {
    timeoutMs: 200,
  });
  const started = performance.now();
  const err = await within(client.list(PERSISTENT_VOLUMES).catch((e) => e), 10_000, "the list");
  const ms = performance.now() - started;
  assert.ok(
    err instanceof ApiError && err.reason === "Timeout" &&
      /request did not complete within 0\.8s/.test(err.message),
    String(err),
  );
  assert.ok(ms < 5_000, `ended after ${ms} ms`);
});
