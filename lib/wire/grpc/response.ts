/**
 * The outcome of a unary call from the response the HTTP/2 stream gave, or from the stream's
 * failure: the message, or a {@link GrpcStatusError} worded as grpc-go words it (grpc-go
 * `internal/transport/http2_client.go` operateHeaders, `rpc_util.go` recvMsg).
 *
 * Limits: a response message of at most {@link MAX_RECEIVE_MESSAGE_BYTES} (4 MiB, grpc-go's
 * `defaultClientMaxReceiveMessageSize`): a larger one is ResourceExhausted; a `grpc-status` that
 * is not an int32 (grpc-go `strconv.ParseInt(v, 10, 32)`) is Internal.
 *
 * The server's text is quoted safe (`lib/peer_text.ts`): a `grpc-message` with its control
 * characters escaped and at most 4096 characters, a header value quoted in an error at most
 * 256. grpc-go passes both on as they came.
 *
 * @module
 */

import { errorText } from "../../errors.ts";
import { peerText } from "../../peer_text.ts";
import { GrpcCode, GrpcStatusError } from "./status.ts";
import { StreamError } from "../http2/stream_error.ts";
import { ErrorCode } from "../http2/frames.ts";
import type { HeaderField } from "../http2/hpack.ts";
import type { DataSizeHint } from "../http2/receive_buffer.ts";

/**
 * The most characters of a header value (`content-type`, `grpc-status`, `:status`,
 * `grpc-encoding`) an error quotes; a `grpc-message` is kept up to `PEER_TEXT_MAX` (4096,
 * `lib/peer_text.ts`), its control characters escaped.
 */
const QUOTED_VALUE_MAX = 256;

/** The largest response message accepted (grpc-go's default receive limit, 4 MiB). */
export const MAX_RECEIVE_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * A unary response's DATA length from its message prefix (a flag octet, then the message length
 * as 4 octets big-endian; PROTOCOL-HTTP2.md "Length-Prefixed-Message"): the HTTP/2 stream
 * buffers the answer in one array of that size (capped by its limit), as grpc-go's `recvMsg`
 * allocates the message from the prefix (`rpc_util.go`).
 */
export const GRPC_MESSAGE_SIZE: DataSizeHint = {
  prefixLength: 5,
  total: (prefix) => 5 + new DataView(prefix.buffer, prefix.byteOffset, 5).getUint32(1),
};
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

/** Go's `http.StatusText` (Go `net/http/status.go`): "" for a code it does not name. */
const HTTP_STATUS_TEXT: Readonly<Record<number, string>> = {
  100: "Continue",
  101: "Switching Protocols",
  102: "Processing",
  103: "Early Hints",
  200: "OK",
  201: "Created",
  202: "Accepted",
  203: "Non-Authoritative Information",
  204: "No Content",
  205: "Reset Content",
  206: "Partial Content",
  207: "Multi-Status",
  208: "Already Reported",
  226: "IM Used",
  300: "Multiple Choices",
  301: "Moved Permanently",
  302: "Found",
  303: "See Other",
  304: "Not Modified",
  305: "Use Proxy",
  307: "Temporary Redirect",
  308: "Permanent Redirect",
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  407: "Proxy Authentication Required",
  408: "Request Timeout",
  409: "Conflict",
  410: "Gone",
  411: "Length Required",
  412: "Precondition Failed",
  413: "Request Entity Too Large",
  414: "Request URI Too Long",
  415: "Unsupported Media Type",
  416: "Requested Range Not Satisfiable",
  417: "Expectation Failed",
  418: "I'm a teapot",
  421: "Misdirected Request",
  422: "Unprocessable Entity",
  423: "Locked",
  424: "Failed Dependency",
  425: "Too Early",
  426: "Upgrade Required",
  428: "Precondition Required",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  451: "Unavailable For Legal Reasons",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  505: "HTTP Version Not Supported",
  506: "Variant Also Negotiates",
  507: "Insufficient Storage",
  508: "Loop Detected",
  510: "Not Extended",
  511: "Network Authentication Required",
};

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
 * A base-10 integer as Go's `strconv.ParseInt(value, 10, 32)` takes it (an optional sign, digits,
 * within int32), or undefined.
 */
function parseInt32(value: string): number | undefined {
  if (!/^[+-]?\d+$/.test(value)) return undefined;
  const n = Number(value);
  return n >= -(2 ** 31) && n <= 2 ** 31 - 1 ? n : undefined;
}

/** What one HEADERS block of a response says, read as grpc-go's operateHeaders reads it. */
interface HeaderBlockStatus {
  /** The status the block carries (trailers, trailers-only), Unknown without `grpc-status`. */
  code: number;
  message: string;
  /** `grpc-encoding`. */
  encoding: string;
}

/**
 * Reads the response headers (`initial`) or trailers as grpc-go v1.72's
 * `http2Client.operateHeaders` does: a malformed `grpc-status` (not an int32) or `:status` is
 * Internal at once; the initial headers must carry `:status` 200 and a gRPC content type, else
 * the HTTP status maps to a code (Internal when there is none, Unknown when the table has none).
 */
function readBlock(
  fields: readonly HeaderField[],
  initial: boolean,
): HeaderBlockStatus | GrpcStatusError {
  let isGrpc = !initial;
  let contentTypeErr = "malformed header: missing HTTP content-type";
  let httpStatusErr = initial ? "malformed header: missing HTTP status" : "";
  let httpStatus: number | undefined;
  const out: HeaderBlockStatus = { code: GrpcCode.Unknown, message: "", encoding: "" };
  for (const [name, value] of fields) {
    switch (name) {
      case "content-type":
        if (/^application\/grpc(?:$|[+;])/.test(value)) {
          contentTypeErr = "";
          isGrpc = true;
        } else {
          contentTypeErr = `transport: received unexpected content-type ${goQuote(value)}`;
        }
        break;
      case "grpc-encoding":
        out.encoding = value;
        break;
      case "grpc-status": {
        const code = parseInt32(value);
        if (code === undefined) {
          return new GrpcStatusError(
            GrpcCode.Internal,
            `transport: malformed grpc-status: ${peerText(value, QUOTED_VALUE_MAX)}`,
          );
        }
        out.code = code >>> 0; // codes.Code(uint32(code))
        break;
      }
      case "grpc-message":
        // The driver's text reaches logs, Events and the VolumeAttachment's status.
        out.message = peerText(decodeGrpcMessage(value));
        break;
      case ":status": {
        if (value === "200") {
          httpStatusErr = "";
          httpStatus = 200;
          break;
        }
        const status = parseInt32(value);
        if (status === undefined) {
          return new GrpcStatusError(
            GrpcCode.Internal,
            `transport: malformed http-status: strconv.ParseInt: parsing ${goQuote(value)}: ${
              /^[+-]?\d+$/.test(value) ? "value out of range" : "invalid syntax"
            }`,
          );
        }
        httpStatus = status;
        httpStatusErr = `unexpected HTTP status code received from server: ${status} (${
          HTTP_STATUS_TEXT[status] ?? ""
        })`;
        break;
      }
    }
  }
  if (!isGrpc || httpStatusErr !== "") {
    const code = httpStatus === undefined ? GrpcCode.Internal : httpStatusToCode(httpStatus);
    const errs = [httpStatusErr, contentTypeErr].filter((e) => e !== "");
    return new GrpcStatusError(code, errs.join("; "));
  }
  return out;
}

/**
 * A string as Go's `%q` writes it for ASCII: in double quotes, `"` and `\` escaped, control
 * characters as `\n`, `\t`… or `\xNN`. Octets above 0x7e are written `\xNN` (Go keeps
 * printable UTF-8; header values here are octets). At most {@link QUOTED_VALUE_MAX} characters.
 */
function goQuote(value: string): string {
  const named: Record<string, string> = {
    "\x07": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    '"': '\\"',
    "\\": "\\\\",
  };
  let out = '"';
  for (const c of value) {
    const code = c.charCodeAt(0);
    if (named[c] !== undefined) out += named[c];
    else if (code < 0x20 || code > 0x7e) out += `\\x${(code & 0xff).toString(16).padStart(2, "0")}`;
    else out += c;
  }
  return peerText(out + '"', QUOTED_VALUE_MAX);
}

/**
 * The outcome of a complete response: the message bytes, or the status as
 * {@link GrpcStatusError} (grpc-go `http2_client.go` operateHeaders and `rpc_util.go` recvMsg
 * for the texts).
 */
export function parseResponse(
  res: {
    headers: readonly HeaderField[];
    data: Uint8Array;
    trailers: readonly HeaderField[] | undefined;
    headersOnly: boolean;
  },
): Uint8Array | GrpcStatusError {
  const head = readBlock(res.headers, true);
  if (head instanceof GrpcStatusError) return head;
  // The status comes in the trailers, or in the headers of a trailers-only response.
  let status = head;
  if (!res.headersOnly) {
    if (res.trailers === undefined) {
      return new GrpcStatusError(
        GrpcCode.Internal,
        "server closed the stream without sending trailers",
      );
    }
    const trailers = readBlock(res.trailers, false);
    if (trailers instanceof GrpcStatusError) return trailers;
    status = trailers;
  }
  if (status.code !== GrpcCode.OK) return new GrpcStatusError(status.code, status.message);
  return unframeMessage(res.data, head.encoding);
}

/**
 * The one message of a unary response, or the error grpc-go reports (`rpc_util.go` recvMsg: the
 * length first, then the payload format as checkRecvPayload checks it; we install no
 * decompressor).
 */
function unframeMessage(data: Uint8Array, encoding: string): Uint8Array | GrpcStatusError {
  if (data.length === 0) {
    return new GrpcStatusError(
      GrpcCode.Internal,
      "cardinality violation: expected <{}> but got <EOF>",
    );
  }
  if (data.length < 5) return new GrpcStatusError(GrpcCode.Internal, "unexpected EOF");
  const flag = data[0]!;
  const length = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(1);
  if (length > MAX_RECEIVE_MESSAGE_BYTES) {
    return new GrpcStatusError(
      GrpcCode.ResourceExhausted,
      `grpc: received message larger than max (${length} vs. ${MAX_RECEIVE_MESSAGE_BYTES})`,
    );
  }
  if (data.length < 5 + length) return new GrpcStatusError(GrpcCode.Internal, "unexpected EOF");
  if (flag === 1) {
    return new GrpcStatusError(
      GrpcCode.Internal,
      encoding === "" || encoding === "identity"
        ? "grpc: compressed flag set with identity or empty encoding"
        : `grpc: Decompressor is not installed for grpc-encoding ${goQuote(encoding)}`,
    );
  }
  if (flag !== 0) {
    return new GrpcStatusError(
      GrpcCode.Internal,
      `grpc: received unexpected payload format ${flag}`,
    );
  }
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
