/**
 * HTTP/1.1 (RFC 9112) spoken directly over TCP and TLS connections (`./dial.ts`: directly or
 * through an HTTP proxy's `CONNECT` tunnel), with a keep-alive pool per origin: the one
 * {@link Transport} of the Kubernetes client. Reading a large list
 * or a watch this way does less work per byte than `fetch` (no Rust body stream behind a JS
 * stream) and loads nothing of the Node compatibility layer. The subset it speaks, what it
 * refuses and every limit are listed in `./README.md`; the response is read by `./response.ts`.
 *
 * Idle connections are watched as Go's `net/http` watches them (`transport.go`
 * `persistConn.readLoop`, `readLoopPeekFailLocked`): a pooled connection keeps a read pending,
 * and data or EOF arriving on it while it is idle closes it and takes it out of the pool. A `408`
 * or any unsolicited bytes a server sends on an idle connection therefore never become the
 * answer to the next request, and a connection the server closed while idle is not picked for
 * one (https://github.com/golang/go/issues/32310). The pending read is the next request's first
 * read when the connection is picked, so nothing is lost or read twice.
 *
 * @module
 */

import type {
  RequestUrl,
  TlsMaterial,
  Transport,
  TransportRequest,
  TransportResponse,
} from "./api.ts";
import { TransportError } from "./errors.ts";
import { type Clock, realClock } from "../../clock.ts";
import { readAllChunks } from "../../bytes.ts";
import { Connection } from "./connection.ts";
import { denoConnect } from "./tls_connect.ts";
import { dial, type DialOptions, type TcpConnect } from "./dial.ts";
import { tlsSettings } from "./tls_settings.ts";
import { BodyReader, framingOf, readHead, type ResponseHead, ResponseHeaders } from "./response.ts";

/**
 * Idle connections kept per origin (client-go: `MaxIdleConnsPerHost` 25 in
 * k8s.io/apimachinery/pkg/util/net/http.go `SetTransportDefaults`).
 */
const MAX_IDLE_PER_ORIGIN = 25;
/** An idle connection older than this is closed, not reused (Go and client-go: `IdleConnTimeout`, 90 s). */
const IDLE_TIMEOUT_MS = 90_000;
const UTF8_ENCODER = new TextEncoder();
const UTF8 = new TextDecoder();

/**
 * The body of one answer on its connection. When the body ends, the connection goes back to the
 * pool if it can carry another request, and is closed otherwise, as it is when reading fails or
 * stops early.
 */
class Body {
  readonly #conn: Connection;
  readonly #reader: BodyReader;
  readonly #keepAlive: boolean;
  readonly #release: (conn: Connection, reusable: boolean) => void;
  #released = false;
  #used = false;

  constructor(
    conn: Connection,
    reader: BodyReader,
    keepAlive: boolean,
    release: (conn: Connection, reusable: boolean) => void,
  ) {
    this.#conn = conn;
    this.#reader = reader;
    this.#keepAlive = keepAlive;
    this.#release = release;
    if (reader.ended) this.#end();
  }

  /** Marks the body as read through one of its two ways. */
  use(): void {
    if (this.#used) throw new TypeError("the body was already read");
    this.#used = true;
  }

  /** The next data of the body (at least one non-empty view), or null at its end. */
  async next(): Promise<Uint8Array[] | null> {
    if (this.#released) return null;
    const data = await this.#reader.next();
    if (this.#reader.ended) this.#end();
    return data;
  }

  /**
   * The whole body as UTF-8. Memory grows with what arrives, never with what `Content-Length`
   * announces.
   */
  async text(): Promise<string> {
    return UTF8.decode(await readAllChunks(() => this.next()));
  }

  /** The whole body's bytes; memory grows as for {@link text}. */
  bytes(): Promise<Uint8Array> {
    return readAllChunks(() => this.next());
  }

  /** Stops reading: the connection is closed. */
  abandon(): void {
    if (this.#released) return;
    this.#released = true;
    this.#release(this.#conn, false);
  }

  #end(): void {
    if (this.#released) return;
    this.#released = true;
    const reusable = this.#reader.clean && this.#keepAlive && !this.#conn.hasUnread;
    this.#release(this.#conn, reusable);
  }
}

/** True for methods whose request may be sent again on a new connection (RFC 9110 9.2.2). */
function replayable(method: string): boolean {
  return method === "GET" || method === "HEAD";
}

/** `value` when `signal` does not abort first; otherwise `onLate` gets the late value. */
function raceSignal<T>(value: Promise<T>, signal: AbortSignal, onLate: (v: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      reject(signal.reason);
      value.then(onLate, () => {});
    };
    signal.addEventListener("abort", onAbort, { once: true });
    value.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) onLate(v);
        else resolve(v);
      },
      (err) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/**
 * The number of bytes `TextEncoder` encodes `text` into: a lone surrogate becomes U+FFFD, three
 * bytes, as the encoder makes it.
 */
export function utf8Length(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) {
      n += 1;
    } else if (
      c >= 0xd800 && c <= 0xdbff && i + 1 < text.length &&
      (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00
    ) {
      n += 2; // a surrogate pair: two units, four bytes
      i++;
    } else {
      n += 2; // three bytes, a lone surrogate's U+FFFD too
    }
  }
  return n;
}

/**
 * A request's bytes: request line, Host, the given header lines in order, Content-Length, then
 * the body, encoded in one call (the encoder is a call into the runtime).
 */
export function encodeRequest(url: RequestUrl, request: TransportRequest): Uint8Array {
  let head = `${request.method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`;
  for (const [name, value] of request.headers) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\r\n\0]/.test(value)) {
      throw new TypeError(`invalid header line "${name}"`);
    }
    head += `${name}: ${value}\r\n`;
  }
  const body = request.body;
  if (body !== undefined) head += `Content-Length: ${utf8Length(body)}\r\n`;
  head += "\r\n";
  return UTF8_ENCODER.encode(body === undefined ? head : head + body);
}

/** True when the head lets the connection carry another request (RFC 9112 section 9.3). */
function persistent(head: ResponseHead): boolean {
  if (head.version !== "HTTP/1.1") return false;
  const connection = (head.fields.get("connection") ?? []).join(",").toLowerCase();
  return !/(^|[\s,])close($|[\s,])/.test(connection);
}

/** Options of {@link Http1Transport}; the defaults are client-go's. */
export interface Http1Options {
  /** Idle connections kept per origin. @default 25 */
  maxIdlePerOrigin?: number;
  /** An idle connection older than this is closed instead of reused. @default 90000 */
  idleTimeoutMs?: number;
  /** Measures how long connections are idle. @default realClock */
  clock?: Clock;
  /**
   * The proxy of a request's URL, undefined for a direct connection: a fixed `proxy-url`, or
   * `./proxy.ts` `proxyFunc` over the environment's settings. @default no proxy
   */
  proxy?: (target: URL) => URL | undefined;
  /**
   * Opens the TCP connections of `http:` servers, their proxies, and `https:` servers reached
   * without a client certificate (see `./tls_connect.ts`).
   * @default Deno.connect
   */
  connect?: TcpConnect;
}

/**
 * HTTP/1.1 over pooled connections: an idle connection of the request's origin is reused (the
 * most recently used first), otherwise a new one is opened. A connection goes back to the pool
 * only when its answer was read to the end and it may carry another request; one whose answer
 * was not read to the end, that failed, or whose request was aborted is closed. An idle
 * connection on which anything arrives is closed (see the module doc).
 *
 * A GET on a reused connection that the server closed before answering (it may close an idle
 * connection at any time) is sent again once on a new connection, as Go's `net/http` transport
 * does (`shouldRetryRequest`).
 *
 * Failures reject with a {@link TransportError} (an abort with the signal's reason); a body
 * over the request's `maxBodyBytes` fails with a `too-large` one, without being kept.
 *
 * `caCerts` are added to the runtime's default root certificates, not used alone as client-go
 * uses them: see ARCHITECTURE.md, "The Kubernetes client".
 */
export class Http1Transport implements Transport {
  readonly #dial: DialOptions;
  readonly #maxIdle: number;
  readonly #idleTimeoutMs: number;
  readonly #clock: Clock;
  readonly #idle = new Map<string, Connection[]>();
  #generation = 0;
  #closed = false;

  /** @throws {TypeError} when only one of the client certificate and key is set. */
  constructor(tls: TlsMaterial, options: Http1Options = {}) {
    this.#dial = {
      tls: tlsSettings(tls),
      connect: options.connect ?? denoConnect,
      ...(options.proxy !== undefined && { proxy: options.proxy }),
    };
    this.#maxIdle = options.maxIdlePerOrigin ?? MAX_IDLE_PER_ORIGIN;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    this.#clock = options.clock ?? realClock;
  }

  get generation(): number {
    return this.#generation;
  }

  async send(url: RequestUrl, request: TransportRequest): Promise<TransportResponse> {
    const { signal } = request;
    if (this.#closed) throw new TransportError("closed", "the transport is closed");
    signal.throwIfAborted();
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`unsupported URL scheme "${url.protocol}"`);
    }
    const bytes = encodeRequest(url, request);
    const origin = `${url.protocol}//${url.host}`;
    const generation = this.#generation;
    for (let attempt = 0;; attempt++) {
      const pooled = this.#takeIdle(origin);
      const conn = pooled ?? await this.#connect(url, origin, generation, signal);
      try {
        return await this.#exchange(conn, bytes, request);
      } catch (err) {
        conn.close();
        if (signal.aborted) throw signal.reason;
        if (
          pooled !== undefined && attempt === 0 && !conn.answered && replayable(request.method) &&
          err instanceof TransportError && (err.kind === "eof" || err.kind === "reset")
        ) continue;
        throw err;
      }
    }
  }

  renew(generation: number): void {
    if (generation !== this.#generation) return;
    this.#generation++;
    for (const list of this.#idle.values()) for (const conn of list) conn.close();
    this.#idle.clear();
  }

  close(): void {
    this.#closed = true;
    this.renew(this.#generation);
  }

  #takeIdle(origin: string): Connection | undefined {
    const list = this.#idle.get(origin);
    if (list === undefined) return undefined;
    const now = this.#clock.now();
    for (let conn = list.pop(); conn !== undefined; conn = list.pop()) {
      if (!conn.closed && now - conn.idleSince <= this.#idleTimeoutMs) {
        conn.claim();
        return conn;
      }
      conn.close();
    }
    return undefined;
  }

  /** Something arrived on an idle connection: it is closed and leaves the pool. */
  #dropIdle(conn: Connection): void {
    conn.close();
    const list = this.#idle.get(conn.origin);
    const at = list?.indexOf(conn) ?? -1;
    if (at >= 0) list!.splice(at, 1);
  }

  #release = (conn: Connection, reusable: boolean): void => {
    if (conn.closed) return;
    if (!reusable || this.#closed || conn.generation !== this.#generation) {
      conn.close();
      return;
    }
    let list = this.#idle.get(conn.origin);
    if (list === undefined) this.#idle.set(conn.origin, list = []);
    if (list.length >= this.#maxIdle) {
      conn.close();
      return;
    }
    conn.idleSince = this.#clock.now();
    list.push(conn);
    conn.park(() => this.#dropIdle(conn));
  };

  async #connect(
    url: RequestUrl,
    origin: string,
    generation: number,
    signal: AbortSignal,
  ): Promise<Connection> {
    const conn = await raceSignal(dial(url, this.#dial, signal), signal, (late) => late.close());
    if (this.#closed) {
      conn.close();
      throw new TransportError("closed", "the transport is closed");
    }
    return new Connection(conn, origin, generation);
  }

  /** Writes the request and reads the head of its answer (1xx answers skipped). */
  async #exchange(
    conn: Connection,
    bytes: Uint8Array,
    request: TransportRequest,
  ): Promise<TransportResponse> {
    const exchange = new Exchange(conn, request.signal);
    let head: ResponseHead;
    let reader: BodyReader;
    let keepAlive: boolean;
    try {
      conn.answered = false;
      await conn.write(bytes, request.fence);
      head = await readHead(conn);
      const { framing, reusable } = framingOf(request.method, head);
      keepAlive = reusable && persistent(head);
      reader = new BodyReader(conn, framing, request.maxBodyBytes);
    } catch (err) {
      exchange.detach();
      throw err;
    }
    const body = new Body(conn, reader, keepAlive, (c, reusable) => {
      exchange.detach();
      this.#release(c, reusable);
    });
    exchange.body = body;
    return responseOf(head, body, exchange);
  }
}

/**
 * One request's watch on its abort signal: an abort, or a failed read of the body, closes the
 * connection (or abandons the body once it is being read) and errors the body stream, once.
 */
class Exchange {
  readonly signal: AbortSignal;
  body: Body | undefined;
  stream: ReadableStreamDefaultController<Uint8Array> | undefined;
  failed = false;
  readonly #conn: Connection;
  readonly #onAbort = () => this.fail(this.signal.reason);

  constructor(conn: Connection, signal: AbortSignal) {
    this.#conn = conn;
    this.signal = signal;
    signal.addEventListener("abort", this.#onAbort, { once: true });
  }

  /** Ends the exchange with `reason`. */
  fail(reason: unknown): void {
    if (this.failed) return;
    this.failed = true;
    this.detach();
    if (this.body === undefined) this.#conn.close();
    else this.body.abandon();
    this.stream?.error(reason);
  }

  /** Stops watching the signal. */
  detach(): void {
    this.signal.removeEventListener("abort", this.#onAbort);
  }

  /** What a failed read rejects with: the signal's reason once it aborted. */
  reasonOf(err: unknown): unknown {
    return this.signal.aborted ? this.signal.reason : err;
  }

  /** A read of the body failed with `err`: the exchange ends; returns what the read rejects with. */
  readFailed(err: unknown): unknown {
    const reason = this.reasonOf(err);
    this.fail(reason);
    return reason;
  }

  /** The reader stopped reading the body: the connection is closed. */
  cancel(): void {
    this.failed = true;
    this.detach();
    this.body?.abandon();
  }
}

/**
 * The answer of `head` with `body`, read whole (`text()`), piece by piece (`chunks()`, a watch) or
 * as a stream built on first use (most answers are read with `text()`).
 */
function responseOf(head: ResponseHead, body: Body, exchange: Exchange): TransportResponse {
  let readable: ReadableStream<Uint8Array> | undefined;
  const stream = () =>
    readable ??= new ReadableStream<Uint8Array>({
      start(controller) {
        exchange.stream = controller;
      },
      async pull(controller) {
        try {
          const data = await body.next();
          if (exchange.failed) return;
          if (data === null) controller.close();
          else for (const part of data) controller.enqueue(part);
        } catch (err) {
          exchange.readFailed(err);
        }
      },
      cancel() {
        exchange.cancel();
      },
    }, { highWaterMark: 0 });
  return {
    status: head.status,
    headers: new ResponseHeaders(head.fields),
    get body() {
      if (readable === undefined) body.use();
      return stream();
    },
    text: async () => {
      body.use();
      try {
        return await body.text();
      } catch (err) {
        throw exchange.readFailed(err);
      }
    },
    bytes: async () => {
      body.use();
      try {
        return await body.bytes();
      } catch (err) {
        throw exchange.readFailed(err);
      }
    },
    chunks: () => {
      body.use();
      return {
        next: async () => {
          try {
            return await body.next();
          } catch (err) {
            throw exchange.readFailed(err);
          }
        },
        cancel: () => exchange.cancel(),
      };
    },
  };
}
