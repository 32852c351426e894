/**
 * What an `Http2Session` keeps per request stream, and the requests waiting for a stream slot.
 *
 * A stream's response is either collected whole (`data`, a {@link ReceiveBuffer}, for unary
 * gRPC) or handed to its reader as it arrives (`streaming`, a {@link StreamBody}, for HTTP
 * bodies of any length: lists and watches), its window then given back as the reader consumes.
 *
 * @module
 */

import type { HeaderField } from "./hpack.ts";
import type { WriteFence } from "./writer.ts";
import type { StreamError } from "./stream_error.ts";
import type { FencedError } from "../../lease_fence.ts";
import type { StreamResponse } from "./session_types.ts";
import type { ReceiveBuffer } from "./receive_buffer.ts";
import type { StreamBody } from "./stream_body.ts";

/** One request stream. */
export interface StreamState {
  id: number;
  sendWindow: number;
  recvWindow: number;
  recvUnacked: number;
  headers: HeaderField[] | undefined;
  /** The response DATA collected whole; unused when {@link streaming}. */
  data: ReceiveBuffer;
  /** The response DATA as it arrives, when the request asked for a streamed body. */
  streaming?: StreamBody;
  /** Called with the response headers (1xx skipped) when they arrive without END_STREAM. */
  onHead?: (fields: HeaderField[]) => void;
  maxDataBytes: number;
  body: Uint8Array;
  bodyOffset: number;
  bodySent: boolean;
  /** Checked right before each write of the request's frames; see `Http2Session.request`. */
  fence?: WriteFence;
  resolve: (r: StreamResponse) => void;
  reject: (e: StreamError | FencedError) => void;
}

/** A request waiting for the peer's SETTINGS_MAX_CONCURRENT_STREAMS to leave it a slot. */
export interface PendingOpen {
  headers: readonly HeaderField[];
  body: Uint8Array;
  state: StreamState;
}
