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
 * The subset: unary calls only (one request message, one response message), cleartext HTTP/2 on
 * a unix socket or TCP (no TLS, no credentials), no compression (we send no
 * `grpc-accept-encoding`), no name resolution or load balancing beyond one address, no retries,
 * service config or keepalive pings. The limits of a response are those of `./response.ts` and
 * of the HTTP/2 session. Tested against grpc-js (`lib/csi/client_test.ts`) and grpc-go (the CSI
 * mock driver in `deno task e2e`).
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../../clock.ts";
import { errorText } from "../../errors.ts";
import { GrpcCode, GrpcStatusError } from "./status.ts";
import { Http2Session, type Http2SessionOptions } from "../http2/session.ts";
import { FencedError, type LeaseFence } from "../../lease_fence.ts";
import { type ChannelAddress, parseAddress } from "./address.ts";
import { frameMessage, requestHeaders } from "./request.ts";
import {
  GRPC_MESSAGE_SIZE,
  MAX_RECEIVE_MESSAGE_BYTES,
  parseResponse,
  streamErrorToStatus,
} from "./response.ts";

/** Connectivity states. */
export type ChannelState = "IDLE" | "CONNECTING" | "READY" | "TRANSIENT_FAILURE" | "SHUTDOWN";

/** The text Go's gRPC gives a call whose client-side deadline expired. */
export const DEADLINE_DETAILS = "context deadline exceeded";

/** The text of {@link ChannelClosedError}, grpc-go's `ErrClientConnClosing`. */
export const CLOSED_TEXT = "grpc: the client connection is closing";

/** What a call on a closed channel fails with: not a gRPC status. */
export class ChannelClosedError extends Error {
  constructor() {
    super(CLOSED_TEXT);
    this.name = "ChannelClosedError";
  }
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
   * {@link ChannelClosedError} when the channel is closed; or with {@link FencedError} when
   * `fence`, asked synchronously immediately before each write of the request's frames to the
   * connection, said no.
   */
  unary(
    path: string,
    message: Uint8Array,
    timeoutMs: number,
    fence?: LeaseFence,
  ): Promise<Uint8Array> {
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
          { fence, sizeHint: GRPC_MESSAGE_SIZE },
        );
        cancel = stream.cancel;
        return stream.response.then(
          (response) => {
            const result = parseResponse(response);
            if (result instanceof GrpcStatusError) finish(result);
            else finish(undefined, result);
          },
          (err: unknown) => finish(err instanceof FencedError ? err : streamErrorToStatus(err)),
        );
      }).catch((err: unknown) => {
        finish(
          err instanceof GrpcStatusError || err instanceof ChannelClosedError ||
            err instanceof FencedError
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
