/**
 * The limits and default windows of an `Http2Session` (`./session.ts`), with the values of the
 * reference implementations they follow (grpc-go `internal/transport`, Go `net/http`
 * h2_bundle.go).
 *
 * @module
 */

import {
  ConnectionError,
  DEFAULT_MAX_FRAME_SIZE,
  ErrorCode,
  MAX_WINDOW,
  Setting,
} from "./frames.ts";

/** Our SETTINGS_INITIAL_WINDOW_SIZE by default (Go's Transport: 4 MiB). */
export const DEFAULT_STREAM_WINDOW = 4 * 1024 * 1024;
export const DEFAULT_CONNECTION_WINDOW = 16 * 1024 * 1024;
/** RFC 9113 §6.9.2: the initial window of every connection and stream. */
export const PROTOCOL_INITIAL_WINDOW = 65_535;
/**
 * Our SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2), announced and enforced: 1 MiB. grpc-go's
 * client takes 16 MiB (`defaultClientMaxHeaderListSize`), Go's Transport 10 MiB; a CSI driver's
 * headers and trailers are a few hundred octets and its longest `grpc-message` a few KiB, so
 * 1 MiB refuses no real answer while bounding what one stream's headers can cost.
 */
export const MAX_HEADER_LIST_SIZE = 1024 * 1024;
/**
 * A header block may take this many octets over HEADERS and CONTINUATION frames: twice the
 * header list size, the point where Go's `Framer.readMetaFrame` gives up on a block.
 */
export const MAX_HEADER_BLOCK = 2 * MAX_HEADER_LIST_SIZE;
/**
 * CONTINUATION frames one header block may take: enough for the largest block sent in frames of
 * the default size (2 MiB / 16 KiB = 128). Counting frames, not only octets, bounds a flood of
 * empty CONTINUATION frames (CVE-2024-27316 class; nghttp2 allows 8 by default,
 * `NGHTTP2_DEFAULT_MAX_CONTINUATIONS`).
 */
export const MAX_CONTINUATION_FRAMES = MAX_HEADER_BLOCK / DEFAULT_MAX_FRAME_SIZE;
/**
 * Frames we owe the peer (SETTINGS and PING ACKs, RST_STREAM) that may wait unsent before the
 * reader stops reading until the writer catches up: grpc-go's `maxQueuedTransportResponseFrames`,
 * 50 (v1.72; later releases make it configurable, default 100).
 */
export const MAX_PENDING_RESPONSES = 50;

/**
 * Checks a value of the peer's SETTINGS (RFC 9113 §6.5.2): a window above 2^31-1 is
 * FLOW_CONTROL_ERROR, a frame size outside 2^14..2^24-1 and ENABLE_PUSH above 1 PROTOCOL_ERROR.
 *
 * @throws {ConnectionError} for a value out of its range.
 */
export function checkSetting(id: number, value: number): void {
  if (id === Setting.INITIAL_WINDOW_SIZE && value > MAX_WINDOW) {
    throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "initial window too large");
  }
  if (id === Setting.MAX_FRAME_SIZE && (value < DEFAULT_MAX_FRAME_SIZE || value > 16_777_215)) {
    throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `invalid max frame size ${value}`);
  }
  if (id === Setting.ENABLE_PUSH && value > 1) {
    throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "invalid ENABLE_PUSH");
  }
}
