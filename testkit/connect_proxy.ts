/**
 * An HTTP proxy on loopback for tests of the client's proxy path: it answers `CONNECT host:port`
 * (RFC 9110 section 9.3.6) by opening a tunnel to a loopback port and relaying bytes both ways,
 * and on demand refuses every CONNECT, or closes a tunnel in the middle of the server's answer.
 * It records every CONNECT it was asked for. It reads requests on its own (no code shared with
 * `lib/wire/http1/`), and connects only to 127.0.0.1.
 *
 * @example
 * ```ts
 * await using proxy = ConnectProxy.start({ route: () => server.port });
 * // point the client at proxy.url (proxy-url, or HTTPS_PROXY) ...
 * assert.deepEqual(proxy.connects.map((c) => c.authority), ["kube.test:6443"]);
 * ```
 * @module
 */

const LATIN1 = new TextDecoder("latin1");
const ENCODER = new TextEncoder();
/** The longest CONNECT head read; a longer one is answered 431 and closed. */
const MAX_HEAD = 16 * 1024;

/** What the proxy does with a CONNECT. */
export type ProxyBehaviour =
  /** Opens the tunnel (`200`), or answers `502` when the route names no port. */
  | "tunnel"
  /** Answers `403 Forbidden` and closes: no tunnel. */
  | "refuse"
  /** Opens the tunnel, then closes both sides once `closeAfterBytes` of the answer went through. */
  | "close-mid-tunnel";

/** Options of {@link ConnectProxy.start}. */
export interface ConnectProxyOptions {
  /** The loopback port for a CONNECT authority (`host:port`). @default the authority's port */
  route?: (authority: string) => number | undefined;
  /** @default "tunnel" */
  behaviour?: ProxyBehaviour;
  /** For `close-mid-tunnel`: how many bytes of the server's answer reach the client. @default 0 */
  closeAfterBytes?: number;
}

/** One CONNECT the proxy was asked for. */
export interface ConnectRecord {
  authority: string;
  /** The `Proxy-Authorization` header, or null. */
  proxyAuthorization: string | null;
}

/** The proxy; stop it with {@link ConnectProxy.close} (or `await using`). */
export class ConnectProxy {
  /** Every CONNECT asked for, in order. */
  readonly connects: ConnectRecord[] = [];
  readonly #listener: Deno.Listener<Deno.TcpConn, Deno.NetAddr>;
  readonly #options: ConnectProxyOptions;
  readonly #conns = new Set<Deno.Conn>();
  readonly #tasks = new Set<Promise<void>>();
  readonly #accepting: Promise<void>;
  #closed = false;

  private constructor(options: ConnectProxyOptions) {
    this.#options = options;
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0, transport: "tcp" });
    this.#accepting = this.#accept();
  }

  /** Starts a proxy on a free port of 127.0.0.1. */
  static start(options: ConnectProxyOptions = {}): ConnectProxy {
    return new ConnectProxy(options);
  }

  /** `http://127.0.0.1:<port>`. */
  get url(): string {
    return `http://127.0.0.1:${this.#listener.addr.port}`;
  }

  /** Closes the listener and every connection, and waits for every tunnel to end. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listener.close();
    for (const conn of this.#conns) closeQuietly(conn);
    await this.#accepting;
    await Promise.allSettled([...this.#tasks]);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) {
        if (this.#closed) {
          closeQuietly(conn);
          continue;
        }
        const task = this.#serve(conn).finally(() => this.#tasks.delete(task));
        this.#tasks.add(task);
      }
    } catch {
      // The listener was closed.
    }
  }

  async #serve(client: Deno.Conn): Promise<void> {
    this.#conns.add(client);
    let target: Deno.Conn | undefined;
    try {
      const head = await readHead(client);
      if (head === undefined) return;
      const [line, ...fields] = head.text.split("\r\n");
      const match = /^CONNECT (\S+) HTTP\/1\.[01]$/.exec(line ?? "");
      if (match === null) return void await writeAll(client, answer(405, "Method Not Allowed"));
      const authority = match[1]!;
      const auth = fields.find((f) => /^proxy-authorization:/i.test(f));
      this.connects.push({
        authority,
        proxyAuthorization: auth === undefined ? null : auth.slice(auth.indexOf(":") + 1).trim(),
      });
      const behaviour = this.#options.behaviour ?? "tunnel";
      if (behaviour === "refuse") return void await writeAll(client, answer(403, "Forbidden"));
      const port = (this.#options.route ?? portOf)(authority);
      if (port === undefined) return void await writeAll(client, answer(502, "Bad Gateway"));
      try {
        target = await Deno.connect({ hostname: "127.0.0.1", port });
      } catch {
        return void await writeAll(client, answer(502, "Bad Gateway"));
      }
      this.#conns.add(target);
      await writeAll(client, "HTTP/1.1 200 Connection established\r\n\r\n");
      if (head.rest.length > 0) await writeAll(target, head.rest);
      const limit = behaviour === "close-mid-tunnel"
        ? this.#options.closeAfterBytes ?? 0
        : Infinity;
      const up = relay(client, target, Infinity);
      const down = relay(target, client, limit);
      // Either direction ending (EOF, error, the limit) ends the tunnel.
      await Promise.race([up, down]);
    } catch {
      // A broken connection ends the tunnel.
    } finally {
      for (const conn of [client, target]) {
        if (conn === undefined) continue;
        closeQuietly(conn);
        this.#conns.delete(conn);
      }
    }
  }
}

/** `host:port`'s port. */
function portOf(authority: string): number | undefined {
  const port = Number(authority.slice(authority.lastIndexOf(":") + 1));
  return Number.isInteger(port) && port > 0 ? port : undefined;
}

function answer(status: number, text: string): string {
  return `HTTP/1.1 ${status} ${text}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`;
}

/** The request head up to CRLF CRLF and the bytes read after it; undefined on EOF or too long. */
async function readHead(
  conn: Deno.Conn,
): Promise<{ text: string; rest: Uint8Array } | undefined> {
  let bytes = new Uint8Array(0);
  const buf = new Uint8Array(4096);
  for (;;) {
    const end = LATIN1.decode(bytes).indexOf("\r\n\r\n");
    if (end >= 0) {
      return { text: LATIN1.decode(bytes.subarray(0, end)), rest: bytes.slice(end + 4) };
    }
    if (bytes.length > MAX_HEAD) {
      await writeAll(conn, answer(431, "Request Header Fields Too Large"));
      return undefined;
    }
    const n = await conn.read(buf);
    if (n === null) return undefined;
    const next = new Uint8Array(bytes.length + n);
    next.set(bytes);
    next.set(buf.subarray(0, n), bytes.length);
    bytes = next;
  }
}

/** Copies `from` to `to` until EOF, an error, or `limit` bytes (then stops). */
async function relay(from: Deno.Conn, to: Deno.Conn, limit: number): Promise<void> {
  const buf = new Uint8Array(16 * 1024);
  let sent = 0;
  try {
    while (sent < limit) {
      const n = await from.read(buf.subarray(0, Math.min(buf.length, limit - sent)));
      if (n === null) return;
      await writeAll(to, buf.subarray(0, n));
      sent += n;
    }
  } catch {
    // Either side closed.
  }
}

async function writeAll(conn: Deno.Conn, data: string | Uint8Array): Promise<void> {
  const bytes = typeof data === "string" ? ENCODER.encode(data) : data;
  for (let offset = 0; offset < bytes.length;) offset += await conn.write(bytes.subarray(offset));
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}
