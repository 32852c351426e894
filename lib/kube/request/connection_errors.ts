/**
 * Requests that got no answer, as {@link ApiError}s with code 0: reason `ConnectionError` for a
 * failed connection (the transport's `TransportError` is the cause), and the one question
 * the retry policy asks of them, {@link isBrokenConnection}. Failures are told apart by the
 * transport's error kind, never by their wording: the transports map their runtime's errors to
 * kinds at their own boundary.
 *
 * @module
 */

import { ApiError } from "../api.ts";
import { errorText } from "../../errors.ts";
import { isTransportError } from "../../wire/http1/errors.ts";
import { type RequestContext, requestFailure } from "./request.ts";

/**
 * True when a request failed because the connection broke: reset by the peer, closed before the
 * answer (EOF), or a broken pipe (client-go's `net.IsConnectionReset` / `net.IsProbableEOF`,
 * k8s.io/apimachinery/pkg/util/net/http.go): an `ApiError` of reason `ConnectionError` whose cause
 * is a `TransportError` of kind `reset` or `eof`. A timeout is not: the request may still be
 * running on the server; nor is a refused connection or a failed TLS handshake.
 */
export function isBrokenConnection(err: unknown): boolean {
  if (!(err instanceof ApiError) || err.reason !== "ConnectionError") return false;
  return isTransportError(err.cause, "reset", "eof");
}

/**
 * `err` of a request that got no answer as an {@link ApiError}: an ApiError stays as it is;
 * anything else (a `TransportError`) becomes `ConnectionError` with it as the cause and the
 * message `<Op> "<url>": <what the transport said>`.
 */
export function connectionError(
  ctx: Pick<RequestContext, "method" | "url">,
  err: unknown,
): ApiError {
  if (err instanceof ApiError) return err;
  return new ApiError(0, "ConnectionError", requestFailure(ctx, errorText(err)), { cause: err });
}

/** The error of a request made, or under way, when the client is closed. */
export function clientClosedError(): ApiError {
  return new ApiError(0, "ConnectionError", "the Kubernetes client is closed");
}
