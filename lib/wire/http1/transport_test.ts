/**
 * Http1Transport against raw TCP servers on loopback that write exactly the bytes a test needs.
 */

import assert from "node:assert/strict";
import { encodeRequest, Http1Transport, utf8Length } from "./transport.ts";
import type { TransportRequest } from "./api.ts";
import { isTransportError, TransportError } from "./errors.ts";
import { FencedError } from "../../lease_fence.ts";
import { FakeClock } from "../../../testkit/fakes/fake_clock.ts";

const enc = (s: string) => new TextEncoder().encode(s);
/** Requests are kept as Latin-1 text: one character per byte. */
const LATIN1 = new TextDecoder("latin1");
const NO_TLS = { insecureSkipTlsVerify: false };
const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/** What a handler does with one request: write bytes, then keep or close the connection. */
type Handler = (conn: Deno.Conn, request: string, index: number) => Promise<"keep" | "close">;

/** A TCP server reading requests (head and Content-Length body) and answering with `handler`. */
class RawServer implements AsyncDisposable {
  readonly #listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  readonly #conns = new Set<Deno.Conn>();
  readonly #tasks: Promise<void>[] = [];
  readonly requests: string[] = [];
  /** Connections accepted. */
  connections = 0;
  /** Connections the client closed (EOF or reset seen by the server). */
  clientClosed = 0;

  constructor(readonly handler: Handler) {
    this.#tasks.push(this.#accept());
  }

  get url(): string {
    return `http://127.0.0.1:${this.#listener.addr.port}`;
  }

  async #accept(): Promise<void> {
    for await (const conn of this.#listener) {
      this.connections++;
      this.#conns.add(conn);
      this.#tasks.push(this.#serve(conn));
    }
  }

  async #serve(conn: Deno.Conn): Promise<void> {
    let pending = "";
    const buf = new Uint8Array(65536);
    try {
      for (;;) {
        const end = pending.indexOf("\r\n\r\n");
        const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
        if (end >= 0 && pending.length >= end + 4 + length) {
          const request = pending.slice(0, end + 4 + length);
          pending = pending.slice(request.length);
          this.requests.push(request);
          if (await this.handler(conn, request, this.requests.length - 1) === "close") {
            conn.close();
            return;
          }
          continue;
        }
        const n = await conn.read(buf);
        if (n === null) break;
        pending += LATIN1.decode(buf.subarray(0, n));
      }
    } catch {
      // A reset, or the connection closed by dispose.
    } finally {
      this.#conns.delete(conn);
    }
    this.clientClosed++;
    try {
      conn.close();
    } catch { /* closed */ }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#listener.close();
    for (const conn of this.#conns) {
      try {
        conn.close();
      } catch { /* closed */ }
    }
    await Promise.allSettled(this.#tasks);
  }
}

const write = (conn: Deno.Conn, text: string) => conn.write(enc(text)).then(() => {});
const get = (signal = AbortSignal.timeout(5000)): TransportRequest => ({
  method: "GET",
  headers: [],
  signal,
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `check` holds (up to 2 s). */
async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await sleep(10);
  assert.ok(check(), what);
}

async function bodyText(body: ReadableStream<Uint8Array> | null): Promise<string> {
  return await new Response(body).text();
}

Deno.test("Http1Transport: keep-alive reuses one connection; request line, Host, header lines in order, Content-Length", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, OK);
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const url = new URL(`${server.url}/api/v1/pods?watch=true&x=%2F`);
    for (let i = 0; i < 3; i++) {
      const res = await transport.send(url, get());
      assert.equal(await res.text!(), "ok");
    }
    const res = await transport.send(url, {
      method: "PATCH",
      headers: [["Impersonate-Group", "a"], ["Content-Type", "x/y"], ["Impersonate-Group", "b"]],
      body: "é{}",
      signal: AbortSignal.timeout(5000),
    });
    assert.equal(await bodyText(res.body), "ok");
    assert.equal(server.connections, 1);
    assert.equal(server.clientClosed, 0, "the connection stays open in the pool");
    const host = new URL(server.url).host;
    assert.equal(
      server.requests[0],
      `GET /api/v1/pods?watch=true&x=%2F HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    );
    assert.equal(
      server.requests[3],
      `PATCH /api/v1/pods?watch=true&x=%2F HTTP/1.1\r\nHost: ${host}\r\n` +
        "Impersonate-Group: a\r\nContent-Type: x/y\r\nImpersonate-Group: b\r\n" +
        `Content-Length: 4\r\n\r\n${LATIN1.decode(enc("é{}"))}`,
    );
    // A header value that would split the request is refused before anything is sent.
    await assert.rejects(
      transport.send(url, { ...get(), headers: [["X", "a\r\nEvil: 1"]] }),
      TypeError,
    );
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: a chunked answer written byte by byte after a 1xx; the connection is reused", async () => {
  const answer = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" +
    "X-A: 1\r\nx-a: 2\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n";
  await using server = new RawServer(async (conn) => {
    for (const byte of enc(answer)) await conn.write(new Uint8Array([byte]));
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const res = await transport.send(new URL(server.url), get());
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("X-A"), "1, 2");
    assert.equal(await bodyText(res.body), "hello world");
    const again = await transport.send(new URL(server.url), get());
    assert.equal(await again.text!(), "hello world");
    assert.equal(server.connections, 1);
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: an answer not read to its end closes its connection", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, `HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n${"x".repeat(200000)}`)
      .catch(() => {});
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const res = await transport.send(new URL(server.url), get());
    const reader = res.body!.getReader();
    assert.ok(((await reader.read()).value?.length ?? 0) > 0);
    await reader.cancel();
    await until(() => server.clientClosed === 1, "the client closed the connection");
    await transport.send(new URL(server.url), get()).then((r) => r.body?.cancel());
    assert.equal(server.connections, 2);
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: aborting in the middle of a watch body errors the read with the reason and closes the connection", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n");
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const controller = new AbortController();
    const res = await transport.send(new URL(server.url), get(controller.signal));
    const reader = res.body!.getReader();
    assert.equal(new TextDecoder().decode((await reader.read()).value), "{}\n");
    const pending = reader.read();
    const reason = new Error("stop");
    controller.abort(reason);
    await assert.rejects(pending, (err) => err === reason);
    await until(() => server.clientClosed === 1, "the client closed the connection");
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: chunks() reads a body piece by piece without a stream; abort and cancel end it", async () => {
  const head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  await using server = new RawServer(async (conn, _request, index) => {
    if (index === 0) {
      // Two events in two writes, then the end: the connection goes back to the pool.
      await write(conn, `${head}3\r\n{}\n\r\n`);
      await sleep(20);
      await write(conn, "4\r\n[1]\n\r\n0\r\n\r\n");
    } else {
      await write(conn, `${head}3\r\n{}\n\r\n`); // and nothing more
    }
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS);
  const text = (data: Uint8Array[] | null) =>
    data === null ? null : data.map((d) => new TextDecoder().decode(d)).join("");
  try {
    const whole = await transport.send(new URL(server.url), get());
    const pieces = whole.chunks!();
    assert.throws(() => whole.body, TypeError, "the body is read one way only");
    const seen: (string | null)[] = [];
    for (let data = await pieces.next();; data = await pieces.next()) {
      seen.push(text(data));
      if (data === null) break;
    }
    assert.deepEqual(seen, ["{}\n", "[1]\n", null]);

    const controller = new AbortController();
    const aborted = await transport.send(new URL(server.url), get(controller.signal));
    assert.equal(server.connections, 1, "the connection of the finished body was reused");
    const reader = aborted.chunks!();
    assert.equal(text(await reader.next()), "{}\n");
    const pending = reader.next();
    const reason = new Error("stop");
    controller.abort(reason);
    await assert.rejects(pending, (err) => err === reason);
    await until(() => server.clientClosed === 1, "the aborted body's connection was closed");

    const cancelled = (await transport.send(new URL(server.url), get())).chunks!();
    assert.equal(text(await cancelled.next()), "{}\n");
    cancelled.cancel();
    await until(() => server.clientClosed === 2, "the cancelled body's connection was closed");
    assert.equal(await cancelled.next(), null);
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: an abort before the answer rejects the send with the reason", async () => {
  await using server = new RawServer(() => sleep(300).then(() => "close" as const));
  const transport = new Http1Transport(NO_TLS);
  try {
    const reason = new Error("gone");
    const sending = transport.send(new URL(server.url), get(AbortSignal.timeout(60_000)));
    const controller = new AbortController();
    const aborted = transport.send(new URL(server.url), get(controller.signal));
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(aborted, (err) => err === reason);
    await assert.rejects(sending, (err) => isTransportError(err, "eof"));
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: a server closing in the middle of the body is a broken connection", async () => {
  const answers = [
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n5\r\n{",
    'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"kind"',
    "HTTP/1.1 200 OK\r\nContent-Le",
  ];
  await using server = new RawServer(async (conn, _request, index) => {
    await write(conn, answers[index]!);
    return "close";
  });
  const transport = new Http1Transport(NO_TLS);
  // A broken connection: an EOF (the kind the client retries a GET after).
  const broken = (err: unknown) => isTransportError(err, "eof");
  try {
    const chunked = await transport.send(new URL(server.url), get());
    await assert.rejects(bodyText(chunked.body), broken);
    const sized = await transport.send(new URL(server.url), get());
    await assert.rejects(sized.text!(), broken);
    await assert.rejects(transport.send(new URL(server.url), get()), broken);
    assert.equal(server.connections, 3, "no connection reused after a broken answer");
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: a GET whose reused connection closes before the answer goes out again on a new one; a PATCH does not", async () => {
  // Every second request on a connection is read and left unanswered: the connection closes.
  await using server = new RawServer(async (conn, _request, index) => {
    if (index % 2 === 1) return "close";
    await write(conn, OK);
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const url = new URL(server.url);
    assert.equal(await (await transport.send(url, get())).text!(), "ok");
    assert.equal(await (await transport.send(url, get())).text!(), "ok");
    assert.equal(server.connections, 2, "the GET went out again on a new connection");
    await assert.rejects(
      transport.send(url, { ...get(), method: "PATCH", body: "{}" }),
      (err) => isTransportError(err, "eof", "reset"),
    );
    assert.equal(server.connections, 2, "the PATCH was not sent again");
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: an idle connection the server closed is dropped before it is picked, even for a PATCH", async () => {
  // The server closes every connection after its answer, without saying so.
  await using server = new RawServer(async (conn) => {
    await write(conn, OK);
    return "close";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const url = new URL(server.url);
    assert.equal(await (await transport.send(url, get())).text!(), "ok");
    await sleep(50);
    const patched = await transport.send(url, { ...get(), method: "PATCH", body: "{}" });
    assert.equal(await patched.text!(), "ok");
    assert.equal(server.connections, 2);
    assert.equal(server.requests.length, 2, "nothing was written on the closed connection");
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: renew drops the idle connections of that generation only; close fails later requests", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, OK);
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS, { maxIdlePerOrigin: 1 });
  const url = new URL(server.url);
  const answers = await Promise.all([1, 2, 3].map(() => transport.send(url, get())));
  for (const res of answers) await res.text!();
  assert.equal(server.connections, 3);
  await until(() => server.clientClosed === 2, "only maxIdlePerOrigin connections are kept");
  const generation = transport.generation;
  transport.renew(generation);
  transport.renew(generation);
  assert.equal(
    transport.generation,
    generation + 1,
    "a second renew of the same generation does nothing",
  );
  await until(() => server.clientClosed === 3, "renew closed the idle connection");
  await (await transport.send(url, get())).text!();
  assert.equal(server.connections, 4);
  transport.close();
  await assert.rejects(
    transport.send(url, get()),
    (err) => isTransportError(err, "closed") && /closed/.test(err.message),
  );
  await until(() => server.clientClosed === 4, "every connection closed");
});

Deno.test("Http1Transport: a refused connection is not a broken one", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  const transport = new Http1Transport(NO_TLS);
  const err = await transport.send(new URL(`http://127.0.0.1:${port}/`), get()).catch((e) => e);
  transport.close();
  assert.ok(
    err instanceof TransportError && err.cause instanceof Deno.errors.ConnectionRefused,
    String(err),
  );
  assert.ok(isTransportError(err, "connect"), "refused: no connection, not a broken one");
});

Deno.test("Http1Transport: a connection idle longer than the idle timeout is closed, not reused", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, OK);
    return "keep";
  });
  // Idle time is read from the transport's clock when a connection is taken from the pool.
  const clock = new FakeClock();
  const transport = new Http1Transport(NO_TLS, { idleTimeoutMs: 30, clock });
  try {
    const url = new URL(server.url);
    await (await transport.send(url, get())).text!();
    await (await transport.send(url, get())).text!();
    clock.advance(30);
    await (await transport.send(url, get())).text!();
    assert.equal(server.connections, 1, "reused within the idle timeout");
    clock.advance(31);
    await (await transport.send(url, get())).text!();
    assert.equal(server.connections, 2);
    await until(() => server.clientClosed === 1, "the stale connection was closed");
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: a 408 or an unsolicited answer sent on an idle connection never answers the next request", async () => {
  const unsolicited = [
    "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
    "\r\njunk",
  ];
  for (const junk of unsolicited) {
    // The first connection answers, then sends `junk` while idle and stays open.
    await using server = new RawServer(async (conn, _request, index) => {
      await write(conn, OK);
      if (index === 0) setTimeout(() => write(conn, junk).catch(() => {}), 20);
      return "keep";
    });
    const transport = new Http1Transport(NO_TLS);
    try {
      const url = new URL(server.url);
      assert.equal(await (await transport.send(url, get())).text!(), "ok");
      await until(() => server.clientClosed === 1, `the idle connection dropped (${junk})`);
      const next = await transport.send(url, get());
      assert.equal(next.status, 200, junk);
      assert.equal(await next.text!(), "ok", junk);
      assert.equal(server.connections, 2, junk);
    } finally {
      transport.close();
    }
  }
});

Deno.test("Http1Transport: text() keeps what arrives, not what Content-Length announces", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1500000000\r\n\r\n{}");
    return "close";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const before = Deno.memoryUsage().external;
    const res = await transport.send(new URL(server.url), get());
    let external = 0;
    const reading = res.text!().catch((err) => err);
    await sleep(20);
    external = Deno.memoryUsage().external - before;
    assert.ok(isTransportError(await reading, "eof"));
    assert.ok(external < 64 * 1024 * 1024, `${external} bytes reserved for a 2-byte body`);
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: a body over the request's maxBodyBytes fails as too-large, announced or not", async () => {
  const answers = [
    `HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n${"x".repeat(2000)}`,
    `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n${"x".repeat(2000)}\r\n0\r\n\r\n`,
    `HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n${"x".repeat(2000)}`,
  ];
  await using server = new RawServer(async (conn, _request, index) => {
    await write(conn, answers[index % answers.length]!).catch(() => {});
    return "close";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const tooLarge = (err: unknown) => isTransportError(err, "too-large");
    await assert.rejects(
      transport.send(new URL(server.url), { ...get(), maxBodyBytes: 1000 }),
      tooLarge,
      "announced by Content-Length: refused with the head",
    );
    for (let i = 1; i < answers.length; i++) {
      const res = await transport.send(new URL(server.url), { ...get(), maxBodyBytes: 1000 });
      await assert.rejects(i === 1 ? res.text!() : bodyText(res.body), tooLarge);
    }
    const fits = await transport.send(new URL(server.url), { ...get(), maxBodyBytes: 2000 });
    assert.equal((await fits.text!()).length, 2000);
  } finally {
    transport.close();
  }
});

Deno.test("utf8Length counts the bytes TextEncoder writes, lone surrogates as U+FFFD", () => {
  const samples = [
    "",
    'ascii {"a":1}',
    "é",
    "€",
    "😀",
    "a😀b",
    "\uD800",
    "\uDC00",
    "\uD800x",
    "x\uDBFF",
    "\uDC00\uD800",
    "\uD800\uD800\uDC00",
    "\u07FF\u0800\uFFFF",
  ];
  let all = "";
  for (let c = 0; c < 0x10000; c += 7) all += String.fromCharCode(c);
  samples.push(all);
  const encoder = new TextEncoder();
  for (const text of samples) {
    assert.equal(utf8Length(text), encoder.encode(text).length, JSON.stringify(text));
  }
});

Deno.test("encodeRequest writes the head and body it wrote in two encodings, in one", () => {
  const url = new URL("http://127.0.0.1:8080/api/v1/persistentvolumes/pv-1?x=1");
  const encoder = new TextEncoder();
  for (const body of [undefined, "", '{"a":"é😀"}', "tail \uD800"]) {
    const request: TransportRequest = {
      method: "PATCH",
      headers: [["Content-Type", "application/merge-patch+json"], ["User-Agent", "t/ü"]],
      body,
      signal: new AbortController().signal,
    };
    const bodyBytes = body === undefined ? undefined : encoder.encode(body);
    let head = "PATCH /api/v1/persistentvolumes/pv-1?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n" +
      "Content-Type: application/merge-patch+json\r\nUser-Agent: t/ü\r\n";
    if (bodyBytes !== undefined) head += `Content-Length: ${bodyBytes.length}\r\n`;
    const headBytes = encoder.encode(head + "\r\n");
    const want = new Uint8Array(headBytes.length + (bodyBytes?.length ?? 0));
    want.set(headBytes);
    if (bodyBytes !== undefined) want.set(bodyBytes, headBytes.length);
    assert.deepEqual(encodeRequest(url, request), want, JSON.stringify(body));
  }
});

Deno.test("Http1Transport: a request's head and body go to the socket in one write", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, OK);
    return "keep";
  });
  // Every write the transport makes on its real TCP connection, as the bytes it passed.
  const writes: string[] = [];
  const connect = async (hostname: string, port: number): Promise<Deno.TcpConn> => {
    const conn = await Deno.connect({ hostname, port });
    return new Proxy(conn, {
      get(target, key) {
        if (key === "write") {
          return (p: Uint8Array) => {
            writes.push(LATIN1.decode(p));
            return target.write(p);
          };
        }
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  };
  const transport = new Http1Transport(NO_TLS, { connect });
  try {
    const url = new URL(`${server.url}/apis/storage.k8s.io/v1/volumeattachments/va-1/status`);
    const body = JSON.stringify({ status: { attached: true, attachmentMetadata: { é: "x" } } });
    for (let i = 0; i < 3; i++) {
      const res = await transport.send(url, {
        method: "PATCH",
        headers: [["Content-Type", "application/merge-patch+json"]],
        body,
        signal: AbortSignal.timeout(5000),
      });
      assert.equal(await res.text!(), "ok");
    }
    assert.equal(server.connections, 1);
    assert.equal(writes.length, 3, "one write per request");
    assert.deepEqual(writes, server.requests, "each write is one whole request");
    assert.ok(writes[0]!.endsWith(`\r\n\r\n${LATIN1.decode(enc(body))}`));
  } finally {
    transport.close();
  }
});

Deno.test("Http1Transport: a request's fence is asked right before its bytes are written; a no sends nothing", async () => {
  await using server = new RawServer(async (conn) => {
    await write(conn, OK);
    return "keep";
  });
  const transport = new Http1Transport(NO_TLS);
  try {
    const url = new URL(`${server.url}/apis/storage.k8s.io/v1/volumeattachments/va1/status`);
    let open = true;
    let asked = 0;
    const fence = {
      valid: () => {
        asked++;
        return open;
      },
    };
    const patch = (): TransportRequest => ({
      method: "PATCH",
      headers: [["Content-Type", "application/merge-patch+json"]],
      body: '{"status":{"attached":false}}',
      signal: AbortSignal.timeout(5000),
      fence,
    });
    // No connection yet: the fence closes while the connection is being made, after send().
    const first = transport.send(url, patch());
    open = false;
    await assert.rejects(first, FencedError);
    assert.equal(asked, 1);
    await sleep(20);
    assert.deepEqual(server.requests, [], "no byte of the request reached the server");
    // An open fence: sent; then refused on the pooled connection, which is closed, not reused.
    open = true;
    const res = await transport.send(url, patch());
    assert.equal(await res.text!(), "ok");
    assert.equal(server.requests.length, 1);
    open = false;
    await assert.rejects(transport.send(url, patch()), FencedError);
    await until(() => server.clientClosed === 2, "the refused request's connection is closed");
    assert.equal(server.requests.length, 1);
    // Requests without a fence (reads, Lease renewals) are not asked.
    const asks = asked;
    assert.equal(await (await transport.send(url, get())).text!(), "ok");
    assert.equal(asked, asks);
  } finally {
    transport.close();
  }
});
