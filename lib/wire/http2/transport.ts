/**
 * HTTP/2 over TLS (RFC 9113 §3.2: ALPN `h2`) to the Kubernetes API server, as client-go talks to
 * it: one connection per server carries every request and watch as streams
 * (`./http_exchange.ts` over `./session.ts`), a second one opened only while the first has
 * SETTINGS_MAX_CONCURRENT_STREAMS streams open (Go's `x/net/http2` `clientConnPool` opens a new
 * connection when `ClientConn.CanTakeNewRequest` says no). Every other request goes to the
 * HTTP/1.1 {@link Transport} it is given (`../http1/transport.ts`), where client-go keeps HTTP/1.1
 * too:
 * - `http:` servers (client-go speaks no cleartext HTTP/2);
 * - requests through a proxy (Go's transport sends them over HTTP/1.1 `CONNECT` tunnels);
 * - a server whose TLS handshake does not pick `h2` (ALPN offers `h2` then `http/1.1`, as Go's
 *   `Transport` does once `ForceAttemptHTTP2` or a `TLSNextProto` entry is set): that origin goes
 *   to HTTP/1.1 from then on;
 * - TLS settings the runtime's TLS cannot express (`tls-server-name`, `insecure-skip-tls-verify`;
 *   the HTTP/1.1 transport runs those through `node:tls`, which offers no ALPN here).
 *
 * A connection is checked as client-go checks it (`k8s.io/apimachinery/pkg/util/net/http.go`
 * `readIdleTimeoutSeconds` 30, `pingTimeoutSeconds` 15): a PING after 30 s without a frame, closed
 * when it is not answered in 15 s (`./health_check.ts`). After GOAWAY a connection takes no new
 * stream; the streams it refused (above its last stream id, or REFUSED_STREAM), never processed,
 * are sent again once on a connection of their own, any method (Go: `canRetryError`). An idle
 * connection (no stream for 90 s, client-go's `IdleConnTimeout`) is closed when next looked at.
 *
 * Limits as on HTTP/1.1: a response header list of at most 64 KiB (the HTTP/1.1 transport's head
 * limit; announced as SETTINGS_MAX_HEADER_LIST_SIZE), the body bounded by the request's
 * `maxBodyBytes`. The stream window (4 MiB) is given back only as the body is read, so a slow
 * reader holds at most that much per stream.
 *
 * @module
 */

import type {
  RequestUrl,
  TlsMaterial,
  Transport,
  TransportRequest,
  TransportResponse,
} from "../http1/api.ts";
import { TransportError } from "../http1/errors.ts";
import { connectTls } from "../http1/tls_connect.ts";
import { type TlsSettings, tlsSettings } from "../http1/tls_settings.ts";
import { type Clock, realClock } from "../../clock.ts";
import { errorText } from "../../errors.ts";
import { Http2Session } from "./session.ts";
import { FencedError } from "../../lease_fence.ts";
import { StreamError } from "./stream_error.ts";
import { requestFields, responseOf, transportErrorOf } from "./http_exchange.ts";

/** The response header list limit: the HTTP/1.1 transport's `MAX_HEAD_BYTES`, 64 KiB. */
export const HTTP2_MAX_HEADER_LIST_SIZE = 64 * 1024;
/** client-go's `readIdleTimeoutSeconds`. */
const READ_IDLE_TIMEOUT_MS = 30_000;
/** client-go's `pingTimeoutSeconds`. */
const PING_TIMEOUT_MS = 15_000;
/** Go and client-go's `IdleConnTimeout`. */
const IDLE_TIMEOUT_MS = 90_000;

/**
 * Opens a TLS connection offering ALPN `protocols`, handshake done: the connection and the
 * protocol the server picked (null: none).
 */
export type AlpnConnect = (
  hostname: string,
  port: number,
  tls: TlsSettings,
  protocols: string[],
) => Promise<{ conn: Deno.Conn; protocol: string | null }>;

/** Options of {@link Http2Transport}. */
export interface Http2Options {
  /** Carries what HTTP/2 does not (see the module doc). */
  fallback: Transport;
  /** The proxy of a request's URL; a request with one goes to {@link fallback}. */
  proxy?: (target: URL) => URL | undefined;
  /** @default realClock */
  clock?: Clock;
  /** @default 30000 */
  readIdleTimeoutMs?: number;
  /** @default 15000 */
  pingTimeoutMs?: number;
  /** @default 90000 */
  idleTimeoutMs?: number;
  /** @default `../http1/tls_connect.ts` `connectTls` */
  connectTls?: AlpnConnect;
}

interface Connection {
  session: Http2Session;
  generation: number;
  /** When its last stream ended (or it was opened). */
  idleSince: number;
}

interface Origin {
  connections: Connection[];
  dialing: Promise<Connection | null> | undefined;
  /** The server did not pick `h2`: HTTP/1.1 from now on. */
  http1: boolean;
}

/** `value`, or the signal's reason when it aborts first. */
function raceSignal<T>(value: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    value.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** HTTP/2 where the server offers it, else the fallback; see the module doc. */
export class Http2Transport implements Transport {
  readonly #tls: TlsSettings;
  readonly #fallback: Transport;
  readonly #proxy: ((target: URL) => URL | undefined) | undefined;
  readonly #clock: Clock;
  readonly #readIdleTimeoutMs: number;
  readonly #pingTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #connectTls: AlpnConnect;
  readonly #origins = new Map<string, Origin>();
  /** Proxy decisions by origin: the proxy function is asked once per origin. */
  readonly #proxied = new Map<string, boolean>();
  #generation = 0;
  #closed = false;

  /** @throws {TypeError} when only one of the client certificate and key is set. */
  constructor(tls: TlsMaterial, options: Http2Options) {
    this.#tls = tlsSettings(tls);
    this.#fallback = options.fallback;
    this.#proxy = options.proxy;
    this.#clock = options.clock ?? realClock;
    this.#readIdleTimeoutMs = options.readIdleTimeoutMs ?? READ_IDLE_TIMEOUT_MS;
    this.#pingTimeoutMs = options.pingTimeoutMs ?? PING_TIMEOUT_MS;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    this.#connectTls = options.connectTls ?? connectTls;
  }

  /** HTTP/2 connections open now (streams or not), for tests and figures. */
  get connections(): number {
    let n = 0;
    for (const o of this.#origins.values()) {
      n += o.connections.filter((c) => c.session.usable).length;
    }
    return n;
  }

  get generation(): number {
    return this.#generation;
  }

  async send(url: RequestUrl, request: TransportRequest): Promise<TransportResponse> {
    const { signal } = request;
    if (this.#closed) throw new TransportError("closed", "the transport is closed");
    signal.throwIfAborted();
    const key = `${url.protocol}//${url.host}`;
    if (!this.#eligible(url, key)) return this.#fallback.send(url, request);
    const origin = this.#origin(key);
    if (origin.http1) return this.#fallback.send(url, request);
    const { fields, body } = requestFields(url, request);
    for (let attempt = 0;; attempt++) {
      const conn = await this.#connection(origin, url, signal);
      if (conn === null) return this.#fallback.send(url, request);
      // A write that needs the lease is asked again right before each of its frames is written.
      const stream = conn.session.open(
        fields,
        body,
        request.maxBodyBytes ?? Infinity,
        request.fence === undefined ? {} : { fence: request.fence },
      );
      const ended = () => {
        if (conn.session.activeStreams === 0) conn.idleSince = this.#clock.now();
      };
      let head;
      try {
        head = await raceSignal(stream.head, signal);
      } catch (err) {
        stream.cancel();
        ended();
        if (signal.aborted) throw signal.reason;
        // Refused by the fence: nothing the server runs was sent, and it is not tried again.
        if (err instanceof FencedError) throw err;
        // Never processed by the server (GOAWAY, REFUSED_STREAM): once more, on another stream.
        if (attempt === 0 && err instanceof StreamError && err.failure.kind === "refused") continue;
        throw transportErrorOf(err);
      }
      return responseOf(head, stream, signal, request.maxBodyBytes, ended);
    }
  }

  renew(generation: number): void {
    if (generation !== this.#generation) return;
    this.#generation++;
    for (const origin of this.#origins.values()) {
      for (const c of origin.connections) c.session.drain("the connection was renewed");
      origin.connections = [];
    }
    this.#fallback.renew(this.#fallback.generation);
  }

  close(): void {
    this.#closed = true;
    this.renew(this.#generation);
    this.#fallback.close();
  }

  /** True when `url` may go over HTTP/2: `https:`, no proxy, TLS settings Deno can express. */
  #eligible(url: RequestUrl, key: string): boolean {
    if (url.protocol !== "https:") return false;
    if (this.#tls.insecure || this.#tls.serverName !== undefined) return false;
    let proxied = this.#proxied.get(key);
    if (proxied === undefined) {
      proxied = this.#proxy?.(new URL(url.href)) !== undefined;
      this.#proxied.set(key, proxied);
    }
    return !proxied;
  }

  #origin(key: string): Origin {
    let origin = this.#origins.get(key);
    if (origin === undefined) {
      origin = { connections: [], dialing: undefined, http1: false };
      this.#origins.set(key, origin);
    }
    return origin;
  }

  /**
   * A connection of `origin` with room for a stream: an open one, else a new one (one dial at a
   * time per origin; requests arriving meanwhile wait for it). Null when the server chose
   * HTTP/1.1.
   */
  async #connection(
    origin: Origin,
    url: RequestUrl,
    signal: AbortSignal,
  ): Promise<Connection | null> {
    for (;;) {
      if (this.#closed) throw new TransportError("closed", "the transport is closed");
      if (origin.http1) return null;
      const now = this.#clock.now();
      origin.connections = origin.connections.filter((c) => {
        if (!c.session.usable) return false;
        if (c.session.activeStreams > 0 || now - c.idleSince <= this.#idleTimeoutMs) return true;
        c.session.close("idle connection closed");
        return false;
      });
      const ready = origin.connections.find((c) => c.session.hasCapacity);
      if (ready !== undefined) return ready;
      origin.dialing ??= this.#dial(origin, url).finally(() => origin.dialing = undefined);
      const conn = await raceSignal(origin.dialing, signal);
      if (conn === null) return null;
      if (conn.session.hasCapacity) return conn;
    }
  }

  async #dial(origin: Origin, url: RequestUrl): Promise<Connection | null> {
    const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
    const port = url.port !== "" ? Number(url.port) : 443;
    const generation = this.#generation;
    const { conn: tls, protocol } = await this.#connectTls(hostname, port, this.#tls, [
      "h2",
      "http/1.1",
    ]);
    if (protocol !== "h2" || this.#closed) {
      tls.close();
      if (this.#closed) throw new TransportError("closed", "the transport is closed");
      origin.http1 = true;
      return null;
    }
    let session: Http2Session;
    try {
      session = await Http2Session.start(tls, () => {}, {
        clock: this.#clock,
        maxHeaderListSize: HTTP2_MAX_HEADER_LIST_SIZE,
        readIdleTimeoutMs: this.#readIdleTimeoutMs,
        pingTimeoutMs: this.#pingTimeoutMs,
      });
    } catch (err) {
      throw new TransportError("reset", `http2: ${errorText(err)}`, { cause: err });
    }
    const conn = { session, generation, idleSince: this.#clock.now() };
    if (this.#closed || generation !== this.#generation) {
      session.drain("the connection was renewed");
    }
    origin.connections.push(conn);
    return conn;
  }
}
