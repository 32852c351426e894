import assert from "node:assert/strict";
import { join } from "node:path";
import { ApiError, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS, type WatchEvent } from "./api.ts";
import { KubeClient } from "./client.ts";
import { isBrokenConnection } from "./request/connection_errors.ts";
import { errorFromResponse } from "./request/status_errors.ts";
import { WatchFrameSplitter } from "./request/watch_stream.ts";
import { TransportError } from "../wire/http1/errors.ts";
import { type ClusterConnection, connectionFromKubeconfigs, loadConnection } from "./config.ts";
import type { Fields, Logger } from "../observe/logger.ts";
import type { KubeObject } from "./types.ts";
import { hasOpenssl, makePki } from "../../testkit/pki.ts";
import { ok, RawHttpServer } from "../../testkit/http1/raw_server.ts";
import { plainConnection } from "../../testkit/harness/client_fixtures.ts";

interface TestServer extends AsyncDisposable {
  url: string;
  /** Remote ports of the requests, one per request: equal ports mean a reused connection. */
  ports: number[];
  headers: Headers[];
}

/** A server on 127.0.0.1 answering with `handler`. */
function serve(
  handler: (req: Request) => Response | Promise<Response>,
  tls?: { cert: string; key: string },
): Promise<TestServer> {
  return new Promise((resolve) => {
    const ports: number[] = [];
    const headers: Headers[] = [];
    const server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      ...tls,
      onListen: (addr) =>
        resolve({
          url: `${tls ? "https" : "http"}://127.0.0.1:${addr.port}`,
          ports,
          headers,
          [Symbol.asyncDispose]: async () => {
            await server.shutdown();
            await server.finished;
          },
        }),
    }, (req, info) => {
      ports.push(info.remoteAddr.port);
      headers.push(new Headers(req.headers)); // a copy: HTTP/2 request headers go with the request
      return handler(req);
    });
  });
}

/** The connection of a kubeconfig for `server` (no insecure-skip-tls-verify for http on purpose). */
function connectionFor(
  server: string,
  user: Record<string, unknown> = {},
): Promise<ClusterConnection> {
  const text = JSON.stringify({
    clusters: [{ name: "c", cluster: { server } }],
    users: [{ name: "u", user }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
    "current-context": "ctx",
  });
  return connectionFromKubeconfigs([{ file: "/test/kubeconfig", text }]);
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

const PV = { apiVersion: "v1", kind: "PersistentVolume", metadata: { name: "pv1" }, spec: {} };

Deno.test("KubeClient talks to an http:// server without insecure-skip-tls-verify, on one connection", async () => {
  await using server = await serve(() => json(PV));
  await using client = new KubeClient(
    { connection: await connectionFor(server.url, { token: "t0k3n" }) },
    { userAgent: "csi-attacher/v9.9.9" },
  );
  for (let i = 0; i < 3; i++) {
    const pv = await client.get(PERSISTENT_VOLUMES, "pv1");
    assert.equal(pv.metadata.name, "pv1");
  }
  assert.equal(new Set(server.ports).size, 1, "keep-alive: one connection for all requests");
  const h = server.headers[0]!;
  assert.equal(h.get("authorization"), "Bearer t0k3n");
  // A PV read asks for protobuf; this server answers JSON, which is read as before.
  assert.equal(h.get("accept"), "application/vnd.kubernetes.protobuf, application/json");
  assert.equal(h.get("user-agent"), "csi-attacher/v9.9.9");
});

Deno.test("KubeClient sends each request the credentials of the moment, content type per request", async () => {
  await using server = await serve(() => json(PV));
  // Credentials as a token file or exec plugin gives them: the same until they rotate.
  let credentials: Record<string, string | string[]> = {
    Authorization: "Bearer one",
    "Impersonate-Group": ["g1", "g2"],
  };
  const connection: ClusterConnection = {
    server: server.url,
    tls: { insecureSkipTlsVerify: false },
    headers: () => Promise.resolve({ ...credentials }),
  };
  await using client = new KubeClient({ connection });
  const patch = { type: "merge" as const, body: { metadata: { labels: { a: "b" } } } };
  await client.get(PERSISTENT_VOLUMES, "pv1");
  await client.patch(PERSISTENT_VOLUMES, "pv1", patch);
  await client.patch(PERSISTENT_VOLUMES, "pv1", { type: "json", body: [] });
  await client.get(PERSISTENT_VOLUMES, "pv1");
  credentials = { "Impersonate-Group": ["g1", "g3"], Authorization: "Bearer one" };
  await client.get(PERSISTENT_VOLUMES, "pv1");
  credentials = { Authorization: "Bearer two" };
  await client.patch(PERSISTENT_VOLUMES, "pv1", patch);
  const seen = server.headers.map((h) => [
    h.get("authorization"),
    h.get("impersonate-group"),
    h.get("content-type"),
  ]);
  assert.deepEqual(seen, [
    ["Bearer one", "g1, g2", null],
    ["Bearer one", "g1, g2", "application/merge-patch+json"],
    ["Bearer one", "g1, g2", "application/json-patch+json"],
    ["Bearer one", "g1, g2", null],
    ["Bearer one", "g1, g3", null],
    ["Bearer two", null, "application/merge-patch+json"],
  ]);
});

Deno.test("KubeClient logs each request at verbosity 6, without headers", async () => {
  const lines: [number, string, Fields | undefined][] = [];
  const logger = (verbosity: number): Logger => ({
    info: (msg, fields) => lines.push([0, msg, fields]),
    error: () => {},
    v: (level) => ({ info: (msg, fields) => lines.push([level, msg, fields]) }),
    enabled: (level) => level <= verbosity,
    with: () => logger(verbosity),
  });
  await using server = await serve(() => json(PV));
  await using quiet = new KubeClient({
    connection: await connectionFor(server.url),
    log: logger(5),
  });
  await quiet.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(lines.length, 0);
  await using client = new KubeClient({
    connection: await connectionFor(server.url, { token: "secret-token" }),
    log: logger(6),
  });
  await client.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(lines.length, 1);
  const [level, msg, fields] = lines[0]!;
  assert.equal(level, 6);
  assert.equal(msg, "HTTP");
  assert.equal(fields?.verb, "GET");
  assert.equal(fields?.url, `${server.url}/api/v1/persistentvolumes/pv1`);
  assert.equal(fields?.status, 200);
  assert.equal(typeof fields?.milliseconds, "number");
  assert.ok(!JSON.stringify(lines).includes("secret-token"));
});

Deno.test("KubeClient sends basic auth and impersonation from the kubeconfig", async () => {
  await using server = await serve(() => json(PV));
  await using client = new KubeClient({
    connection: await connectionFor(server.url, {
      username: "admin",
      password: "pw",
      as: "bob",
      "as-groups": ["g1", "g2"],
    }),
  });
  await client.get(PERSISTENT_VOLUMES, "pv1");
  const h = server.headers[0]!;
  assert.equal(h.get("authorization"), `Basic ${btoa("admin:pw")}`);
  assert.equal(h.get("impersonate-user"), "bob");
  // Repeated headers, which the server reads as two groups (joined here by the Headers API).
  assert.equal(h.get("impersonate-group"), "g1, g2");
});

Deno.test("KubeClient turns an error without a Status body into 'the server responded with HTTP <code>'", async () => {
  await using server = await serve(() =>
    new Response("<html>bad   gateway</html>\n", { status: 502 })
  );
  await using client = new KubeClient({ connection: await connectionFor(server.url) });
  await assert.rejects(
    client.get(PERSISTENT_VOLUMES, "pv1"),
    (err: unknown) =>
      err instanceof ApiError && err.code === 502 && err.reason === "Unknown" &&
      err.message === "the server responded with HTTP 502: <html>bad gateway</html>",
  );
  assert.equal(errorFromResponse(404, "").message, "the server responded with HTTP 404");
  assert.equal(errorFromResponse(404, "").reason, "NotFound");
  assert.equal(errorFromResponse(403, `{"kind":"Status","code":403}`).reason, "Forbidden");
});

Deno.test("KubeClient reports a refused connection as ApiError(0, ConnectionError) with the cause", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  await using client = new KubeClient({
    connection: await connectionFor(`http://127.0.0.1:${port}`),
  });
  await assert.rejects(client.get(PERSISTENT_VOLUMES, "pv1"), (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.code, 0);
    assert.equal(err.reason, "ConnectionError");
    assert.ok(
      err.message.startsWith(`Get "http://127.0.0.1:${port}/api/v1/persistentvolumes/pv1": `),
      err.message,
    );
    assert.ok(err.cause instanceof Error);
    return true;
  });
  const ac = new AbortController();
  const watch = client.watch(VOLUME_ATTACHMENTS, {
    resourceVersion: "1",
    timeoutSeconds: 60,
    allowWatchBookmarks: true,
    signal: ac.signal,
  });
  await assert.rejects(
    (async () => {
      for await (const _ of watch) assert.fail("no event expected");
    })(),
    (err: unknown) => err instanceof ApiError && err.reason === "ConnectionError",
  );
});

Deno.test("KubeClient times out a request that gets no answer, and aborts on its signal", async () => {
  const { promise: release, resolve } = Promise.withResolvers<void>();
  await using server = await serve(async () => {
    await release;
    return json(PV);
  });
  try {
    await using client = new KubeClient({ connection: await connectionFor(server.url) }, {
      timeoutMs: 50,
    });
    await assert.rejects(
      client.get(PERSISTENT_VOLUMES, "pv1"),
      (err: unknown) => err instanceof ApiError && err.code === 0 && err.reason === "Timeout",
    );
    const ac = new AbortController();
    const reason = new Error("stop");
    const pending = client.get(PERSISTENT_VOLUMES, "pv1", { signal: ac.signal });
    ac.abort(reason);
    await assert.rejects(pending, (err: unknown) => err === reason);
  } finally {
    resolve();
  }
});

Deno.test("KubeClient watch parses lines split across chunks, multi-byte characters included", async () => {
  const gate = Promise.withResolvers<void>();
  const enc = new TextEncoder();
  const first = `{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n{"type":"MODIFIED","obj`;
  const second = enc.encode(
    `ect":{"metadata":{"name":"b","annotations":{"x":"\u00e9\u20ac"}}}}\n{"type":"DELETED","object":{"metadata":{"name":"c"}}}`,
  );
  const euro = second.indexOf(0xe2); // split inside the 3-byte euro sign
  await using server = await serve(() =>
    new Response(
      new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(enc.encode(first));
          await gate.promise;
          controller.enqueue(second.slice(0, euro + 1));
          controller.enqueue(second.slice(euro + 1));
          controller.close();
        },
      }),
      { headers: { "content-type": "application/json" } },
    )
  );
  await using client = new KubeClient({ connection: await connectionFor(server.url) });
  const events: WatchEvent<KubeObject>[] = [];
  for await (
    const ev of client.watch(VOLUME_ATTACHMENTS, {
      resourceVersion: "5",
      timeoutSeconds: 30,
      allowWatchBookmarks: false,
      signal: new AbortController().signal,
    })
  ) {
    events.push(ev);
    if (events.length === 1) gate.resolve();
  }
  assert.deepEqual(events.map((e) => [e.type, e.object.metadata?.name]), [
    ["ADDED", "a"],
    ["MODIFIED", "b"],
    ["DELETED", "c"],
  ]);
  const modified = events[1]!.object as KubeObject;
  assert.deepEqual(modified.metadata.annotations, { x: "\u00e9\u20ac" });
});

Deno.test("KubeClient watch rejects when the connection breaks mid-stream", async () => {
  // A raw TCP server: one complete event in a chunked body, then the connection drops.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const served = (async () => {
    const conn = await listener.accept();
    const buf = new Uint8Array(4096);
    await conn.read(buf);
    const line = `{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n`;
    await conn.write(new TextEncoder().encode(
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n" +
        `${line.length.toString(16)}\r\n${line}\r\n`,
    ));
    conn.close();
  })();
  try {
    await using client = new KubeClient({
      connection: await connectionFor(`http://127.0.0.1:${listener.addr.port}`),
    });
    const seen: string[] = [];
    await assert.rejects(
      (async () => {
        for await (
          const ev of client.watch(VOLUME_ATTACHMENTS, {
            resourceVersion: "1",
            timeoutSeconds: 30,
            allowWatchBookmarks: true,
            signal: new AbortController().signal,
          })
        ) seen.push(ev.type);
      })(),
      (err: unknown) =>
        err instanceof ApiError && err.code === 0 && err.reason === "ConnectionError",
    );
    assert.deepEqual(seen, ["ADDED"]);
  } finally {
    await served;
    listener.close();
  }
});

Deno.test("KubeClient watch is cut when it outlives timeoutSeconds plus the grace period", async () => {
  const closed = Promise.withResolvers<void>();
  await using server = await serve(() =>
    new Response(new ReadableStream<Uint8Array>({ cancel: () => closed.resolve() }))
  );
  await using client = new KubeClient({ connection: await connectionFor(server.url) }, {
    watchGraceMs: 30,
  });
  await assert.rejects(
    (async () => {
      for await (
        const _ of client.watch(VOLUME_ATTACHMENTS, {
          resourceVersion: "1",
          timeoutSeconds: 0,
          allowWatchBookmarks: true,
          signal: new AbortController().signal,
        })
      ) assert.fail("no event expected");
    })(),
    (err: unknown) => err instanceof ApiError && err.code === 0 && err.reason === "Timeout",
  );
  await closed.promise;
});

Deno.test("KubeClient watch rejects an error answer with its Status", async () => {
  await using server = await serve(() =>
    json({
      kind: "Status",
      status: "Failure",
      reason: "Forbidden",
      message: "no watch for you",
      code: 403,
    }, 403)
  );
  await using client = new KubeClient({ connection: await connectionFor(server.url) });
  await assert.rejects(
    (async () => {
      for await (
        const _ of client.watch(VOLUME_ATTACHMENTS, {
          resourceVersion: "1",
          timeoutSeconds: 10,
          allowWatchBookmarks: true,
          signal: new AbortController().signal,
        })
      ) assert.fail("no event expected");
    })(),
    (err: unknown) =>
      err instanceof ApiError && err.code === 403 && err.reason === "Forbidden" &&
      err.message === "no watch for you",
  );
});

Deno.test("KubeClient refuses a server that is not an http(s) URL", () => {
  const connection = (server: string): ClusterConnection => ({
    server,
    tls: { insecureSkipTlsVerify: false },
    headers: () => Promise.resolve({}),
  });
  assert.throws(() => new KubeClient({ connection: connection("not a URL") }), TypeError);
  assert.throws(() => new KubeClient({ connection: connection("ftp://h/") }), TypeError);
});

Deno.test({
  name: "KubeClient over TLS with the in-cluster CA and token, on one connection",
  ignore: !hasOpenssl(),
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const { ca, cert, key } = await makePki("IP:127.0.0.1");
      await Deno.writeTextFile(join(dir, "ca.crt"), ca);
      await Deno.writeTextFile(join(dir, "token"), "sa-token");

      await using server = await serve(() => json(PV), { cert, key });
      const port = new URL(server.url).port;
      const connection = await loadConnection({
        inCluster: { host: "127.0.0.1", port, serviceAccountDir: dir },
      });
      await using client = new KubeClient({ connection });
      await client.get(PERSISTENT_VOLUMES, "pv1");
      await client.get(PERSISTENT_VOLUMES, "pv1");
      assert.equal(server.headers[0]?.get("authorization"), "Bearer sa-token");
      assert.equal(new Set(server.ports).size, 1);

      // A CA that did not sign the server certificate is refused.
      const other = {
        ...connection,
        tls: { ...connection.tls, ca: new TextEncoder().encode(cert) },
      };
      await using untrusted = new KubeClient({ connection: other });
      await assert.rejects(
        untrusted.get(PERSISTENT_VOLUMES, "pv1"),
        (err: unknown) => err instanceof ApiError && err.reason === "ConnectionError",
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("WatchFrameSplitter gives the same frames wherever the chunks end", () => {
  const enc = new TextEncoder();
  const frames = [
    `{"type":"ADDED","object":{"metadata":{"name":"a"}}}`,
    `{"type":"MODIFIED","object":{"metadata":{"name":"\u00e9\u20ac\u{1f600}"}}}`,
    `{"type":"DELETED","object":{"metadata":{"name":"c"}}}`,
  ];
  // CRLF, a blank line and no newline after the last frame.
  const body = enc.encode(`${frames[0]}\r\n\n${frames[1]}\n${frames[2]}`);
  for (let i = 0; i <= body.length; i++) {
    for (let j = i; j <= body.length; j++) {
      const splitter = new WatchFrameSplitter();
      const got = [
        ...splitter.push(body.subarray(0, i)),
        ...splitter.push(body.subarray(i, j)),
        ...splitter.push(body.subarray(j)),
      ];
      const last = splitter.end();
      if (last !== undefined) got.push(last);
      assert.deepEqual(got, frames, `chunks end at ${i} and ${j}`);
    }
  }
  const oneByOne = new WatchFrameSplitter();
  const got: string[] = [];
  for (const byte of body) got.push(...oneByOne.push(new Uint8Array([byte])));
  assert.deepEqual([...got, oneByOne.end()], frames);
  assert.equal(new WatchFrameSplitter().end(), undefined);
});

Deno.test("KubeClient watch delivers events sent one byte per chunk", async () => {
  const body = new TextEncoder().encode(
    `{"type":"ADDED","object":{"metadata":{"name":"\u20ac"}}}\n` +
      `{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n`,
  );
  await using server = await serve(() =>
    new Response(
      new ReadableStream<Uint8Array>({
        async start(controller) {
          for (const byte of body) {
            controller.enqueue(new Uint8Array([byte]));
            await new Promise((r) => setTimeout(r, 0));
          }
          controller.close();
        },
      }),
    )
  );
  await using client = new KubeClient({ connection: await connectionFor(server.url) });
  const events: string[] = [];
  for await (
    const ev of client.watch(VOLUME_ATTACHMENTS, {
      resourceVersion: "1",
      timeoutSeconds: 30,
      allowWatchBookmarks: true,
      signal: new AbortController().signal,
    })
  ) events.push(`${ev.type} ${ev.object.metadata.name ?? ev.object.metadata.resourceVersion}`);
  assert.deepEqual(events, ["ADDED \u20ac", "BOOKMARK 9"]);
});

/** A raw HTTP server on 127.0.0.1 that hands each request's head to `answer`. */
function rawServer(
  answer: (conn: Deno.Conn, head: string) => Promise<void>,
): { url: string; heads: string[]; done: Promise<void> } & AsyncDisposable {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const heads: string[] = [];
  const conns: Promise<void>[] = [];
  const accepting = (async () => {
    for await (const conn of listener) {
      conns.push((async () => {
        const buf = new Uint8Array(16384);
        let head = "";
        while (!head.includes("\r\n\r\n")) {
          const n = await conn.read(buf).catch(() => null);
          if (n === null) break;
          head += new TextDecoder().decode(buf.subarray(0, n));
        }
        heads.push(head);
        try {
          await answer(conn, head);
        } finally {
          try {
            conn.close();
          } catch {
            // closed already
          }
        }
      })());
    }
  })();
  const done = accepting.then(() => Promise.all(conns)).then(() => {});
  return {
    url: `http://127.0.0.1:${listener.addr.port}`,
    heads,
    done,
    [Symbol.asyncDispose]: async () => {
      listener.close();
      await done;
    },
  };
}

Deno.test("KubeClient sends a list of credential header values as repeated lines on the wire", async () => {
  await using server = rawServer(async (conn) => {
    const body = JSON.stringify(PV);
    await conn.write(new TextEncoder().encode(
      `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n` +
        `connection: close\r\n\r\n${body}`,
    ));
  });
  await using client = new KubeClient({
    connection: await connectionFor(server.url, {
      as: "bob",
      "as-groups": ["g1", "g2"],
      "as-user-extra": { scopes: ["s1", "s2"] },
    }),
  });
  await client.get(PERSISTENT_VOLUMES, "pv1");
  const lines = server.heads[0]!.toLowerCase().split("\r\n");
  // The API server reads each line as one group; "g1, g2" on one line would be one group.
  assert.deepEqual(lines.filter((l) => l.startsWith("impersonate-group:")), [
    "impersonate-group: g1",
    "impersonate-group: g2",
  ]);
  assert.deepEqual(lines.filter((l) => l.startsWith("impersonate-extra-scopes:")), [
    "impersonate-extra-scopes: s1",
    "impersonate-extra-scopes: s2",
  ]);
});

Deno.test("isBrokenConnection recognises broken connections, not a refused one or a timeout", async () => {
  /** The error of a GET against a server that answers with `raw` (bytes) and closes. */
  const failure = async (raw: string | undefined): Promise<unknown> => {
    await using server = rawServer(async (conn) => {
      if (raw !== undefined) await conn.write(new TextEncoder().encode(raw));
    });
    await using client = new KubeClient({ connection: await connectionFor(server.url) });
    // A PATCH: a GET whose connection broke would be retried after 1 s.
    return await client.patch(PERSISTENT_VOLUMES, "pv1", { type: "merge", body: {} }).then(
      () => assert.fail("no answer expected"),
      (err: unknown) => err,
    );
  };
  // Closed before any answer.
  const closed = await failure(undefined);
  assert.ok(isBrokenConnection(closed), `closed before the answer: ${closed}`);
  assert.ok(
    closed instanceof ApiError && !closed.message.includes("fetch failed") &&
      /unexpected EOF: the server closed the connection before the answer/.test(closed.message),
    String(closed),
  );
  // Closed in the middle of the body.
  const cut = await failure('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"kind"');
  assert.ok(isBrokenConnection(cut), `closed in the body: ${cut}`);

  // Refused: nothing was sent, and client-go does not count it as a broken connection.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  await using refusedClient = new KubeClient({
    connection: await connectionFor(`http://127.0.0.1:${port}`),
  });
  const refused = await refusedClient.get(PERSISTENT_VOLUMES, "pv1").catch((err) => err);
  assert.ok(refused instanceof ApiError && refused.reason === "ConnectionError", String(refused));
  assert.ok(!isBrokenConnection(refused), String(refused));
  assert.ok(/Connection refused/i.test(refused.message), refused.message);

  // By kind, never by words: a proxy that opened no tunnel is no broken connection.
  const transportError = (kind: TransportError["kind"]) =>
    new ApiError(0, "ConnectionError", "Get", { cause: new TransportError(kind, "x") });
  assert.ok(isBrokenConnection(transportError("reset")));
  assert.ok(isBrokenConnection(transportError("eof")));
  assert.ok(!isBrokenConnection(transportError("tls")));
  assert.ok(!isBrokenConnection(transportError("proxy")));
  assert.ok(!isBrokenConnection(new ApiError(0, "Timeout", "request timed out")));
  assert.ok(!isBrokenConnection(new Error("connection reset")));
});

Deno.test("KubeClient.close() ends the watches and requests under way", async () => {
  const release = Promise.withResolvers<void>();
  await using server = await serve(async (req) => {
    if (new URL(req.url).searchParams.get("watch") === "true") {
      return new Response(new ReadableStream<Uint8Array>());
    }
    await release.promise;
    return json(PV);
  });
  await using _ = { [Symbol.asyncDispose]: () => Promise.resolve(release.resolve()) };
  const client = new KubeClient({ connection: await connectionFor(server.url) });
  const watching = (async () => {
    for await (
      const _ of client.watch(VOLUME_ATTACHMENTS, {
        resourceVersion: "1",
        timeoutSeconds: 600,
        allowWatchBookmarks: true,
        signal: new AbortController().signal,
      })
    ) assert.fail("no event expected");
  })();
  const getting = client.get(PERSISTENT_VOLUMES, "pv1");
  while (server.ports.length < 2) await new Promise((r) => setTimeout(r, 5));
  await client.close();
  const closed = (err: unknown) =>
    err instanceof ApiError && err.reason === "ConnectionError" && /closed/.test(err.message);
  await assert.rejects(watching, closed);
  await assert.rejects(getting, closed);
  await assert.rejects(client.get(PERSISTENT_VOLUMES, "pv1"), closed);
});

Deno.test("KubeClient.close() closes every connection: pooled, watching and waiting for a body", async () => {
  // Three answers fill the pool; later requests get answers that trickle without end, so the
  // server sees the client close each connection (its next write fails).
  await using server = RawHttpServer.start(async (ex) => {
    if (ex.index < 3) {
      await ex.write(ok(JSON.stringify(PV)));
      return "keep";
    }
    if (ex.request.includes("watch=true")) {
      await ex.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
      await ex.flood("1\r\n\n\r\n", { delayMs: 20 });
    } else {
      await ex.write("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
      await ex.flood(" ", { delayMs: 20 });
    }
    return "close";
  });
  const client = new KubeClient({ connection: plainConnection(server.url) });
  await Promise.all([1, 2, 3].map(() => client.get(PERSISTENT_VOLUMES, "pv1")));
  assert.equal(server.connections, 3);
  const watching = (async () => {
    for await (
      const _ of client.watch(VOLUME_ATTACHMENTS, {
        resourceVersion: "1",
        timeoutSeconds: 600,
        allowWatchBookmarks: true,
        signal: new AbortController().signal,
      })
    ) assert.fail("no event expected");
  })().catch((err) => err);
  const getting = client.get(PERSISTENT_VOLUMES, "pv1").catch((err) => err);
  for (let i = 0; i < 500 && server.requests.length < 5; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.equal(server.connections, 3, "the watch and the GET went out on pooled connections");
  await client.close();
  assert.ok((await watching) instanceof ApiError);
  assert.ok((await getting) instanceof ApiError);
  for (let i = 0; i < 500 && server.clientClosed < 3; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.equal(server.clientClosed, 3, "every connection closed by the client");
});
