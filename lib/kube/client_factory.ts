/**
 * The API clients of one configuration, sharing one connection pool: client-go builds one
 * `http.Transport` per `rest.Config` and hands it to every client made from that configuration
 * (`transport/cache.go`, `tlsTransportCache.get`), so the attacher's clients (informers and
 * handler, Events, the Lease) keep one pool to the API server between them, not one each.
 *
 * What stays per client, as in client-go: the rate limiter (each client made from the
 * configuration's QPS and burst gets a token bucket of its own, `rest.RESTClientFor`), the
 * observer and the in-flight requests that its `close()` ends. The pool
 * (`./request/shared_transport.ts`) is built at the first request of any of the clients and
 * closed when the last client made so far closes; a client made after that starts a new pool.
 *
 * @module
 */

import { type Clock, realClock } from "../clock.ts";
import type { Logger } from "../observe/logger.ts";
import { KubeClient } from "./client.ts";
import type { KubeClientOptions } from "./client_options.ts";
import type { ClusterConnection } from "./config.ts";
import type { KubeRequestObserver, RequestRateLimiter } from "./request_reports.ts";
import { SharedTransport } from "./request/shared_transport.ts";
import { ThrottledLogger } from "./request/throttle_log.ts";
import { createTransport } from "./request/transport.ts";

export { type ProxyEnvironment, TRANSPORT_VARIABLES } from "./request/transport.ts";

/** Collaborators of a {@link KubeClientFactory}, shared by the clients it makes. */
export interface KubeClientFactoryDeps {
  /** Server, TLS and credentials: the one configuration of every client made. */
  connection: ClusterConnection;
  /** Each client's own rate limiter, made once per client; none when absent. */
  rateLimiter?: () => RequestRateLimiter;
  /** @default realClock */
  clock?: Clock;
  /** Every client's request log (see `KubeClientDeps.log`). */
  log?: Logger;
}

/** Makes {@link KubeClient}s of one configuration over one shared connection pool. */
export class KubeClientFactory {
  readonly #deps: KubeClientFactoryDeps;
  readonly #options: KubeClientOptions;
  readonly #transport: SharedTransport;
  /** One for every client, as client-go's throttled logger is one per process. */
  readonly #throttledLogger: ThrottledLogger;

  /** `options` are every client's; `proxyEnvironment` chooses the shared pool's proxy. */
  constructor(deps: KubeClientFactoryDeps, options: KubeClientOptions = {}) {
    this.#deps = deps;
    this.#options = options;
    const proxyEnvironment = options.proxyEnvironment ?? {};
    this.#transport = new SharedTransport(() => createTransport(deps.connection, proxyEnvironment));
    this.#throttledLogger = new ThrottledLogger(deps.clock ?? realClock);
  }

  /** How many clients made here hold the shared pool (made and not yet closed). */
  get clients(): number {
    return this.#transport.users;
  }

  /**
   * A new client over the shared pool, with a rate limiter of its own, reporting to `observer`.
   *
   * @throws {TypeError} when the server URL is invalid.
   */
  create(observer?: KubeRequestObserver): KubeClient {
    const { connection, clock, log, rateLimiter } = this.#deps;
    const use = this.#transport.use();
    try {
      return new KubeClient({
        connection,
        clock,
        log,
        observer,
        rateLimiter: rateLimiter?.(),
        throttledLogger: this.#throttledLogger,
        transport: use,
      }, this.#options);
    } catch (err) {
      use.release();
      throw err;
    }
  }
}
