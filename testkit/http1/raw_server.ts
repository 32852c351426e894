/**
 * A scriptable raw HTTP/1.1 server on loopback TCP for adversarial tests: it reads each request
 * (head and `Content-Length` body) and lets a script write any bytes back, correct or not, at
 * any pace, then keep or close the connection. It shares no code with `lib/wire/http1/`: its
 * request reading and the well-formed answers of {@link ok} and {@link chunked} are written here
 * from RFC 9112, so a bug in the client's reader cannot hide in the server's.
 *
 * Everything it starts ends with {@link RawHttpServer.close}: connections, scripts (their
 * waits end at once) and endless writes.
 *
 * @module
 */

const LATIN1 = new TextDecoder("latin1");
const ENCODER = new TextEncoder();

/** Bytes of `data`: a string is sent as UTF-8. */
function bytesOf(data: string | Uint8Array): Uint8Array {
  return typeof data === "string" ? ENCODER.encode(data) : data;
}

/** A `200 OK` answer with `body` and a `Content-Length`, plus `headers` lines. */
export function ok(body: string, headers: string[] = ["Content-Type: application/json"]): string {
  const length = ENCODER.encode(body).length;
  return `HTTP/1.1 200 OK\r\n${headers.map((h) => `${h}\r\n`).join("")}` +
    `Content-Length: ${length}\r\n\r\n${body}`;
}

/** `body` in the chunked transfer coding, one chunk per piece, with the last chunk. */
export function chunked(...pieces: string[]): string {
  return pieces.filter((p) => p !== "").map((p) =>
    `${ENCODER.encode(p).length.toString(16)}\r\n${p}\r\n`
  ).join("") + "0\r\n\r\n";
}

/** One request and the means to answer it. */
export interface RawExchange {
  /** Index of the request over the server's life, from 0. */
  readonly index: number;
  /** Index of the connection it came on, from 0. */
  readonly connection: number;
  /** Index of the request on its connection, from 0. */
  readonly onConnection: number;
  /** The request (head and body) as Latin-1 text, one character per byte. */
  readonly request: string;
  /** Aborts when the server closes. */
  readonly signal: AbortSignal;
  /** Writes `data`; false when the connection is gone (the client closed it). */
  write(data: string | Uint8Array): Promise<boolean>;
  /** Writes `data` in pieces of `size` bytes, `delayMs` apart; false when the client left. */
  trickle(data: string | Uint8Array, size: number, delayMs: number): Promise<boolean>;
  /**
   * Writes `data` again and again, `delayMs` apart (0: as fast as the client reads), until the
   * client leaves, the server closes or `maxBytes` were written. Resolves with the bytes written.
   */
  flood(data: string | Uint8Array, opts?: { delayMs?: number; maxBytes?: number }): Promise<number>;
  /** Waits `ms`, or less when the server closes. */
  sleep(ms: number): Promise<void>;
}

/** What a script does with a connection after its answer. */
export type RawOutcome = "keep" | "close";

/** Answers one request. */
export type RawScript = (exchange: RawExchange) => Promise<RawOutcome>;

/** A raw HTTP/1.1 server on 127.0.0.1; see the module doc. */
export class RawHttpServer implements AsyncDisposable {
  readonly #listener: Deno.TcpListener;
  readonly #conns = new Set<Deno.Conn>();
  readonly #tasks: Promise<void>[] = [];
  readonly #stop = new AbortController();
  #script: RawScript;
  /** Every request received, as Latin-1 text. */
  readonly requests: string[] = [];
  /** Connections accepted. */
  connections = 0;
  /** Connections the client closed (EOF, reset, or a failed write seen by the server). */
  clientClosed = 0;
  /** Connections whose serving ended, whoever closed them (not counting {@link close}). */
  ended = 0;

  private constructor(script: RawScript) {
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#script = script;
    this.#tasks.push(this.#accept());
  }

  /** Starts a server answering with `script`. */
  static start(script: RawScript): RawHttpServer {
    return new RawHttpServer(script);
  }

  /** `http://127.0.0.1:<port>`. */
  get url(): string {
    return `http://127.0.0.1:${this.#listener.addr.port}`;
  }

  /** Answers later requests with `script`. */
  setScript(script: RawScript): void {
    this.#script = script;
  }

  /** Closes the listener and every connection, and waits for the scripts to end. */
  async close(): Promise<void> {
    if (!this.#stop.signal.aborted) {
      this.#stop.abort();
      try {
        this.#listener.close();
      } catch { /* closed */ }
      for (const conn of this.#conns) closeQuietly(conn);
    }
    await Promise.allSettled(this.#tasks);
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) {
        if (this.#stop.signal.aborted) {
          closeQuietly(conn);
          break;
        }
        const index = this.connections++;
        this.#conns.add(conn);
        this.#tasks.push(this.#serve(conn, index));
      }
    } catch {
      // The listener was closed.
    }
  }

  async #serve(conn: Deno.Conn, connection: number): Promise<void> {
    let pending = "";
    let onConnection = 0;
    const buf = new Uint8Array(65536);
    let gone = false;
    const write = async (data: string | Uint8Array): Promise<boolean> => {
      if (gone) return false;
      const bytes = bytesOf(data);
      try {
        for (let offset = 0; offset < bytes.length;) {
          offset += await conn.write(bytes.subarray(offset));
        }
        return true;
      } catch {
        gone = true;
        return false;
      }
    };
    try {
      for (;;) {
        const request = takeRequest(pending);
        if (request === undefined) {
          const n = await conn.read(buf);
          if (n === null) break;
          pending += LATIN1.decode(buf.subarray(0, n));
          continue;
        }
        pending = pending.slice(request.length);
        const index = this.requests.length;
        this.requests.push(request);
        const exchange = this.#exchange({
          index,
          connection,
          onConnection: onConnection++,
          request,
          write,
        });
        const outcome = await this.#script(exchange);
        if (outcome === "close" || gone || this.#stop.signal.aborted) {
          if (gone && !this.#stop.signal.aborted) this.clientClosed++;
          if (!this.#stop.signal.aborted) this.ended++;
          closeQuietly(conn);
          this.#conns.delete(conn);
          return;
        }
      }
    } catch {
      // A reset, or the connection closed by close().
    } finally {
      this.#conns.delete(conn);
    }
    if (!this.#stop.signal.aborted) {
      this.clientClosed++;
      this.ended++;
    }
    closeQuietly(conn);
  }

  #exchange(
    base: Pick<RawExchange, "index" | "connection" | "onConnection" | "request" | "write">,
  ): RawExchange {
    const signal = this.#stop.signal;
    const sleep = (ms: number) => abortableSleep(ms, signal);
    return {
      ...base,
      signal,
      sleep,
      async trickle(data, size, delayMs) {
        const bytes = bytesOf(data);
        for (let at = 0; at < bytes.length; at += size) {
          if (at > 0) await sleep(delayMs);
          if (signal.aborted || !await base.write(bytes.subarray(at, at + size))) return false;
        }
        return true;
      },
      async flood(data, opts = {}) {
        const bytes = bytesOf(data);
        const max = opts.maxBytes ?? Infinity;
        let written = 0;
        while (written < max && !signal.aborted) {
          if (!await base.write(bytes)) break;
          written += bytes.length;
          if ((opts.delayMs ?? 0) > 0) await sleep(opts.delayMs!);
        }
        return written;
      },
    };
  }
}

/** The first whole request in `pending` (head and `Content-Length` body), or undefined. */
function takeRequest(pending: string): string | undefined {
  const end = pending.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
  const total = end + 4 + length;
  return pending.length >= total ? pending.slice(0, total) : undefined;
}

/** Resolves after `ms`, or at once when `signal` aborts; leaves no timer behind. */
function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Closed already.
  }
}
