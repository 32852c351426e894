/**
 * Why a request on an HTTP/2 connection failed: the stream's {@link StreamFailure}, carried by a
 * {@link StreamError}, which the gRPC channel turns into a status (`lib/wire/grpc/response.ts`).
 *
 * @module
 */

/** Why a stream failed. */
export type StreamFailure =
  /** The peer reset it (RST_STREAM); `code` is the HTTP/2 error code. */
  | { kind: "reset"; code: number; message: string }
  /** The peer broke the protocol on this stream; we reset it with `code` (§5.4.2). */
  | { kind: "protocol"; code: number; message: string }
  /** The response's header list exceeded our SETTINGS_MAX_HEADER_LIST_SIZE. */
  | { kind: "headers-too-large"; limit: number }
  /** GOAWAY left it unprocessed, or the connection could not take it: safe to retry. */
  | { kind: "refused"; message: string }
  /** The connection ended (closed, read or write error, protocol error). */
  | { kind: "connection"; message: string }
  /** More DATA arrived than the caller accepts. */
  | { kind: "too-large"; size: number }
  /** The caller cancelled it. */
  | { kind: "cancelled" };

/** A failed stream; {@link failure} says why. */
export class StreamError extends Error {
  constructor(readonly failure: StreamFailure) {
    super(failureText(failure));
    this.name = "StreamError";
  }
}

function failureText(f: StreamFailure): string {
  switch (f.kind) {
    case "reset":
    case "protocol":
    case "refused":
    case "connection":
      return f.message;
    case "headers-too-large":
      return `response header list larger than ${f.limit} octets`;
    case "too-large":
      return `response data of at least ${f.size} bytes exceeds the limit`;
    case "cancelled":
      return "stream cancelled";
  }
}
