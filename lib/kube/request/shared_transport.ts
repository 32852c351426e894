/**
 * One transport shared by the API clients of one configuration, as client-go shares one
 * `http.Transport` per `rest.Config` (`transport/cache.go`, `tlsTransportCache.get`): every
 * client made from the configuration sends over the same connection pool, so one attacher keeps
 * one pool to the API server, not one per client.
 *
 * The pool is built on first use and closed when its last user lets go (client-go keeps its
 * cached transports for the process's life; the attacher's clients all end with `runAttacher`,
 * so the last one to close also ends the pool). A user that comes after that gets a new pool.
 *
 * @module
 */

import type { Transport } from "./transport.ts";

/** One client's hold on a {@link SharedTransport}. */
export interface TransportUse {
  /** The shared transport, built on first use. */
  transport(): Transport;
  /** Lets go of the transport; the last user to let go closes it. A second call does nothing. */
  release(): void;
}

/** A transport built on first use and closed when the last of its users lets go. */
export class SharedTransport {
  readonly #make: () => Transport;
  #transport: Transport | undefined;
  #users = 0;

  /** `make` builds the transport (no I/O: connections open on the first request). */
  constructor(make: () => Transport) {
    this.#make = make;
  }

  /** How many users hold the transport. */
  get users(): number {
    return this.#users;
  }

  /** A new user's hold on the transport. */
  use(): TransportUse {
    this.#users++;
    let released = false;
    return {
      transport: () => {
        if (released) throw new Error("transport used after release");
        return this.#transport ??= this.#make();
      },
      release: () => {
        if (released) return;
        released = true;
        if (--this.#users > 0) return;
        const transport = this.#transport;
        this.#transport = undefined;
        transport?.close();
      },
    };
  }
}
