/**
 * HTTP/1.1 (RFC 9112) spoken directly over `Deno.connect` / `Deno.connectTls`, with a keep-alive
 * pool per origin: the default {@link Transport} of the Kubernetes client. Reading a large list
 * or a watch this way does less work per byte than `fetch` (no Rust body stream behind a JS
 * stream) and loads nothing of the Node compatibility layer.
 *
 * @module
 */

import type { TlsMaterial, Transport, TransportRequest, TransportResponse } from "./api.ts";
import { TransportError } from "./errors.ts";
import { errorText } from "../../errors.ts";
import { ChunkedDecoder, headEnd, parseHead, ResponseHeaders } from "./response.ts";

/** Idle connections kept per origin (client-go: `MaxIdleConnsPerHost` in k8s.io/apimachinery/pkg/util/net/http.go). */
const MAX_IDLE_PER_ORIGIN = 25;
/** An idle connection older than this is closed, not reused (client-go: `IdleConnTimeout`). */
const IDLE_TIMEOUT_MS = 90_000;
/** Reads go into slices of one buffer of this size until less than {@link MIN_READ} is left. */
const READ_BUFFER = 64 * 1024;
const MIN_READ = 8 * 1024;
/** Longest response head accepted. */
const MAX_HEAD = 64 * 1024;

const UTF8_ENCODER = new TextEncoder();
const UTF8 = new TextDecoder();

/** The server closed the connection before the answer, or before its end. */
function unexpectedEof(where: string): TransportError {
  return new TransportError("eof", `unexpected EOF: the server closed the connection ${where}`);
}

/**
 * A failure of reading or writing an open connection as a {@link TransportError}: the runtime's
 * `UnexpectedEof` is `eof`, every other I/O error a `reset` (the connection is broken either
 * way); a TransportError stays as it is.
 */
function brokenConnection(err: unknown): TransportError {
  if (err instanceof TransportError) return err;
  const kind = err instanceof Deno.errors.UnexpectedEof ? "eof" : "reset";
  return new TransportError(kind, errorText(err), { cause: err });
}

/** One connection and what was read on it but not used yet. */
class Connection {
  readonly conn: Deno.Conn;
  readonly origin: string;
  readonly generation: number;
  /** True once a byte was read since the last request was written. */
  answered = false;
  idleSince = 0;
  closed = false;
  #buffer = new Uint8Array(0);
  #used = 0;
  #unread: Uint8Array | undefined;

  constructor(conn: Deno.Conn, origin: string, generation: number) {
    this.conn = conn;
    this.origin = origin;
    this.generation = generation;
  }

  /**
   * The next bytes, as a view that later reads never overwrite; null at EOF. Reads fill
   * successive slices of one buffer, so a small read costs no allocation.
   */
  async read(): Promise<Uint8Array | null> {
    const unread = this.#unread;
    if (unread !== undefined) {
      this.#unread = undefined;
      return unread;
    }
    if (this.#buffer.length - this.#used < MIN_READ) {
      this.#buffer = new Uint8Array(READ_BUFFER);
      this.#used = 0;
    }
    let n: number | null;
    try {
      n = await this.conn.read(this.#buffer.subarray(this.#used));
    } catch (err) {
      throw brokenConnection(err);
    }
    if (n === null) return null;
    this.answered = true;
    const view = this.#buffer.subarray(this.#used, this.#used + n);
    this.#used += n;
    return view;
  }

  /** Reads into `target` (bytes put back with {@link unread} first); null at EOF. */
  async readInto(target: Uint8Array): Promise<number | null> {
    const unread = this.#unread;
    if (unread !== undefined) {
      const n = Math.min(unread.length, target.length);
      target.set(unread.subarray(0, n));
      this.#unread = n < unread.length ? unread.subarray(n) : undefined;
      return n;
    }
    let n: number | null;
    try {
      n = await this.conn.read(target);
    } catch (err) {
      throw brokenConnection(err);
    }
    if (n !== null) this.answered = true;
    return n;
  }

  /** Puts `bytes` back in front of the next read. */
  unread(bytes: Uint8Array): void {
    if (bytes.length > 0) this.#unread = bytes;
  }

  /** True when bytes were read past the end of the last answer. */
  get hasUnread(): boolean {
    return this.#unread !== undefined;
  }

  async write(bytes: Uint8Array): Promise<void> {
    try {
      for (let offset = 0; offset < bytes.length;) {
        offset += await this.conn.write(bytes.subarray(offset));
      }
    } catch (err) {
      throw brokenConnection(err);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.conn.close();
    } catch {
      // Already closed by the runtime.
    }
  }
}

/** How the body of an answer ends (RFC 9112 section 6.3). */
type Framing =
  | { kind: "length"; left: number }
  | { kind: "chunked"; decoder: ChunkedDecoder }
  | { kind: "close" };

/**
 * The body of one answer. Hands out views of the read buffers (no copy but for the chunk
 * framing); when the body ends, the connection goes back to the pool if it can carry another
 * request, and is closed otherwise, as it is when reading fails or stops early.
 */
class Body {
  readonly #conn: Connection;
  readonly #framing: Framing;
  readonly #keepAlive: boolean;
  readonly #release: (conn: Connection, reusable: boolean) => void;
  #ended = false;
  #used = false;

  constructor(
    conn: Connection,
    framing: Framing,
    keepAlive: boolean,
    release: (conn: Connection, reusable: boolean) => void,
  ) {
    this.#conn = conn;
    this.#framing = framing;
    this.#keepAlive = keepAlive;
    this.#release = release;
    if (framing.kind === "length" && framing.left === 0) this.#end(true);
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Marks the body as read through one of its two ways. */
  use(): void {
    if (this.#used) throw new TypeError("the body was already read");
    this.#used = true;
  }

  /** The next data of the body (at least one non-empty view), or null at its end. */
  async next(): Promise<Uint8Array[] | null> {
    const framing = this.#framing;
    for (;;) {
      if (this.#ended) return null;
      const bytes = await this.#conn.read();
      if (bytes === null) {
        if (framing.kind !== "close") throw unexpectedEof("in the middle of the body");
        this.#end(false);
        return null;
      }
      switch (framing.kind) {
        case "close":
          return [bytes];
        case "length": {
          const take = Math.min(framing.left, bytes.length);
          framing.left -= take;
          // Bytes past the end belong to no request: the connection is not reused.
          if (framing.left === 0) this.#end(take === bytes.length);
          return [bytes.subarray(0, take)];
        }
        case "chunked": {
          const out = framing.decoder.push(bytes);
          if (out.done) this.#end(out.rest === undefined || out.rest.length === 0);
          if (out.data.length > 0) return out.data;
        }
      }
    }
  }

  /** The whole body as UTF-8. */
  async text(): Promise<string> {
    const framing = this.#framing;
    if (framing.kind === "length") {
      const out = new Uint8Array(framing.left);
      let offset = 0;
      while (offset < out.length) {
        const n = await this.#conn.readInto(out.subarray(offset));
        if (n === null) throw unexpectedEof("in the middle of the body");
        offset += n;
      }
      framing.left = 0;
      if (!this.#ended) this.#end(true);
      return UTF8.decode(out);
    }
    const parts: Uint8Array[] = [];
    let length = 0;
    for (let data = await this.next(); data !== null; data = await this.next()) {
      for (const part of data) {
        parts.push(part);
        length += part.length;
      }
    }
    if (parts.length === 1) return UTF8.decode(parts[0]);
    const out = new Uint8Array(length);
    let offset = 0;
    for (const part of parts) {
      out.set(part, offset);
      offset += part.length;
    }
    return UTF8.decode(out);
  }

  /** Stops reading: the connection is closed. */
  abandon(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#release(this.#conn, false);
  }

  #end(reusable: boolean): void {
    this.#ended = true;
    this.#release(this.#conn, reusable && this.#keepAlive && !this.#conn.hasUnread);
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

/** A request's bytes: request line, Host, the given header lines in order, Content-Length. */
export function encodeRequest(url: URL, request: TransportRequest): Uint8Array {
  let head = `${request.method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`;
  for (const [name, value] of request.headers) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\r\n\0]/.test(value)) {
      throw new TypeError(`invalid header line "${name}"`);
    }
    head += `${name}: ${value}\r\n`;
  }
  const body = request.body === undefined ? undefined : UTF8_ENCODER.encode(request.body);
  if (body !== undefined) head += `Content-Length: ${body.length}\r\n`;
  head += "\r\n";
  const headBytes = UTF8_ENCODER.encode(head);
  if (body === undefined || body.length === 0) return headBytes;
  const out = new Uint8Array(headBytes.length + body.length);
  out.set(headBytes);
  out.set(body, headBytes.length);
  return out;
}

/** Options of {@link Http1Transport}; the defaults are client-go's. */
export interface Http1Options {
  maxIdlePerOrigin?: number;
  idleTimeoutMs?: number;
}

/**
 * HTTP/1.1 over pooled connections: an idle connection of the request's origin is reused (the
 * most recently used first), otherwise a new one is opened. A connection goes back to the pool
 * only when its answer was read to the end and it may carry another request; one whose answer
 * was not read to the end, that failed, or whose request was aborted is closed.
 *
 * A GET on a reused connection that the server closed before answering (it may close an idle
 * connection at any time) is sent again once on a new connection, as Go's `net/http` transport
 * does (`shouldRetryRequest`).
 *
 * `caCerts` are added to the runtime's default root certificates: see the README.
 */
export class Http1Transport implements Transport {
  readonly #tls: Partial<Deno.TlsCertifiedKeyPem> & { caCerts?: string[] };
  readonly #maxIdle: number;
  readonly #idleTimeoutMs: number;
  readonly #idle = new Map<string, Connection[]>();
  #generation = 0;
  #closed = false;

  /** @throws {TypeError} when only one of the client certificate and key is set. */
  constructor(tls: TlsMaterial, options: Http1Options = {}) {
    if ((tls.cert === undefined) !== (tls.key === undefined)) {
      throw new TypeError("a client certificate needs both the certificate and its key");
    }
    const decoder = new TextDecoder();
    this.#tls = {
      ...(tls.ca !== undefined && { caCerts: [decoder.decode(tls.ca)] }),
      ...(tls.cert !== undefined && tls.key !== undefined &&
        { cert: decoder.decode(tls.cert), key: decoder.decode(tls.key) }),
    };
    this.#maxIdle = options.maxIdlePerOrigin ?? MAX_IDLE_PER_ORIGIN;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  }

  get generation(): number {
    return this.#generation;
  }

  async send(url: URL, request: TransportRequest): Promise<TransportResponse> {
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
    const now = performance.now();
    for (let conn = list.pop(); conn !== undefined; conn = list.pop()) {
      if (now - conn.idleSince <= this.#idleTimeoutMs) return conn;
      conn.close();
    }
    return undefined;
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
    conn.idleSince = performance.now();
    list.push(conn);
  };

  async #connect(
    url: URL,
    origin: string,
    generation: number,
    signal: AbortSignal,
  ): Promise<Connection> {
    const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
    const https = url.protocol === "https:";
    const port = url.port === "" ? (https ? 443 : 80) : Number(url.port);
    const connectFailed = (err: unknown): never => {
      throw new TransportError("connect", errorText(err), { cause: err });
    };
    const connecting: Promise<Deno.Conn> = https
      ? Deno.connectTls({ hostname, port, alpnProtocols: ["http/1.1"], ...this.#tls }).then(
        async (conn) => {
          try {
            // Certificate errors surface here, as connection errors, not on the first read.
            await conn.handshake();
          } catch (err) {
            conn.close();
            throw new TransportError("tls", errorText(err), { cause: err });
          }
          return conn;
        },
        connectFailed,
      )
      : Deno.connect({ hostname, port }).catch(connectFailed);
    const conn = await raceSignal<Deno.Conn>(connecting, signal, (late) => late.close());
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
    const { signal } = request;
    const state: {
      body?: Body;
      stream?: ReadableStreamDefaultController<Uint8Array>;
    } = {};
    let failed = false;
    const fail = (reason: unknown) => {
      if (failed) return;
      failed = true;
      signal.removeEventListener("abort", onAbort);
      if (state.body === undefined) conn.close();
      else state.body.abandon();
      state.stream?.error(reason);
    };
    const onAbort = () => fail(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    let head;
    let framing;
    try {
      conn.answered = false;
      await conn.write(bytes);
      do head = await readHead(conn); while (head.status >= 100 && head.status < 200);
      framing = framingOf(request.method, head.status, head.fields);
    } catch (err) {
      signal.removeEventListener("abort", onAbort);
      throw err;
    }
    const connection = (head.fields.get("connection") ?? []).join(",").toLowerCase();
    const keepAlive = head.version === "HTTP/1.1" && !/(^|[\s,])close($|[\s,])/.test(connection) &&
      framing.kind !== "close";
    const release = (c: Connection, reusable: boolean) => {
      signal.removeEventListener("abort", onAbort);
      this.#release(c, reusable);
    };
    const reader = new Body(conn, framing, keepAlive, release);
    state.body = reader;
    // Built on first use: most answers are read with text().
    let readable: ReadableStream<Uint8Array> | undefined;
    const stream = () =>
      readable ??= new ReadableStream<Uint8Array>({
        start(controller) {
          state.stream = controller;
        },
        async pull(controller) {
          try {
            const data = await reader.next();
            if (failed) return;
            if (data === null) controller.close();
            else for (const part of data) controller.enqueue(part);
          } catch (err) {
            fail(signal.aborted ? signal.reason : err);
          }
        },
        cancel() {
          failed = true;
          signal.removeEventListener("abort", onAbort);
          reader.abandon();
        },
      }, { highWaterMark: 0 });
    return {
      status: head.status,
      headers: new ResponseHeaders(head.fields),
      get body() {
        if (readable === undefined) reader.use();
        return stream();
      },
      text: async () => {
        reader.use();
        try {
          return await reader.text();
        } catch (err) {
          const reason = signal.aborted ? signal.reason : err;
          fail(reason);
          throw reason;
        }
      },
    };
  }
}

/** Reads a response head; the bytes after it stay on the connection. */
async function readHead(conn: Connection) {
  let bytes: Uint8Array | undefined;
  for (;;) {
    const chunk = await conn.read();
    if (chunk === null) {
      throw unexpectedEof(bytes === undefined ? "before the answer" : "in the answer's head");
    }
    const from = bytes?.length ?? 0;
    if (bytes === undefined) {
      bytes = chunk;
    } else {
      const joined = new Uint8Array(bytes.length + chunk.length);
      joined.set(bytes);
      joined.set(chunk, bytes.length);
      bytes = joined;
    }
    const end = headEnd(bytes, from);
    if (end >= 0) {
      const head = parseHead(bytes.subarray(0, end));
      conn.unread(bytes.subarray(end));
      return head;
    }
    if (bytes.length > MAX_HEAD) {
      throw new TransportError("too-large", `malformed HTTP response: head over ${MAX_HEAD} bytes`);
    }
  }
}

/** How the body of an answer to `method` with `status` and `fields` ends (RFC 9112 6.3). */
function framingOf(method: string, status: number, fields: Map<string, string[]>): Framing {
  if (method === "HEAD" || status === 204 || status === 304) return { kind: "length", left: 0 };
  const coding = fields.get("transfer-encoding");
  if (coding !== undefined) {
    const last = coding.join(",").split(",").map((c) => c.trim().toLowerCase()).filter((c) => c)
      .at(-1);
    return last === "chunked"
      ? { kind: "chunked", decoder: new ChunkedDecoder() }
      : { kind: "close" };
  }
  const lengths = fields.get("content-length");
  if (lengths !== undefined) {
    const values = new Set(lengths.join(",").split(",").map((v) => v.trim()));
    const [value] = values;
    if (values.size !== 1 || !/^[0-9]{1,15}$/.test(value!)) {
      throw new TransportError("protocol", "malformed HTTP response: invalid Content-Length");
    }
    return { kind: "length", left: Number(value) };
  }
  return { kind: "close" };
}
