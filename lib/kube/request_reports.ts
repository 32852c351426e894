/**
 * What {@link import("./client.ts").KubeClient} reports about its requests, and the rate limiter
 * it waits for: the {@link KubeRequestObserver} the client is given and what it learns, which
 * the attacher's metrics (`../observe/metrics.ts`) count as client-go's `rest_client_*` metrics.
 *
 * @module
 */

/** Something that paces requests (client-go's QPS/burst token bucket). */
export interface RequestRateLimiter {
  /** Resolves when a request may go; rejects with the signal's reason when it aborts. */
  take(signal?: AbortSignal): Promise<void>;
}

/**
 * What a {@link import("./client.ts").KubeClient} tells about its requests: one interface for the
 * four reports client-go's REST client hands its metrics (`tools/metrics/metrics.go`:
 * `RequestResult`, `RequestRetry`, `RequestLatency`, `RateLimiterLatency`). The attacher's
 * metrics implement it. A method must not throw.
 */
export interface KubeRequestObserver {
  /**
   * One try of a request, when it ends (a watch: when its response headers arrive); a request
   * that is retried reports each try.
   */
  observeApiRequest(info: RequestInfo): void;
  /** Before each retry; the retry is also logged at `--v=4`. */
  observeApiRetry(info: RetryInfo): void;
  /**
   * One non-watch request when it ends, with its whole duration: waits for the rate limiter and
   * retries included (client-go's `rest_client_request_duration_seconds{verb,host}`).
   */
  observeApiRequestDuration(info: LatencyInfo): void;
  /**
   * Each wait for the rate limiter, however short (client-go's
   * `rest_client_rate_limiter_duration_seconds{verb,host}`); never for a client without one.
   */
  observeRateLimiterWait(info: LatencyInfo): void;
}

/** What {@link KubeRequestObserver.observeApiRequest} learns about each try of a request. */
export interface RequestInfo {
  /** HTTP method. */
  method: string;
  /** API verb: get, list, watch, create, update, patch, delete. */
  verb: string;
  /** Plural resource name. */
  resource: string;
  /** `status` or "". */
  subresource: string;
  /** `host:port` of the API server. */
  host: string;
  /** HTTP status code; 0 when no answer came. For a watch, the code of the response headers. */
  code: number;
  /** Duration until the answer (for a watch: until the response headers). */
  seconds: number;
}

/** What {@link KubeRequestObserver.observeApiRetry} learns about each retry. */
export interface RetryInfo {
  /** HTTP method of the request. */
  method: string;
  /** API verb: get, list, create, update, patch, delete. */
  verb: string;
  /** Plural resource name. */
  resource: string;
  /** `host:port` of the API server, as client-go's `host` label. */
  host: string;
  /** HTTP status code of the answer that is retried; 0 for a broken connection. */
  code: number;
  /** 1 for the first retry, up to `MAX_RETRIES` (`./request/retry.ts`). */
  attempt: number;
  /** The wait before the retry, in milliseconds. */
  delayMs: number;
}

/** What {@link KubeRequestObserver}'s two durations learn. */
export interface LatencyInfo {
  /** HTTP method (client-go's `verb` label). */
  method: string;
  /** `host:port` of the API server. */
  host: string;
  /** The duration, in seconds. */
  seconds: number;
}
