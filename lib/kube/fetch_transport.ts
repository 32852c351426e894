/**
 * The `fetch` transport, used when a proxy environment variable applies to the API server's
 * scheme (`./transport.ts`): `fetch` honours `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` as
 * client-go's `http.ProxyFromEnvironment` does, which the HTTP/1.1 transport does not speak.
 *
 * Its failures are mapped once, here, to the kinds of the HTTP/1.1 transport's
 * {@link TransportError}: `fetch` gives a `TypeError` whose message (hyper's) is the only record
 * of what happened, so this is the one place that reads error wording.
 *
 * @module
 */

import type {
  RequestUrl,
  TlsMaterial,
  Transport,
  TransportRequest,
  TransportResponse,
} from "./transport.ts";
import { TransportError, type TransportErrorKind } from "../wire/http1/errors.ts";
import { errorText } from "../errors.ts";

/** hyper's words for a connection that broke under way (reset, closed, HTTP/2 GOAWAY). */
const RESET_WORDS =
  /connection reset|broken pipe|connection error received|GOAWAY|refused stream|use of closed network connection/i;
/** hyper's words for a connection closed before the answer or in the middle of its body. */
const EOF_WORDS =
  /unexpected eof|\bEOF\b|connection closed before message completed|error reading a body from connection/i;
/** hyper's and rustls' words for a failed TLS handshake. */
const TLS_WORDS = /certificate|tls|handshake|peer sent no certificates|alert/i;
/** hyper's words for a connection that was never made. */
const CONNECT_WORDS =
  /\(Connect\)|tcp connect error|connection refused|dns error|failed to lookup|network is unreachable|no route to host/i;

/**
 * A `fetch` failure as a {@link TransportError}: the message of `fetch failed`'s cause (or of the
 * error itself) without the repeated request URL, and the kind its words name. A failure that
 * names no known case is `protocol`: it is not a broken connection a GET may be retried after.
 */
export function fetchTransportError(err: unknown): TransportError {
  if (err instanceof TransportError) return err;
  let message = errorText(err);
  if (err instanceof TypeError && err.message === "fetch failed" && err.cause instanceof Error) {
    message = err.cause.message;
  }
  message = message.replace(
    /^error sending request (?:for url \([^)]*\)|from \S+ for \S+ \([^)]*\)): /,
    "",
  );
  let kind: TransportErrorKind = "protocol";
  if (EOF_WORDS.test(message)) kind = "eof";
  else if (RESET_WORDS.test(message)) kind = "reset";
  else if (TLS_WORDS.test(message)) kind = "tls";
  else if (CONNECT_WORDS.test(message)) kind = "connect";
  return new TransportError(kind, message, { cause: err });
}

/**
 * `fetch` over one `Deno.HttpClient` at a time (HTTP/1.1 keep-alive, or HTTP/2 when a TLS server
 * offers it by ALPN, as client-go uses it). {@link FetchTransport.renew} closes the client and
 * the next request builds a new one: a pooled or multiplexed connection that went silent is then
 * never used again (aborting a request does not close its connection). client-go gets the same
 * from its HTTP/2 health check (`ReadIdleTimeout` in golang.org/x/net/http2, set by
 * k8s.io/client-go/transport), which closes a connection that stays silent.
 *
 * Closing a `Deno.HttpClient` closes its idle connections; requests under way keep theirs until
 * they end. Failures, of the request and of its body, reject with a {@link TransportError}
 * (see {@link fetchTransportError}); an abort with the signal's reason.
 *
 * `caCerts` are added to the runtime's default root certificates, not used alone as client-go
 * uses them: see ARCHITECTURE.md, "The Kubernetes client".
 */
export class FetchTransport implements Transport {
  readonly #options: Deno.CreateHttpClientOptions & Partial<Deno.TlsCertifiedKeyPem>;
  #client: Deno.HttpClient | undefined;
  #generation = 0;
  #closed = false;

  /** @throws {TypeError} when only one of the client certificate and key is set. */
  constructor(tls: TlsMaterial) {
    if ((tls.cert === undefined) !== (tls.key === undefined)) {
      throw new TypeError("a client certificate needs both the certificate and its key");
    }
    const decoder = new TextDecoder();
    this.#options = {
      ...(tls.ca !== undefined && { caCerts: [decoder.decode(tls.ca)] }),
      ...(tls.cert !== undefined && tls.key !== undefined &&
        { cert: decoder.decode(tls.cert), key: decoder.decode(tls.key) }),
    };
  }

  get generation(): number {
    return this.#generation;
  }

  async send(url: RequestUrl, request: TransportRequest): Promise<TransportResponse> {
    const { signal } = request;
    if (this.#closed) throw new TransportError("closed", "the transport is closed");
    let client = this.#client;
    if (client === undefined) {
      try {
        client = Deno.createHttpClient(this.#options);
      } catch (err) {
        throw new TransportError("tls", errorText(err), { cause: err });
      }
      this.#client = client;
    }
    let response: Response;
    try {
      // The client is handed to fetch synchronously: a renew() later does not affect this request.
      response = await fetch(url.href, {
        method: request.method,
        headers: request.headers,
        body: request.body,
        signal,
        client,
      });
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      throw fetchTransportError(err);
    }
    return {
      status: response.status,
      headers: response.headers,
      body: response.body === null ? null : mappedBody(response.body, signal),
    };
  }

  renew(generation: number): void {
    if (generation !== this.#generation) return;
    this.#generation++;
    this.#client?.close();
    this.#client = undefined;
  }

  close(): void {
    this.#closed = true;
    this.renew(this.#generation);
  }
}

/** `body` whose read errors are {@link TransportError}s (the signal's reason after an abort). */
function mappedBody(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await reader.read();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      } catch (err) {
        controller.error(signal.aborted ? signal.reason : fetchTransportError(err));
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}
