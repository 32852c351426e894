/**
 * The one error type of the HTTP/1.1 transport. Callers tell failures apart by
 * {@link TransportError.kind}, never by message text: the kind says what happened to the
 * connection, the message (and `cause`, the runtime's own error) says it in words for logs.
 *
 * A request whose signal aborts rejects with the signal's reason, not with a TransportError:
 * timeouts and cancellation belong to the caller, who chose the reason.
 *
 * The kinds follow the cases Go's `net/http` and `k8s.io/apimachinery/pkg/util/net/http.go`
 * distinguish (`IsConnectionRefused`, `IsConnectionReset`, `IsProbableEOF`, `tls.RecordHeaderError`
 * and `x509` errors, `badStringError` for a malformed response).
 *
 * @module
 */

/**
 * What went wrong:
 * - `connect`: no connection was made (refused, unreachable, name not resolved); nothing was sent;
 * - `tls`: the TLS handshake failed (certificate not trusted, wrong name, no common protocol);
 *   nothing was sent;
 * - `reset`: the connection broke while the request or answer was under way (reset by the peer,
 *   broken pipe, an I/O error);
 * - `eof`: the server closed the connection before the answer, or before the end of its body;
 * - `proxy`: the proxy did not open a tunnel to the server: it refused `CONNECT` (an answer other
 *   than 200), its answer was not HTTP/1.x, it closed the connection before answering, or the
 *   proxy URL cannot be used (a scheme other than `http:`); nothing was sent to the server;
 * - `protocol`: the answer is not HTTP/1.1 as RFC 9112 defines it (status line, field lines,
 *   framing, chunk sizes, an unexpected 101);
 * - `too-large`: the answer passed one of the transport's size limits (head, body);
 * - `closed`: the transport was closed; nothing was sent.
 *
 * `reset` and `eof` are the broken connections a GET may be retried after (client-go's
 * `net.IsConnectionReset` and `net.IsProbableEOF`).
 */
export type TransportErrorKind =
  | "connect"
  | "tls"
  | "proxy"
  | "reset"
  | "eof"
  | "protocol"
  | "too-large"
  | "closed";

/** A failed exchange with the server; see {@link TransportErrorKind}. */
export class TransportError extends Error {
  /** What went wrong. */
  readonly kind: TransportErrorKind;

  /**
   * Makes the error; `message` says what happened in words (no secret: the transport never puts
   * header values or bodies into it), `cause` is the runtime's error when there is one.
   */
  constructor(kind: TransportErrorKind, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "TransportError";
    this.kind = kind;
  }
}

/** True for a {@link TransportError} of one of `kinds`. */
export function isTransportError(
  err: unknown,
  ...kinds: TransportErrorKind[]
): err is TransportError {
  return err instanceof TransportError && (kinds.length === 0 || kinds.includes(err.kind));
}
