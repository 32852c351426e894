/**
 * A loopback TCP proxy for fault tests: it forwards bytes between its clients and a target, and
 * on demand
 *
 * - goes silent: stops forwarding without closing, as a vanished API server node or a load
 *   balancer failing over does; the connection stays half-open for good ({@link
 *   TcpProxy.silenceExisting}, {@link TcpProxy.silenceAll});
 * - holds every byte, as a network partition does: nothing passes either way, and when the
 *   partition heals what TCP kept retransmitting arrives ({@link TcpProxy.hold}, {@link
 *   TcpProxy.release});
 * - delays what the target answers, as a slow API server does ({@link TcpProxy.setDelay});
 * - resets connections: those open now, and for a while every new one ({@link TcpProxy.resetAll},
 *   {@link TcpProxy.refuseNew});
 * - breaks connections in the middle of a request ({@link TcpProxy.breakNextRequests}).
 *
 * Limit: at most {@link MAX_QUEUED_BYTES} wait in each direction of a connection while held or
 * delayed; beyond them the proxy stops reading, so the sender's socket buffers fill as on a
 * congested path.
 *
 * @example
 * ```ts
 * await using proxy = await TcpProxy.start({ port: server.port });
 * // point the client at proxy.url ...
 * proxy.silenceExisting(); // open connections black-hole every byte; new ones still work
 * ```
 * @module
 */

/** Bytes a direction of one connection queues while held or delayed before it stops reading. */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

/** One direction's bytes in flight: read, not yet written. */
interface Chunk {
  /** When it may be written (performance.now() ms). */
  due: number;
  bytes: Uint8Array;
}

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
  #refused = 0;
  #resets = 0;
  #clientBytes = 0;
  #refuseNew = false;
  #delayMs = 0;
  /** Set while held: resolves on release. */
  #held: PromiseWithResolvers<void> | undefined;
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

  /** Bytes read from clients to be passed on to the target so far, on every connection. */
  get bytesFromClients(): number {
    return this.#clientBytes;
  }

  /** Connections open now. */
  get open(): number {
    return [...this.#links].filter((l) => !l.closed).length;
  }

  /** Connections broken so far by {@link breakNextRequests}. */
  get broken(): number {
    return this.#broken;
  }

  /** Connections closed by {@link resetAll}, and accepted and closed at once by {@link refuseNew}. */
  get resets(): number {
    return this.#resets + this.#refused;
  }

  /**
   * A partition: from now on no byte passes in either direction, on open connections and on new
   * ones, and nothing is closed. What arrives is kept (up to {@link MAX_QUEUED_BYTES} a direction)
   * and passes on {@link release}, as TCP's retransmissions deliver it once a partition heals.
   */
  hold(): void {
    this.#held ??= Promise.withResolvers<void>();
  }

  /** Ends {@link hold}: what was kept passes, in order. */
  release(): void {
    this.#held?.resolve();
    this.#held = undefined;
  }

  /** True between {@link hold} and {@link release}. */
  get held(): boolean {
    return this.#held !== undefined;
  }

  /**
   * Every byte the target sends from now on reaches the client `ms` later (0: at once), on open
   * and new connections; order is kept. A delayed answer is what a slow API server gives.
   */
  setDelay(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`Invalid delay: ${ms}`);
    this.#delayMs = ms;
  }

  /** Closes every open connection now, both sides, without forwarding what waits. */
  resetAll(): void {
    for (const link of [...this.#links]) {
      this.#resets++;
      this.#closeLink(link);
    }
  }

  /** While `on`, every connection accepted is closed at once (the client sees it reset). */
  refuseNew(on: boolean): void {
    this.#refuseNew = on;
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
      if (this.#refuseNew) {
        this.#refused++;
        client.close();
        continue;
      }
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

  /**
   * Copies `from` to `to` until either ends: one loop reads into a queue, another writes each
   * chunk when it is due and the proxy is not held. Drops the bytes while the link is silent.
   */
  async #pump(link: Link, from: Deno.Conn, to: Deno.Conn, fromClient: boolean): Promise<void> {
    const queue: Chunk[] = [];
    let queued = 0;
    let ended = false;
    let wake: PromiseWithResolvers<void> | undefined;
    let room: PromiseWithResolvers<void> | undefined;
    let writerDone = false;
    const writer = (async () => {
      try {
        for (;;) {
          const chunk = queue.shift();
          if (chunk === undefined) {
            if (ended) return;
            wake = Promise.withResolvers<void>();
            await wake.promise;
            continue;
          }
          const wait = chunk.due - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          while (this.#held !== undefined && !link.closed) await this.#held.promise;
          if (link.closed) return;
          let off = 0;
          while (off < chunk.bytes.length) off += await to.write(chunk.bytes.subarray(off));
          queued -= chunk.bytes.length;
          room?.resolve();
        }
      } catch {
        // A closed socket ends the pump.
      } finally {
        writerDone = true;
        room?.resolve();
      }
    })();
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        while (queued >= MAX_QUEUED_BYTES && !link.closed && !writerDone) {
          room = Promise.withResolvers<void>();
          await room.promise;
        }
        if (writerDone && !link.silent) break;
        const n = await from.read(buf);
        if (n === null) break;
        if (link.silent) continue;
        if (fromClient && this.#breakRequests > 0) {
          this.#breakRequests--;
          this.#broken++;
          break;
        }
        if (fromClient) this.#clientBytes += n;
        const due = performance.now() + (fromClient ? 0 : this.#delayMs);
        queue.push({ due, bytes: buf.slice(0, n) });
        queued += n;
        wake?.resolve();
      }
    } catch {
      // A closed socket ends the pump.
    }
    ended = true;
    wake?.resolve();
    await writer;
    // A silent link tells the client nothing, not even that the target went away.
    if (link.silent && !fromClient && !this.#closed) return;
    this.#closeLink(link);
  }

  #closeLink(link: Link): void {
    if (link.closed) return;
    link.closed = true;
    // Wakes the writers waiting on a hold so that they see the link closed.
    const held = this.#held;
    if (held !== undefined) {
      this.#held = Promise.withResolvers<void>();
      held.resolve();
    }
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
