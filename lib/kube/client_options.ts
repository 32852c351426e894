/**
 * What a {@link import("./client.ts").KubeClient} is built from: its collaborators and its
 * options, apart from the client so that its request code reads on its own.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import type { Logger } from "../observe/logger.ts";
import type { ClusterConnection } from "./config.ts";
import type { KubeRequestObserver, RequestRateLimiter } from "./request_reports.ts";
import type { ThrottledLogger } from "./request/throttle_log.ts";
import type { ProxyEnvironment } from "./request/transport.ts";
import type { TransportUse } from "./request/shared_transport.ts";

/** Collaborators of a {@link import("./client.ts").KubeClient}. */
export interface KubeClientDeps {
  /** Server, TLS and credentials, e.g. from {@link import("./config.ts").loadConnection}. */
  connection: ClusterConnection;
  /** Awaited before every request except watches. */
  rateLimiter?: RequestRateLimiter;
  /** Told about every try, retry and wait of the client's requests; none when absent. */
  observer?: KubeRequestObserver;
  /**
   * Where waits for the rate limiter over 1 s are logged at most once a second (V(2)) or every
   * 10 s (level 0); share one between the clients of a process, as client-go's is global.
   * @default a ThrottledLogger of this client's own
   */
  throttledLogger?: ThrottledLogger;
  /**
   * Every duration, timer and deadline of the client: request timeouts, retry waits, the watch
   * deadline and idle timeout, the durations reported to the observer. @default realClock
   */
  clock?: Clock;
  /**
   * Request log at verbosity 6, as client-go's round tripper logs (`"HTTP" verb URL status
   * milliseconds`); never headers or bodies.
   */
  log?: Logger;
  /**
   * The connection pool shared with the other clients of one configuration, from a
   * `KubeClientFactory` (`./client_factory.ts`); {@link KubeClientOptions.proxyEnvironment} is
   * then the factory's. @default a pool of this client's own, closed by its `close()`
   */
  transport?: TransportUse;
}

/** Options of a {@link import("./client.ts").KubeClient}. */
export interface KubeClientOptions {
  /** `User-Agent` header; default `csi-attacher/unknown`. */
  userAgent?: string;
  /**
   * Timeout of one non-watch request, counted from the last byte received (so a large answer
   * that keeps arriving is not cut short); default 30 s.
   */
  timeoutMs?: number;
  /**
   * The longest one try of a non-watch request may take, its body included, however steadily
   * bytes arrive: a body that streams without end is cut here; default 4 × `timeoutMs` (2 min).
   */
  deadlineMs?: number;
  /**
   * The largest answer to a non-watch request, in bytes; a larger one fails with a
   * `ConnectionError` whose cause is a `too-large` transport error; default 64 MiB
   * (`MAX_BODY_BYTES` in `./request/body.ts`, which says why).
   */
  maxBodyBytes?: number;
  /** Extra time a watch may run past its `timeoutSeconds` before it is cut; default 30 s. */
  watchGraceMs?: number;
  /**
   * The proxy variables of the process environment (`main.ts` reads them): unless the
   * kubeconfig names a `proxy-url`, requests go through the proxy they name for the server, by
   * Go's `ProxyFromEnvironment` rules (`./request/transport.ts`). Unset: no proxy.
   */
  proxyEnvironment?: ProxyEnvironment;
  /**
   * Ask for protobuf, JSON as the fallback, in the reads `./request/protobuf_answer.ts` names (as the Go
   * csi-attacher asks); false: JSON only. Answers are read by their `Content-Type`. @default true
   */
  protobuf?: boolean;
}
