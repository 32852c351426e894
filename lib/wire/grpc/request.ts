/**
 * The client side of a unary call on the wire (gRPC over HTTP/2,
 * https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md "Requests"): the request
 * headers and the length-prefixed message.
 *
 * @module
 */

import type { HeaderField } from "../http2/hpack.ts";

/** The request headers of a call (PROTOCOL-HTTP2.md "Requests"). */
export function requestHeaders(path: string, authority: string, timeoutMs: number): HeaderField[] {
  return [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", path],
    [":authority", authority],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
    ["grpc-timeout", grpcTimeout(timeoutMs)],
  ];
}

/** `grpc-timeout`: at most 8 digits, in milliseconds or, when longer, seconds. */
export function grpcTimeout(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 100_000_000) return `${whole}m`;
  const seconds = Math.ceil(whole / 1000);
  if (seconds < 100_000_000) return `${seconds}S`;
  return `${Math.min(99_999_999, Math.ceil(seconds / 3600))}H`;
}

/** A message with the gRPC length prefix (uncompressed). */
export function frameMessage(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  new DataView(out.buffer).setUint32(1, message.length);
  out.set(message, 5);
  return out;
}
