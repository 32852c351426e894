/**
 * The contract of a transport: what a client hands it (a request, the TLS material of the
 * server) and what it gets back (status, header fields, a body). {@link Http1Transport}
 * (`./transport.ts`) implements it, for every connection of the Kubernetes client. Failures are
 * {@link TransportError}s, told apart by kind.
 *
 * @module
 */

import type { LeaseFence } from "../../lease_fence.ts";

export type { TransportError, TransportErrorKind } from "./errors.ts";

/** TLS settings of a server; `ca`, `cert` and `key` are PEM. */
export interface TlsMaterial {
  /** Certificates the server's chain is checked against (added to the runtime's roots). */
  ca?: Uint8Array;
  /** Client certificate chain. */
  cert?: Uint8Array;
  /** Key of the client certificate. */
  key?: Uint8Array;
  /** `insecure-skip-tls-verify`: the server certificate is not checked. */
  insecureSkipTlsVerify: boolean;
  /** `tls-server-name`: the name the server certificate is checked against. */
  serverName?: string;
}

/** The part of an answer a client reads; `fetch`'s `Response` has this shape. */
export interface TransportResponse {
  /** The status code of the final answer (1xx answers are skipped). */
  readonly status: number;
  /** Header fields, read as `fetch`'s `Headers.get` reads them. */
  readonly headers: { get(name: string): string | null };
  /**
   * The body as a stream. A read errors with the request signal's reason when it aborts, and
   * with a {@link TransportError} when the connection fails or the answer breaks a limit.
   */
  readonly body: ReadableStream<Uint8Array> | null;
  /** The whole body as UTF-8 in one read, when the transport has a faster way than `body`. */
  text?(): Promise<string>;
  /** The whole body's bytes in one read, when the transport has a faster way than `body`. */
  bytes?(): Promise<Uint8Array>;
  /**
   * The body piece by piece without a stream, when the transport has a faster way than `body`
   * (a watch reads one piece per event). Reads fail as those of `body` do.
   */
  chunks?(): BodyChunks;
}

/** The pieces of a body, read in order; see {@link TransportResponse.chunks}. */
export interface BodyChunks {
  /**
   * The next data (at least one non-empty view), or null at the end of the body. One read at a
   * time.
   */
  next(): Promise<Uint8Array[] | null>;
  /** Stops reading: the connection is closed and a pending read ends. */
  cancel(): void;
}

/**
 * The parts of a request URL a transport reads. A `URL` has them; a client that sends many
 * requests to one server can build them as strings instead of parsing a URL per request.
 */
export interface RequestUrl {
  /** The whole URL, as `URL.href`. */
  readonly href: string;
  /** `http:` or `https:`. */
  readonly protocol: string;
  /** Host and, when not the scheme's default, `:port`. */
  readonly host: string;
  /** Host name; an IPv6 address in brackets. */
  readonly hostname: string;
  /** The port, "" for the scheme's default. */
  readonly port: string;
  /** The path, percent-encoded, starting with `/`. */
  readonly pathname: string;
  /** `?` and the query, or "". */
  readonly search: string;
}

/** One request. */
export interface TransportRequest {
  /** HTTP method, e.g. `GET`. */
  method: string;
  /** Header lines in order; a name may repeat and is then sent as separate lines. */
  headers: [string, string][];
  /** The body, sent as UTF-8 with its `Content-Length`. */
  body?: string;
  /** Aborts the request, or the reading of its body, with the signal's reason. */
  signal: AbortSignal;
  /**
   * The largest body the caller accepts, in bytes. A transport that can tell fails the body
   * (`body` or `text()`) with a `too-large` {@link TransportError} once it passes this size,
   * without keeping more of it; unset: no limit (a watch, whose caller bounds each line).
   */
  maxBodyBytes?: number;
  /**
   * Asked synchronously immediately before each write of the request's bytes to a connection
   * (nothing asynchronous runs between the answer and the write call), on every connection the
   * request is tried on. When it says no, the request fails with
   * {@link import("../../lease_fence.ts").FencedError}, is not retried, and its connection is
   * closed: either nothing of the request was written, or the server gets it cut short and never
   * runs it. The leader's lease fence, on writes that need the lease.
   */
  fence?: LeaseFence;
}

/** Sends requests over pooled connections. */
export interface Transport {
  /**
   * Counts {@link Transport.renew}s: read it before a request and pass it to `renew` when that
   * request found its connection silent.
   */
  readonly generation: number;
  /** Resolves with the status and headers; rejects with the signal's reason when it aborts. */
  send(url: RequestUrl, request: TransportRequest): Promise<TransportResponse>;
  /**
   * The connections of `generation` are suspect (a request on one of them got no answer): later
   * requests go out on new connections. Requests under way keep theirs until they end. Nothing
   * happens when the connections were renewed since `generation`.
   */
  renew(generation: number): void;
  /**
   * Closes the idle connections; later requests fail with a `closed` {@link TransportError}.
   * Requests under way end through their signals.
   */
  close(): void;
}
