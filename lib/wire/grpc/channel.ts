/**
 * A gRPC channel for unary calls over our HTTP/2 session (gRPC over HTTP/2:
 * https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md), to one address, with the
 * connectivity states of gRPC (https://github.com/grpc/grpc/blob/master/doc/connectivity-semantics-and-api.md):
 * IDLE until something asks for a connection; CONNECTING; READY; TRANSIENT_FAILURE after a
 * failed attempt, with a new attempt after the backoff (calls meanwhile fail at once with the
 * attempt's error, as without wait-for-ready); IDLE again when a READY connection is lost;
 * SHUTDOWN after {@link GrpcChannel.close}.
 *
 * A call fails with a {@link GrpcStatusError} worded as grpc-go words it, or with a
 * {@link ChannelClosedError} once the channel is closed (not a gRPC status).
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../../clock.ts";
import { errorText } from "../../errors.ts";
import { GrpcCode, GrpcStatusError } from "./status.ts";
import { Http2Session, type Http2SessionOptions, StreamError } from "../http2/session.ts";
import { ErrorCode } from "../http2/frames.ts";
import type { HeaderField } from "../http2/hpack.ts";

/** Connectivity states. */
export type ChannelState = "IDLE" | "CONNECTING" | "READY" | "TRANSIENT_FAILURE" | "SHUTDOWN";

/** The text Go's gRPC gives a call whose client-side deadline expired. */
export const DEADLINE_DETAILS = "context deadline exceeded";

/** The largest response message accepted (grpc-go's default receive limit, 4 MiB). */
export const MAX_RECEIVE_MESSAGE_BYTES = 4 * 1024 * 1024;

/** The text of {@link ChannelClosedError}, grpc-go's `ErrClientConnClosing`. */
export const CLOSED_TEXT = "grpc: the client connection is closing";

/** What a call on a closed channel fails with: not a gRPC status. */
export class ChannelClosedError extends Error {
  constructor() {
    super(CLOSED_TEXT);
    this.name = "ChannelClosedError";
  }
}

/** Where to connect: a unix socket path or a TCP host and port. */
export type ChannelAddress =
  | { transport: "unix"; path: string }
  | { transport: "tcp"; hostname: string; port: number };

/**
 * Parses `--csi-address` as csi-lib-utils accepts it: an absolute path, `unix:///path`,
 * `unix:/path` or `host:port` (`[v6]:port`).
 *
 * @throws {Error} for anything else.
 */
export function parseAddress(address: string): ChannelAddress {
  if (address.startsWith("/")) return { transport: "unix", path: address };
  if (address.startsWith("unix://")) {
    const path = address.slice("unix://".length);
    if (path.startsWith("/")) return { transport: "unix", path };
  } else if (address.startsWith("unix:")) {
    const path = address.slice("unix:".length);
    if (path !== "") return { transport: "unix", path };
  } else {
    const m = /^(?:\[([^\]]+)\]|([^:/]*)):(\d{1,5})$/.exec(address);
    if (m !== null && Number(m[3]) <= 65535) {
      const hostname = m[1] ?? m[2] ?? "";
      return {
        transport: "tcp",
        hostname: hostname === "" ? "localhost" : hostname,
        port: Number(m[3]),
      };
    }
  }
  throw new Error(
    `invalid CSI address ${JSON.stringify(address)}: want a path, unix:// or host:port`,
  );
}

/** Options of {@link GrpcChannel}. */
export interface GrpcChannelOptions {
  /** Delay between connection attempts in ms. */
  backoffMs: number;
  /** HTTP/2 window sizes (tests use small ones). */
  session?: Http2SessionOptions;
  /**
   * Runs call deadlines, the reconnect backoff and the HTTP/2 handshake timeout;
   * {@link realClock} by default.
   */
  clock?: Clock;
}

/** A channel to one gRPC server. Construction does no I/O. */
export class GrpcChannel {
  readonly #address: ChannelAddress;
  readonly #authority: string;
  readonly #options: GrpcChannelOptions;
  readonly #clock: Clock;
  #state: ChannelState = "IDLE";
  #session: Http2Session | undefined;
  #attempt: Promise<Http2Session> | undefined;
  #lastError: GrpcStatusError | undefined;
  #retryTimer: Timer | undefined;
  #listeners = new Set<(state: ChannelState, previous: ChannelState) => void>();

  /** @throws {Error} when `address` is not a valid address (see {@link parseAddress}). */
  constructor(address: string, options: GrpcChannelOptions) {
    this.#address = parseAddress(address);
    this.#authority = this.#address.transport === "unix"
      ? "localhost"
      : `${
        this.#address.hostname.includes(":")
          ? `[${this.#address.hostname}]`
          : this.#address.hostname
      }:${this.#address.port}`;
    this.#options = options;
    this.#clock = options.clock ?? realClock;
  }

  get state(): ChannelState {
    return this.#state;
  }

  /** Calls `listener` on every state change until the returned function is called. */
  onStateChange(listener: (state: ChannelState, previous: ChannelState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Starts connecting when IDLE (a TRANSIENT_FAILURE retries by itself after the backoff). */
  connect(): void {
    if (this.#state === "IDLE") this.#startAttempt().catch(() => {});
  }

  /** Closes the connection; calls in flight fail with Unavailable. Idempotent. */
  close(): void {
    if (this.#state === "SHUTDOWN") return;
    this.#retryTimer?.cancel();
    this.#retryTimer = undefined;
    this.#setState("SHUTDOWN");
    this.#session?.close(CLOSED_TEXT);
    this.#session = undefined;
    this.#listeners.clear();
  }

  #setState(state: ChannelState): void {
    const previous = this.#state;
    if (previous === state) return;
    this.#state = state;
    for (const listener of [...this.#listeners]) listener(state, previous);
  }

  #startAttempt(): Promise<Http2Session> {
    this.#setState("CONNECTING");
    const attempt = this.#dial().then(
      (session) => {
        if (this.#state === "SHUTDOWN") {
          session.close(CLOSED_TEXT);
          throw new ChannelClosedError();
        }
        this.#attempt = undefined;
        this.#session = session;
        this.#lastError = undefined;
        this.#setState("READY");
        return session;
      },
      (err: unknown) => {
        this.#attempt = undefined;
        if (this.#state === "SHUTDOWN") throw new ChannelClosedError();
        const error = err instanceof GrpcStatusError
          ? err
          : new GrpcStatusError(GrpcCode.Unavailable, errorText(err));
        this.#lastError = error;
        this.#setState("TRANSIENT_FAILURE");
        this.#retryTimer = this.#clock.setTimer(this.#options.backoffMs, () => {
          this.#retryTimer = undefined;
          if (this.#state === "TRANSIENT_FAILURE") this.#startAttempt().catch(() => {});
        });
        throw error;
      },
    );
    this.#attempt = attempt;
    return attempt;
  }

  async #dial(): Promise<Http2Session> {
    const a = this.#address;
    let conn: Deno.Conn;
    try {
      conn = a.transport === "unix"
        ? await Deno.connect({ transport: "unix", path: a.path })
        : await Deno.connect({ transport: "tcp", hostname: a.hostname, port: a.port });
    } catch (err) {
      const target = a.transport === "unix" ? `unix ${a.path}` : `tcp ${this.#authority}`;
      throw new GrpcStatusError(
        GrpcCode.Unavailable,
        `connection error: desc = "transport: Error while dialing: dial ${target}: connect: ${
          dialErrorText(err)
        }"`,
      );
    }
    let session: Http2Session | undefined;
    try {
      session = await Http2Session.start(conn, (reason) => this.#onGone(session, reason), {
        clock: this.#clock,
        ...this.#options.session,
      });
    } catch (err) {
      throw new GrpcStatusError(
        GrpcCode.Unavailable,
        `connection error: desc = "transport: ${errorText(err)}"`,
      );
    }
    return session;
  }

  #onGone(session: Http2Session | undefined, _reason: string): void {
    if (session === undefined || session !== this.#session) return;
    this.#session = undefined;
    if (this.#state === "READY") this.#setState("IDLE");
  }

  async #ready(): Promise<Http2Session> {
    switch (this.#state) {
      case "SHUTDOWN":
        throw new ChannelClosedError();
      case "READY":
        if (this.#session?.usable) return this.#session;
        this.#session = undefined;
        this.#setState("IDLE");
        return await this.#startAttempt();
      case "CONNECTING":
        return await this.#attempt!;
      case "TRANSIENT_FAILURE":
        throw this.#lastError ?? new GrpcStatusError(GrpcCode.Unavailable, "connection failed");
      case "IDLE":
        return await this.#startAttempt();
    }
  }

  /**
   * Makes one unary call: `message` is the serialized request. Resolves with the serialized
   * response; rejects with {@link GrpcStatusError}: the server's status, DeadlineExceeded
   * `context deadline exceeded` when `timeoutMs` passes first (the stream is then reset with
   * CANCEL), Unavailable when there is no connection or it ends; or with
   * {@link ChannelClosedError} when the channel is closed.
   */
  unary(path: string, message: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    if (this.#state === "SHUTDOWN") return Promise.reject(new ChannelClosedError());
    const deadline = this.#clock.now() + timeoutMs;
    if (timeoutMs <= 0) {
      return Promise.reject(new GrpcStatusError(GrpcCode.DeadlineExceeded, DEADLINE_DETAILS));
    }
    return new Promise<Uint8Array>((resolve, reject) => {
      let settled = false;
      let cancel: (() => void) | undefined;
      const finish = (err: Error | undefined, value?: Uint8Array) => {
        if (settled) return;
        settled = true;
        timer.cancel();
        if (err) reject(err);
        else resolve(value!);
      };
      const timer = this.#clock.setTimer(timeoutMs, () => {
        cancel?.();
        finish(new GrpcStatusError(GrpcCode.DeadlineExceeded, DEADLINE_DETAILS));
      });
      this.#ready().then((session) => {
        if (settled) return;
        const remaining = Math.max(1, Math.ceil(deadline - this.#clock.now()));
        const stream = session.request(
          requestHeaders(path, this.#authority, remaining),
          frameMessage(message),
          MAX_RECEIVE_MESSAGE_BYTES + 5,
        );
        cancel = stream.cancel;
        return stream.response.then(
          (response) => {
            const result = parseResponse(response);
            if (result instanceof GrpcStatusError) finish(result);
            else finish(undefined, result);
          },
          (err: unknown) => finish(streamErrorToStatus(err)),
        );
      }).catch((err: unknown) => {
        finish(
          err instanceof GrpcStatusError || err instanceof ChannelClosedError
            ? err
            : new GrpcStatusError(GrpcCode.Unavailable, errorText(err)),
        );
      });
    });
  }
}

function dialErrorText(err: unknown): string {
  if (err instanceof Deno.errors.NotFound) return "no such file or directory";
  if (err instanceof Deno.errors.ConnectionRefused) return "connection refused";
  if (err instanceof Deno.errors.PermissionDenied) return "permission denied";
  return errorText(err).replace(/ \(os error \d+\)$/, "").replace(/^./, (c) => c.toLowerCase());
}

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

function streamErrorToStatus(err: unknown): GrpcStatusError {
  if (err instanceof GrpcStatusError) return err;
  if (!(err instanceof StreamError)) {
    return new GrpcStatusError(GrpcCode.Unavailable, errorText(err));
  }
  const f = err.failure;
  switch (f.kind) {
    case "reset":
      return new GrpcStatusError(resetCode(f.code), f.message);
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
