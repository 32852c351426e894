/**
 * The public shapes of an `Http2Session`: its options, a request's options, a request in
 * flight and its complete response.
 *
 * @module
 */

import type { Clock } from "../../clock.ts";
import type { LeaseFence } from "../../lease_fence.ts";
import type { HeaderField } from "./hpack.ts";
import type { DataSizeHint } from "./receive_buffer.ts";

/** Options of `Http2Session`. */
export interface Http2SessionOptions {
  /** Our SETTINGS_INITIAL_WINDOW_SIZE: how much each response may send ahead. Default 4 MiB. */
  initialWindowSize?: number;
  /** Our connection-level receive window. Default 16 MiB. */
  connectionWindowSize?: number;
  /** How long to wait for the server's SETTINGS. Default 20 s. */
  handshakeTimeoutMs?: number;
  /** Runs the handshake timeout; the runtime clock by default. */
  clock?: Clock;
}

/** A complete response: headers, the DATA bytes, and the trailers (absent: trailers-only). */
export interface StreamResponse {
  headers: HeaderField[];
  data: Uint8Array;
  /** Undefined when the response ended with its headers or with a DATA frame. */
  trailers: HeaderField[] | undefined;
  /** True when the headers carried END_STREAM (a trailers-only response). */
  headersOnly: boolean;
}

/** A request in flight. */
export interface ClientStream {
  /**
   * Settles once: the whole response, a {@link StreamError}, or a {@link import("../../lease_fence.ts").FencedError} when the
   * request's fence refused it.
   */
  readonly response: Promise<StreamResponse>;
  /** Resets the stream with CANCEL (or drops it when not yet sent). Idempotent. */
  cancel(): void;
}

/** Per-request options of `Http2Session.request`. */
export interface RequestOptions {
  /**
   * Asked synchronously immediately before each write of the request's frames; when it says no
   * the stream fails with {@link import("../../lease_fence.ts").FencedError}. Requests that need no lease carry none.
   */
  fence?: LeaseFence;
  /** Reads the response's whole length from its first octets. */
  sizeHint?: DataSizeHint;
}
