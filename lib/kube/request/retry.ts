/**
 * When a request is sent again, as client-go's `rest.Request` decides it (`rest/with_retry.go`
 * `IsNextRetry` and `checkWait`, `rest/request.go` `maxRetries`): a `429` or any `5xx` answer
 * with a `Retry-After` of whole seconds, for every method (our bodies are strings, so always
 * replayable); a GET whose connection broke, after 1 s. Nothing else.
 *
 * @module
 */

import { isBrokenConnection } from "./connection_errors.ts";

/**
 * Retries of one request after a retryable answer, as client-go's `rest.Request` (`maxRetries`
 * 10 in `rest/request.go`, counted in `rest/with_retry.go` `IsNextRetry`): up to 11 tries.
 */
export const MAX_RETRIES = 10;

/**
 * The longest wait a `Retry-After` header can impose on one retry. client-go waits whatever the
 * server says; a capped wait keeps one answer from parking a worker for minutes (the retry still
 * ends at the caller's signal or after {@link MAX_RETRIES}).
 */
export const MAX_RETRY_AFTER_MS = 30_000;

/**
 * The wait client-go makes up for a broken connection of a GET (`retryAfterResponse()` in
 * `rest/with_retry.go`: an artificial `Retry-After: 1`).
 */
export const CONNECTION_RETRY_MS = 1_000;

/** An answer read whole: what the retry policy and the caller look at. */
export interface Answer {
  /** HTTP status code. */
  status: number;
  /** The body as text ("" when it is protobuf). */
  text: string;
  /** The body, when it is Kubernetes protobuf (`./protobuf_answer.ts`). */
  bytes?: Uint8Array;
  /** The `Retry-After` header, if any. */
  retryAfter?: string;
  /** The `X-Kubernetes-PF-FlowSchema-UID` header of a throttled answer, if any. */
  flowSchemaUid?: string;
}

/**
 * The `Retry-After` of an answer in milliseconds (capped at {@link MAX_RETRY_AFTER_MS}), or
 * undefined when the header is missing or not a number of seconds (client-go's
 * `retryAfterSeconds` reads it with `strconv.Atoi`; an HTTP date is not understood either).
 */
export function retryAfterMs(header: string | undefined): number | undefined {
  if (header === undefined || !/^\s*[+-]?[0-9]+\s*$/.test(header)) return undefined;
  const seconds = Number(header.trim());
  if (!Number.isSafeInteger(seconds)) return undefined;
  return Math.min(Math.max(0, seconds) * 1000, MAX_RETRY_AFTER_MS);
}

/**
 * The wait before retrying a try of `method` that ended with `answer` or `failure`, or undefined
 * when it is not retried.
 */
export function retryDelayMs(
  method: string,
  answer: Answer | undefined,
  failure: unknown,
): number | undefined {
  if (answer === undefined) {
    return method === "GET" && isBrokenConnection(failure) ? CONNECTION_RETRY_MS : undefined;
  }
  if (answer.status !== 429 && answer.status < 500) return undefined;
  return retryAfterMs(answer.retryAfter);
}
