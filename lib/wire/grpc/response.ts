/**
 * The outcome of a unary call from the response the HTTP/2 stream gave, or from the stream's
 * failure: the message, or a {@link GrpcStatusError} worded as grpc-go words it (grpc-go
 * `internal/transport/http2_client.go` operateHeaders, `rpc_util.go` recvMsg).
 *
 * Limits: a response message of at most {@link MAX_RECEIVE_MESSAGE_BYTES} (4 MiB, grpc-go's
 * `defaultClientMaxReceiveMessageSize`): a larger one is ResourceExhausted.
 *
 * @module
 */

import { errorText } from "../../errors.ts";
import { GrpcCode, GrpcStatusError } from "./status.ts";
import { StreamError } from "../http2/stream_error.ts";
import { ErrorCode } from "../http2/frames.ts";
import type { HeaderField } from "../http2/hpack.ts";

/** The largest response message accepted (grpc-go's default receive limit, 4 MiB). */
export const MAX_RECEIVE_MESSAGE_BYTES = 4 * 1024 * 1024;
/** HTTP status → gRPC code (grpc `doc/http-grpc-status-mapping.md`). */
function httpStatusToCode(status: number): number {
  switch (status) {
    case 400:
      return GrpcCode.Internal;
    case 401:
      return GrpcCode.Unauthenticated;
    case 403:
      return GrpcCode.PermissionDenied;
    case 404:
      return GrpcCode.Unimplemented;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcCode.Unavailable;
    default:
      return GrpcCode.Unknown;
  }
}

const HTTP_STATUS_TEXT: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

function header(fields: readonly HeaderField[] | undefined, name: string): string | undefined {
  return fields?.find(([n]) => n === name)?.[1];
}

/**
 * Decodes `grpc-message` (PROTOCOL-HTTP2.md: percent-encoded UTF-8). A `%` not followed by two
 * hex digits is kept as it is, as grpc-go does.
 */
export function decodeGrpcMessage(value: string): string {
  if (!value.includes("%")) return utf8(value);
  let bytes = "";
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    const hex = value.slice(i + 1, i + 3);
    if (c === "%" && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes += String.fromCharCode(parseInt(hex, 16));
      i += 2;
    } else {
      bytes += c;
    }
  }
  return utf8(bytes);
}

/** A binary string (one char per octet) read as UTF-8. */
function utf8(binary: string): string {
  if (!/[\x80-\xff]/.test(binary)) return binary;
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return new TextDecoder().decode(bytes);
}

/**
 * The outcome of a complete response: the message bytes, or the status as {@link GrpcStatusError}
 * (grpc-go `http2_client.go` operateHeaders and `rpc_util.go` recvMsg for the texts).
 */
export function parseResponse(
  res: {
    headers: readonly HeaderField[];
    data: Uint8Array;
    trailers: readonly HeaderField[] | undefined;
    headersOnly: boolean;
  },
): Uint8Array | GrpcStatusError {
  const statusText = header(res.headers, ":status");
  if (statusText === undefined) {
    return new GrpcStatusError(GrpcCode.Internal, "malformed header: missing HTTP status");
  }
  const httpStatus = Number(statusText);
  const contentType = header(res.headers, "content-type");
  const isGrpc = contentType !== undefined && /^application\/grpc(?:$|[+;])/.test(contentType);
  if (httpStatus !== 200 || !isGrpc) {
    const errs: string[] = [];
    if (httpStatus !== 200) {
      const text = HTTP_STATUS_TEXT[httpStatus] ?? "";
      errs.push(`unexpected HTTP status code received from server: ${httpStatus} (${text})`);
    }
    if (contentType === undefined) errs.push("malformed header: missing HTTP content-type");
    else if (!isGrpc) {
      errs.push(`transport: received unexpected content-type ${JSON.stringify(contentType)}`);
    }
    return new GrpcStatusError(httpStatusToCode(httpStatus), errs.join("; "));
  }
  // The status comes in the trailers, or in the headers of a trailers-only response.
  let fields: readonly HeaderField[];
  if (res.trailers !== undefined) fields = res.trailers;
  else if (res.headersOnly) fields = res.headers;
  else {return new GrpcStatusError(
      GrpcCode.Internal,
      "server closed the stream without sending trailers",
    );}
  const rawCode = header(fields, "grpc-status");
  let code: number = GrpcCode.Unknown;
  if (rawCode !== undefined) {
    if (!/^\d+$/.test(rawCode)) {
      return new GrpcStatusError(GrpcCode.Internal, `transport: malformed grpc-status: ${rawCode}`);
    }
    code = Number(rawCode);
  }
  const message = decodeGrpcMessage(header(fields, "grpc-message") ?? "");
  if (code !== GrpcCode.OK) return new GrpcStatusError(code, message);
  return unframeMessage(res.data);
}

/** The one message of a unary response, or the error grpc-go reports. */
function unframeMessage(data: Uint8Array): Uint8Array | GrpcStatusError {
  if (data.length === 0) {
    return new GrpcStatusError(
      GrpcCode.Internal,
      "cardinality violation: expected <{}> but got <EOF>",
    );
  }
  if (data.length < 5) return new GrpcStatusError(GrpcCode.Internal, "unexpected EOF");
  const flag = data[0]!;
  const length = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(1);
  if (flag !== 0) {
    return new GrpcStatusError(
      GrpcCode.Internal,
      "grpc: compressed flag set with identity or empty encoding",
    );
  }
  if (length > MAX_RECEIVE_MESSAGE_BYTES) {
    return new GrpcStatusError(
      GrpcCode.ResourceExhausted,
      `grpc: received message larger than max (${length} vs. ${MAX_RECEIVE_MESSAGE_BYTES})`,
    );
  }
  if (data.length < 5 + length) return new GrpcStatusError(GrpcCode.Internal, "unexpected EOF");
  if (data.length > 5 + length) {
    return new GrpcStatusError(
      GrpcCode.Internal,
      "cardinality violation: expected <EOF> for non server-streaming RPCs, but received another message",
    );
  }
  return data.subarray(5, 5 + length);
}

/** HTTP/2 error code of RST_STREAM → gRPC code (grpc-go `http_util.go` http2ErrConvTab). */
function resetCode(h2code: number): number {
  switch (h2code) {
    case ErrorCode.FLOW_CONTROL_ERROR:
    case ErrorCode.ENHANCE_YOUR_CALM:
      return GrpcCode.ResourceExhausted;
    case ErrorCode.REFUSED_STREAM:
      return GrpcCode.Unavailable;
    case ErrorCode.CANCEL:
      return GrpcCode.Canceled;
    case ErrorCode.INADEQUATE_SECURITY:
      return GrpcCode.PermissionDenied;
    default:
      return GrpcCode.Internal;
  }
}

/** A failed stream as the call's status (grpc-go `http2_client.go` closeStream callers). */
export function streamErrorToStatus(err: unknown): GrpcStatusError {
  if (err instanceof GrpcStatusError) return err;
  if (!(err instanceof StreamError)) {
    return new GrpcStatusError(GrpcCode.Unavailable, errorText(err));
  }
  const f = err.failure;
  switch (f.kind) {
    case "reset":
      return new GrpcStatusError(resetCode(f.code), f.message);
    case "protocol":
      // grpc-go closes a stream the server broke with Internal and the error's text.
      return new GrpcStatusError(GrpcCode.Internal, f.message);
    case "headers-too-large":
      return new GrpcStatusError(GrpcCode.Internal, "peer header list size exceeded limit");
    case "refused":
    case "connection":
      return new GrpcStatusError(GrpcCode.Unavailable, f.message);
    case "too-large":
      return new GrpcStatusError(
        GrpcCode.ResourceExhausted,
        `grpc: received message larger than max (${f.size - 5} vs. ${MAX_RECEIVE_MESSAGE_BYTES})`,
      );
    case "cancelled":
      return new GrpcStatusError(GrpcCode.Canceled, "context canceled");
  }
}
