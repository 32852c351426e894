/**
 * What {@link import("./client.ts").KubeClient} reports about its requests, and the rate limiter
 * it waits for: the shapes of its callbacks (`onRequest`, `onRetry`, `onRateLimiterWait`,
 * `onRequestLatency`), which the attacher turns into client-go's `rest_client_*` metrics.
 *
 * @module
 */

/** Something that paces requests (client-go's QPS/burst token bucket). */
export interface RequestRateLimiter {
  /** Resolves when a request may go; rejects with the signal's reason when it aborts. */
  take(signal?: AbortSignal): Promise<void>;
}

/** What `KubeClientDeps.onRequest` learns about each request. */
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

/** What `KubeClientDeps.onRetry` learns about each retry. */
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
  /** 1 for the first retry, up to `MAX_RETRIES` (`./retry.ts`). */
  attempt: number;
  /** The wait before the retry, in milliseconds. */
  delayMs: number;
}

/** What `KubeClientDeps.onRateLimiterWait` and `onRequestLatency` learn. */
export interface LatencyInfo {
  /** HTTP method (client-go's `verb` label). */
  method: string;
  /** `host:port` of the API server. */
  host: string;
  /** The duration, in seconds. */
  seconds: number;
}
