import assert from "node:assert/strict";
import {
  ApiError,
  EVENTS,
  LEASES,
  PERSISTENT_VOLUMES,
  VOLUME_ATTACHMENTS,
  type WatchEvent,
} from "./api.ts";
import { KubeClient } from "./client.ts";
import { Http1Transport } from "../wire/http1/transport.ts";
import type { Transport } from "../wire/http1/api.ts";
import { errorFromResponse } from "./request/status_errors.ts";
import { connectionFromKubeconfigs } from "./config.ts";
import type { KubeObject } from "./types.ts";
import { lengthFrame, writeObject, writeWatchEvent } from "../../testkit/kube_protobuf_writer.ts";
import {
  expiredStatus,
  lease,
  notFoundStatus,
  persistentVolume,
  volumeAttachment,
  withoutManagedFields,
} from "../../testkit/kube_protobuf_fixtures.ts";

const PROTOBUF = "application/vnd.kubernetes.protobuf";
const ACCEPT = "application/vnd.kubernetes.protobuf, application/json";

interface Seen {
  method: string;
  url: string;
  accept: string;
  contentType: string;
}

/** A server on 127.0.0.1 answering with `handler`, noting each request. */
async function serve(
  handler: (req: Request) => Response | Promise<Response>,
): Promise<{ url: string; seen: Seen[] } & AsyncDisposable> {
  const seen: Seen[] = [];
  const listening = Promise.withResolvers<number>();
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: (addr) => listening.resolve(addr.port),
  }, (req) => {
    seen.push({
      method: req.method,
      url: req.url,
      accept: req.headers.get("accept") ?? "",
      contentType: req.headers.get("content-type") ?? "",
    });
    return handler(req);
  });
  const port = await listening.promise;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    [Symbol.asyncDispose]: async () => {
      await server.shutdown();
      await server.finished;
    },
  };
}

function client(url: string, protobuf?: boolean): Promise<KubeClient> {
  const text = JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server: url } }],
    users: [{ name: "u", user: {} }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
    "current-context": "ctx",
  });
  return connectionFromKubeconfigs([{ file: "/test/kubeconfig", text }]).then((connection) =>
    new KubeClient({ connection }, protobuf === undefined ? {} : { protobuf })
  );
}

function protobuf(bytes: Uint8Array, status = 200, type = PROTOBUF): Response {
  return new Response(bytes as Uint8Array<ArrayBuffer>, {
    status,
    headers: { "content-type": type },
  });
}

function stream(chunks: Uint8Array[], type = `${PROTOBUF};stream=watch`): Response {
  return new Response(
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(c);
        controller.close();
      },
    }),
    { headers: { "content-type": type } },
  );
}

async function watchAll(c: KubeClient): Promise<WatchEvent<KubeObject>[]> {
  const events: WatchEvent<KubeObject>[] = [];
  for await (
    const ev of c.watch(VOLUME_ATTACHMENTS, {
      resourceVersion: "5",
      timeoutSeconds: 30,
      allowWatchBookmarks: true,
      signal: new AbortController().signal,
    })
  ) events.push(ev);
  return events;
}

Deno.test("KubeClient asks for protobuf in reads of its kinds and decodes the answer", async () => {
  const va = volumeAttachment();
  await using server = await serve(() => protobuf(writeObject(va)));
  await using c = await client(server.url);
  assert.deepStrictEqual(
    await c.get(VOLUME_ATTACHMENTS, "csi-0123456789abcdef"),
    withoutManagedFields(va),
  );
  assert.equal(server.seen[0]!.accept, ACCEPT);
});

Deno.test("KubeClient lists in protobuf: items get kind and apiVersion as from JSON", async () => {
  const items = [persistentVolume("a"), persistentVolume("b")].map(withoutManagedFields);
  const list = {
    kind: "PersistentVolumeList",
    apiVersion: "v1",
    metadata: { resourceVersion: "900", continue: "tok" },
    items: items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest),
  };
  await using server = await serve(() => protobuf(writeObject(list)));
  await using c = await client(server.url);
  const page = await c.list(PERSISTENT_VOLUMES, { limit: 500 });
  assert.deepStrictEqual(page, { items, resourceVersion: "900", continue: "tok" });
  // The same answer in JSON gives the same page.
  await using jsonServer = await serve(() =>
    new Response(JSON.stringify(list), { headers: { "content-type": "application/json" } })
  );
  await using j = await client(jsonServer.url);
  assert.deepStrictEqual(await j.list(PERSISTENT_VOLUMES, { limit: 500 }), page);
  assert.equal(jsonServer.seen[0]!.accept, ACCEPT);
});

Deno.test("KubeClient: a protobuf Status error is the ApiError of its JSON form", async () => {
  const status = notFoundStatus();
  await using server = await serve(() => protobuf(writeObject(status), 404));
  await using c = await client(server.url);
  const expected = errorFromResponse(404, JSON.stringify(status));
  await assert.rejects(c.get(VOLUME_ATTACHMENTS, "csi-x"), (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.deepStrictEqual([err.code, err.reason, err.message], [
      expected.code,
      expected.reason,
      expected.message,
    ]);
    return true;
  });
  // A protobuf error body that is not a Status: the reason of the code.
  await using bad = await serve(() => protobuf(Uint8Array.of(1, 2, 3), 503));
  await using b = await client(bad.url);
  await assert.rejects(
    b.get(LEASES, "l", { namespace: "ns" }),
    (err: unknown) =>
      err instanceof ApiError && err.code === 503 && err.reason === "ServiceUnavailable" &&
      /in protobuf that is not a Status/.test(err.message),
  );
});

Deno.test("KubeClient: a protobuf answer that does not decode is InvalidResponse", async () => {
  const cases = [
    new TextEncoder().encode(JSON.stringify(volumeAttachment())),
    writeObject(volumeAttachment()).subarray(0, 40),
    writeObject(lease()), // another kind than asked for still decodes: its JSON form
  ];
  for (const [i, body] of cases.entries()) {
    await using server = await serve(() => protobuf(body));
    await using c = await client(server.url);
    if (i === 2) {
      assert.equal((await c.get(VOLUME_ATTACHMENTS, "x")).kind, "Lease");
      continue;
    }
    await assert.rejects(
      c.get(VOLUME_ATTACHMENTS, "x"),
      (err: unknown) =>
        err instanceof ApiError && err.reason === "InvalidResponse" &&
        /the answer is not Kubernetes protobuf/.test(err.message),
    );
  }
});

Deno.test("KubeClient: patches and updates of its kinds send JSON and read a protobuf answer", async () => {
  const va = volumeAttachment();
  const held = lease();
  await using server = await serve((req) =>
    protobuf(writeObject(new URL(req.url).pathname.includes("/leases/") ? held : va))
  );
  await using c = await client(server.url);
  assert.deepStrictEqual(
    await c.patch(VOLUME_ATTACHMENTS, "csi-0123456789abcdef", {
      type: "merge",
      body: { metadata: { finalizers: ["f"] } },
    }, { subresource: "status" }),
    withoutManagedFields(va),
  );
  await c.patch(PERSISTENT_VOLUMES, "pv", { type: "json", body: [] }).catch(() => {});
  assert.deepStrictEqual(
    await c.update(LEASES, withoutManagedFields(held) as unknown as KubeObject, {
      namespace: "kube-system",
    }),
    withoutManagedFields(held),
  );
  assert.deepStrictEqual(server.seen.map((s) => [s.method, s.accept, s.contentType]), [
    ["PATCH", ACCEPT, "application/merge-patch+json"],
    ["PATCH", ACCEPT, "application/json-patch+json"],
    ["PUT", ACCEPT, "application/json"],
  ]);
});

Deno.test("KubeClient: the 404 of a patch in protobuf is the ApiError of its JSON form", async () => {
  // Every detach's status write after its finalizer removal meets this answer.
  const status = notFoundStatus();
  await using server = await serve(() => protobuf(writeObject(status), 404));
  await using c = await client(server.url);
  const expected = errorFromResponse(404, JSON.stringify(status));
  await assert.rejects(
    c.patch(VOLUME_ATTACHMENTS, "csi-x", { type: "merge", body: {} }, { subresource: "status" }),
    (err: unknown) =>
      err instanceof ApiError && err.code === 404 && err.reason === expected.reason &&
      err.message === expected.message,
  );
});

Deno.test("KubeClient: Events and deletes stay JSON; protobuf: false asks JSON only", async () => {
  await using server = await serve(() =>
    new Response(JSON.stringify(withoutManagedFields(volumeAttachment())), {
      headers: { "content-type": "application/json" },
    })
  );
  await using c = await client(server.url);
  await c.patch(EVENTS, "e", { type: "merge", body: { count: 2 } }, { namespace: "ns" })
    .catch(() => {});
  await c.list(EVENTS, { namespace: "ns" }).catch(() => {});
  await c.delete(VOLUME_ATTACHMENTS, "x").catch(() => {});
  await using j = await client(server.url, false);
  await j.get(VOLUME_ATTACHMENTS, "x");
  await j.patch(VOLUME_ATTACHMENTS, "x", { type: "merge", body: { metadata: {} } });
  // A JSON answer to the protobuf Accept is read as JSON.
  assert.deepStrictEqual(
    await c.patch(VOLUME_ATTACHMENTS, "x", { type: "merge", body: { metadata: {} } }),
    withoutManagedFields(volumeAttachment()),
  );
  assert.deepStrictEqual(server.seen.map((s) => [s.method, s.accept]), [
    ["PATCH", "application/json"],
    ["GET", "application/json"],
    ["DELETE", "application/json"],
    ["GET", "application/json"],
    ["PATCH", "application/json"],
    ["PATCH", ACCEPT],
  ]);
});

Deno.test("KubeClient watch reads protobuf frames split anywhere, ERROR events included", async () => {
  const a = volumeAttachment("a");
  const b = volumeAttachment("b");
  const body = new Uint8Array([
    ...lengthFrame(writeWatchEvent("ADDED", writeObject(a))),
    ...lengthFrame(writeWatchEvent("MODIFIED", writeObject(b))),
    ...lengthFrame(writeWatchEvent("ERROR", writeObject(expiredStatus()))),
  ]);
  const chunks = [
    body.subarray(0, 2),
    body.subarray(2, 50),
    body.subarray(50, 51),
    body.subarray(51),
  ];
  await using server = await serve(() => stream(chunks));
  await using c = await client(server.url);
  const events = await watchAll(c);
  assert.deepStrictEqual(events, [
    { type: "ADDED", object: withoutManagedFields(a) },
    { type: "MODIFIED", object: withoutManagedFields(b) },
    { type: "ERROR", object: expiredStatus() },
  ]);
  assert.equal(server.seen[0]!.accept, ACCEPT);
  assert.match(server.seen[0]!.url, /watch=true/);
});

Deno.test("KubeClient watch: hostile protobuf streams end the watch with InvalidResponse", async () => {
  const good = lengthFrame(writeWatchEvent("ADDED", writeObject(volumeAttachment())));
  const huge = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 1, 2, 3);
  const cases: [string, Uint8Array[], RegExp, number][] = [
    [
      "a 4 GiB frame length",
      [good, huge],
      /object to decode was longer than maximum allowed size/,
      1,
    ],
    [
      "an object switched to JSON mid-stream",
      [good, lengthFrame(writeWatchEvent("ADDED", new TextEncoder().encode('{"kind":"x"}')))],
      /k8s\\x00 prefix is missing/,
      1,
    ],
    [
      "a JSON event line in a protobuf stream",
      [new TextEncoder().encode('{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n')],
      /object to decode was longer|malformed protobuf|ended inside a frame/,
      0,
    ],
    ["a body ending inside a frame", [good, good.subarray(0, 10)], /ended inside a frame/, 1],
    [
      "an unknown event type",
      [lengthFrame(writeWatchEvent("EXPLODED", writeObject(volumeAttachment())))],
      /got invalid watch event type: EXPLODED/,
      0,
    ],
  ];
  for (const [what, chunks, message, before] of cases) {
    await using server = await serve(() => stream(chunks));
    await using c = await client(server.url);
    const events: string[] = [];
    await assert.rejects(
      (async () => {
        for await (
          const ev of c.watch(VOLUME_ATTACHMENTS, {
            resourceVersion: "5",
            timeoutSeconds: 30,
            allowWatchBookmarks: true,
            signal: new AbortController().signal,
          })
        ) events.push(ev.type);
      })(),
      (err: unknown) => {
        assert.ok(err instanceof ApiError, `${what}: ${err}`);
        assert.equal(err.reason, "InvalidResponse", what);
        assert.match(err.message, message, what);
        return true;
      },
    );
    assert.equal(events.length, before, what);
  }
});

Deno.test("KubeClient watch: a JSON answer to the protobuf Accept is read as JSON lines", async () => {
  const line = JSON.stringify({ type: "ADDED", object: withoutManagedFields(volumeAttachment()) });
  await using server = await serve(() =>
    stream([new TextEncoder().encode(line + "\n")], "application/json")
  );
  await using c = await client(server.url);
  const events = await watchAll(c);
  assert.deepStrictEqual(events, [JSON.parse(line)]);
});

Deno.test("KubeClient watch: an error answer in protobuf is the Status' ApiError", async () => {
  const forbidden = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: "no watch for you",
    reason: "Forbidden",
    code: 403,
  };
  await using server = await serve(() => protobuf(writeObject(forbidden), 403));
  await using c = await client(server.url);
  await assert.rejects(
    watchAll(c),
    (err: unknown) =>
      err instanceof ApiError && err.code === 403 && err.reason === "Forbidden" &&
      err.message === "no watch for you",
  );
});

Deno.test("KubeClient reads a protobuf answer of known length in one read, not as a stream", async () => {
  const va = volumeAttachment();
  await using server = await serve(() => protobuf(writeObject(va)));
  const connection = await connectionFromKubeconfigs([{
    file: "/test/kubeconfig",
    text: JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server: server.url } }],
      users: [{ name: "u", user: {} }],
      contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
      "current-context": "ctx",
    }),
  }]);
  const inner = new Http1Transport({ insecureSkipTlsVerify: false });
  const streamed: string[] = [];
  const watched: Transport = {
    get generation() {
      return inner.generation;
    },
    renew: (generation) => inner.renew(generation),
    close: () => inner.close(),
    send: async (url, request) => {
      const res = await inner.send(url, request);
      return {
        status: res.status,
        headers: res.headers,
        get body() {
          streamed.push(request.method);
          return res.body;
        },
        ...(res.text !== undefined && { text: () => res.text!() }),
        ...(res.bytes !== undefined && { bytes: () => res.bytes!() }),
      };
    },
  };
  await using c = new KubeClient({
    connection,
    transport: { transport: () => watched, release: () => inner.close() },
  });
  assert.deepStrictEqual(
    await c.get(VOLUME_ATTACHMENTS, "csi-0123456789abcdef"),
    withoutManagedFields(va),
  );
  await c.patch(VOLUME_ATTACHMENTS, "csi-0123456789abcdef", { type: "merge", body: {} });
  assert.deepStrictEqual(streamed, []);
});
