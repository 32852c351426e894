/**
 * A loopback TCP proxy for fault tests: it forwards bytes between its clients and a target, and
 * on demand goes silent (stops forwarding without closing, as a vanished API server node or a
 * load balancer failing over does) or breaks connections in the middle of a request.
 *
 * @example
 * ```ts
 * await using proxy = await TcpProxy.start({ port: server.port });
 * // point the client at proxy.url ...
 * proxy.silenceExisting(); // open connections black-hole every byte; new ones still work
 * ```
 * @module
 */

/** One proxied connection: the client side and the target side. */
interface Link {
  client: Deno.Conn;
  target: Deno.Conn | undefined;
  /** Bytes are read and dropped in both directions; the sockets stay open. */
  silent: boolean;
  closed: boolean;
}

/** Where the proxy forwards to. */
export interface ProxyTarget {
  /** Default `127.0.0.1`. */
  hostname?: string;
  port: number;
}

/**
 * The proxy. Listens on 127.0.0.1; every accepted connection opens one connection to the
 * target. Stop it with {@link TcpProxy.close} (or `await using`), which closes every connection.
 */
export class TcpProxy {
  readonly #listener: Deno.Listener<Deno.TcpConn, Deno.NetAddr>;
  readonly #target: Required<ProxyTarget>;
  readonly #links = new Set<Link>();
  #silenceNew = false;
  #breakRequests = 0;
  #accepted = 0;
  #broken = 0;
  #closed = false;
  readonly #accepting: Promise<void>;
  readonly #pumps = new Set<Promise<void>>();

  private constructor(listener: Deno.Listener<Deno.TcpConn, Deno.NetAddr>, target: ProxyTarget) {
    this.#listener = listener;
    this.#target = { hostname: target.hostname ?? "127.0.0.1", port: target.port };
    this.#accepting = this.#accept();
  }

  /** Starts a proxy on a free port of 127.0.0.1. */
  static start(target: ProxyTarget): Promise<TcpProxy> {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0, transport: "tcp" });
    return Promise.resolve(new TcpProxy(listener, target));
  }

  /** The port the proxy listens on. */
  get port(): number {
    return this.#listener.addr.port;
  }

  /** Connections accepted so far. */
  get accepted(): number {
    return this.#accepted;
  }

  /** Connections open now. */
  get open(): number {
    return [...this.#links].filter((l) => !l.closed).length;
  }

  /** Connections broken so far by {@link breakNextRequests}. */
  get broken(): number {
    return this.#broken;
  }

  /**
   * Every connection open now stops forwarding in both directions without closing: what each
   * side sends is read and dropped, nothing is answered. Connections accepted later work.
   */
  silenceExisting(): void {
    for (const link of this.#links) link.silent = true;
  }

  /** Like {@link silenceExisting}, and connections accepted later are silent too. */
  silenceAll(): void {
    this.silenceExisting();
    this.#silenceNew = true;
  }

  /** Connections accepted from now on forward again (silent ones stay silent). */
  resumeNew(): void {
    this.#silenceNew = false;
  }

  /**
   * The next `n` times a client sends bytes (a request), its connection is closed at once,
   * without forwarding them: the client sees the connection end before any answer.
   */
  breakNextRequests(n: number): void {
    this.#breakRequests += n;
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listener.close();
    for (const link of this.#links) this.#closeLink(link);
    await this.#accepting;
    await Promise.allSettled([...this.#pumps]);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #accept(): Promise<void> {
    for (;;) {
      let client: Deno.TcpConn;
      try {
        client = await this.#listener.accept();
      } catch {
        return; // closed
      }
      this.#accepted++;
      const link: Link = { client, target: undefined, silent: this.#silenceNew, closed: false };
      this.#links.add(link);
      this.#track(this.#serve(link));
    }
  }

  #track(p: Promise<void>): void {
    this.#pumps.add(p);
    p.finally(() => this.#pumps.delete(p));
  }

  async #serve(link: Link): Promise<void> {
    try {
      link.target = await Deno.connect({
        hostname: this.#target.hostname,
        port: this.#target.port,
      });
    } catch {
      this.#closeLink(link);
      return;
    }
    if (link.closed) {
      this.#closeLink(link);
      return;
    }
    await Promise.allSettled([
      this.#pump(link, link.client, link.target, true),
      this.#pump(link, link.target, link.client, false),
    ]);
  }

  /** Copies `from` to `to` until either ends; drops the bytes while the link is silent. */
  async #pump(link: Link, from: Deno.Conn, to: Deno.Conn, fromClient: boolean): Promise<void> {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await from.read(buf);
        if (n === null) break;
        if (link.silent) continue;
        if (fromClient && this.#breakRequests > 0) {
          this.#breakRequests--;
          this.#broken++;
          break;
        }
        let off = 0;
        while (off < n) off += await to.write(buf.subarray(off, n));
      }
    } catch {
      // A closed socket ends the pump.
    }
    // A silent link tells the client nothing, not even that the target went away.
    if (link.silent && !fromClient && !this.#closed) return;
    this.#closeLink(link);
  }

  #closeLink(link: Link): void {
    if (link.closed) return;
    link.closed = true;
    this.#links.delete(link);
    for (const conn of [link.client, link.target]) {
      try {
        conn?.close();
      } catch {
        // already closed
      }
    }
  }
}
