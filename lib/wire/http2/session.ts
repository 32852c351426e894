/**
 * A minimal HTTP/2 client connection (RFC 9113) over a `Deno.Conn`, for gRPC over cleartext
 * ("prior knowledge", §3.3): the preface and SETTINGS exchange (§3.4, §6.5), request streams
 * (HEADERS and CONTINUATION out, DATA out under the peer's flow-control windows and frame size,
 * §6.9), responses with their trailers (§8.1), flow control of what we receive (a large window,
 * topped up as data is consumed), PING (§6.7), RST_STREAM (§6.4) and GOAWAY (§6.8).
 *
 * The session runs over any `Deno.Conn`: cleartext for the CSI socket, TLS (ALPN `h2`, set up by
 * the caller) for the Kubernetes API server. Not implemented: the HTTP/1.1 Upgrade
 * (§3.2, removed from RFC 9113), server push (we announce SETTINGS_ENABLE_PUSH 0 and treat
 * PUSH_PROMISE as a connection error), priorities (PRIORITY frames are checked and ignored, §5.3),
 * a dynamic table for what we send, and a SETTINGS ACK timeout. Violations of RFC 9113 by the
 * peer end the connection with GOAWAY and the error code (§5.4.1), or reset the one stream
 * (§5.4.2); every request then fails with a {@link StreamError}.
 *
 * Limits (`./session_limits.ts`): our stream receive window 4 MiB and connection window 16 MiB
 * (DATA beyond them is FLOW_CONTROL_ERROR); a response header list of at most
 * {@link MAX_HEADER_LIST_SIZE} by default (announced; a larger one fails the one stream
 * `headers-too-large`); a header block of at most 2 MiB over at most 128 CONTINUATION frames
 * (ENHANCE_YOUR_CALM); at most 50 frames owed to the peer waiting unsent (the reader waits);
 * windows up to 2^31-1 (§6.9.1); a stream's DATA beyond the caller's `maxDataBytes` resets it
 * (`too-large`); the server's SETTINGS within 20 s of connecting.
 *
 * A response is collected whole ({@link Http2Session.request}, unary gRPC) or streamed to its
 * reader ({@link Http2Session.open}, HTTP bodies: Kubernetes lists and watches), whose stream
 * window is then given back as it reads (`./stream_body.ts`). With `readIdleTimeoutMs`, a PING
 * checks a silent connection (`./health_check.ts`).
 *
 * What is sent lives in `./outbound.ts`: streams opened within the peer's stream limit, HEADERS
 * split at its frame size, DATA under its windows. This file reads frames and keeps the
 * receiving side: our windows, responses, errors, GOAWAY and the end of the connection.
 *
 * Memory follows octets, not frames (`./frames.ts`, `./receive_buffer.ts`, `./stream_body.ts`)
 * and the read loop yields to timers and I/O after 5 ms of frames (`./read_pacer.ts`).
 *
 * Tested against real peers: grpc-js (the test kit's CSI server, `testkit/csi/server.ts`, in
 * `lib/csi/client_test.ts`) and grpc-go (the Kubernetes CSI mock driver in `deno task e2e`); and
 * against scripted servers that send any bytes (`testkit/csi/raw_h2_server.ts`, and
 * `testkit/h2/raw_peer.ts`, written independently of this code, in `session_test.ts`).
 *
 * @module
 */

import {
  CLIENT_PREFACE,
  ConnectionError,
  DEFAULT_MAX_FRAME_SIZE,
  encodeFrame,
  ErrorCode,
  errorCodeName,
  Flag,
  type Frame,
  FrameReader,
  FrameType,
  goAwayFrame,
  MAX_WINDOW,
  parseSettings,
  readUint31,
  readUint32,
  rstStreamFrame,
  Setting,
  settingsFrame,
  unpad,
  windowUpdateFrame,
} from "./frames.ts";
import { type HeaderField, HeaderListSizeError, HpackDecoder, HpackError } from "./hpack.ts";
import { FrameWriter, type WriteFence } from "./writer.ts";
import { StreamError, type StreamFailure } from "./stream_error.ts";
import { HeaderBlock } from "./header_block.ts";
import { type Clock, realClock } from "../../clock.ts";
import { errorText } from "../../errors.ts";
import { FencedError, type LeaseFence } from "../../lease_fence.ts";
import { ReceiveBuffer } from "./receive_buffer.ts";
import { ReadPacer, yieldTurn } from "./read_pacer.ts";
import { HealthCheck } from "./health_check.ts";
import type {
  ClientStream,
  Http2SessionOptions,
  RequestOptions,
  StreamingStream,
  StreamResponse,
} from "./session_types.ts";
import type { StreamState } from "./stream_state.ts";
import { OutboundStreams } from "./outbound.ts";
import { openHooks, type StreamHooks, streamingOf } from "./streaming.ts";
import {
  checkSetting,
  DEFAULT_CONNECTION_WINDOW,
  DEFAULT_STREAM_WINDOW,
  MAX_CONTINUATION_FRAMES,
  MAX_HEADER_BLOCK,
  MAX_HEADER_LIST_SIZE,
  MAX_PENDING_RESPONSES,
  PROTOCOL_INITIAL_WINDOW,
} from "./session_limits.ts";

export { MAX_HEADER_LIST_SIZE };
export type { ClientStream, Http2SessionOptions, RequestOptions, StreamingStream, StreamResponse };

/** The collected data of a streamed request: never used. */
const NO_DATA = new ReceiveBuffer(0);
/**
 * One HTTP/2 connection. Create it with {@link Http2Session.start}; it reads until the peer
 * closes or {@link close} is called.
 */
export class Http2Session {
  readonly #conn: Deno.Conn;
  readonly #reader = new FrameReader(DEFAULT_MAX_FRAME_SIZE);
  readonly #hpack: HpackDecoder;
  readonly #maxHeaderListSize: number;
  readonly #streamWindow: number;
  readonly #connectionWindow: number;
  readonly #streams = new Map<number, StreamState>();
  /** The streams opened and the DATA sent on them (`./outbound.ts`). */
  readonly #outbound: OutboundStreams;
  #connRecvWindow: number;
  #connRecvUnacked = 0;

  /** A header block being received over CONTINUATION frames. */
  #continuation: HeaderBlock | null = null;

  readonly #writer: FrameWriter;
  readonly #clock: Clock;
  readonly #pacer: ReadPacer;
  #closed = false;
  #goneAway = false;
  #goneReason: string | undefined;
  #onGone: ((reason: string) => void) | undefined;
  #handshake: { resolve: () => void; reject: (e: Error) => void } | undefined;
  #health: HealthCheck | undefined;

  private constructor(conn: Deno.Conn, options: Http2SessionOptions) {
    this.#conn = conn;
    this.#maxHeaderListSize = options.maxHeaderListSize ?? MAX_HEADER_LIST_SIZE;
    this.#hpack = new HpackDecoder({ maxHeaderListSize: this.#maxHeaderListSize });
    this.#writer = new FrameWriter(conn, (err) => {
      if (!this.#closed) this.#terminate(`error writing to server: ${errorText(err)}`);
    });
    this.#clock = options.clock ?? realClock;
    this.#pacer = new ReadPacer(this.#clock);
    this.#streamWindow = options.initialWindowSize ?? DEFAULT_STREAM_WINDOW;
    this.#connectionWindow = Math.max(
      PROTOCOL_INITIAL_WINDOW,
      options.connectionWindowSize ?? DEFAULT_CONNECTION_WINDOW,
    );
    this.#connRecvWindow = this.#connectionWindow;
    this.#outbound = new OutboundStreams({
      streams: this.#streams,
      send: (bytes, fence) => this.#send(bytes, fence),
      exhausted: () => this.#goAwayLocally("stream ids exhausted"),
    });
  }

  /**
   * Sends the preface and our SETTINGS on `conn`, starts reading, and resolves once the
   * server's SETTINGS arrived. On failure the connection is closed.
   *
   * @param onGone called once when the session stops taking new streams: GOAWAY received, the
   *   connection ended or failed, or {@link close}.
   * @throws {Error} when the server closes, fails or does not answer in time.
   */
  static async start(
    conn: Deno.Conn,
    onGone: (reason: string) => void,
    options: Http2SessionOptions = {},
  ): Promise<Http2Session> {
    const session = new Http2Session(conn, options);
    session.#onGone = onGone;
    const ready = new Promise<void>((resolve, reject) => {
      session.#handshake = { resolve, reject };
    });
    const timeoutMs = options.handshakeTimeoutMs ?? 20_000;
    const timer = session.#clock.setTimer(
      timeoutMs,
      () => session.#terminate("timed out waiting for the server's HTTP/2 settings"),
    );
    session.#send(CLIENT_PREFACE);
    session.#send(settingsFrame([
      [Setting.ENABLE_PUSH, 0],
      [Setting.INITIAL_WINDOW_SIZE, session.#streamWindow],
      [Setting.MAX_HEADER_LIST_SIZE, session.#maxHeaderListSize],
    ]));
    if (session.#connectionWindow > PROTOCOL_INITIAL_WINDOW) {
      session.#send(windowUpdateFrame(0, session.#connectionWindow - PROTOCOL_INITIAL_WINDOW));
    }
    session.#readLoop();
    try {
      await ready;
    } finally {
      timer.cancel();
    }
    if (options.readIdleTimeoutMs !== undefined) {
      session.#health = new HealthCheck(session.#clock, {
        readIdleTimeoutMs: options.readIdleTimeoutMs,
        pingTimeoutMs: options.pingTimeoutMs ?? 15_000,
        ping: (payload) => session.#send(encodeFrame(FrameType.PING, 0, 0, payload)),
        lost: () => session.#terminate("http2: client connection lost"),
      });
    }
    return session;
  }

  /** False once GOAWAY arrived or the connection ended: no new streams. */
  get usable(): boolean {
    return !this.#closed && !this.#goneAway;
  }

  /** Streams open or waiting for a free slot. */
  get activeStreams(): number {
    return this.#streams.size + this.#outbound.pendingCount;
  }

  /** True while a new stream would be opened at once (the peer's stream limit not reached). */
  get hasCapacity(): boolean {
    return this.usable && this.activeStreams < this.#outbound.peerMaxStreams;
  }

  /**
   * Takes no new streams from now on; closes once the streams under way end (as Go's
   * `ClientConn` does once it may not be reused). Requests still waiting for a slot fail
   * `refused`.
   */
  drain(reason = "the connection is not reused"): void {
    if (!this.#closed) this.#goAwayLocally(reason);
  }

  /**
   * Starts a request whose response body is read as it arrives: `head` resolves with the response
   * headers (informational ones skipped), `body` yields the DATA. The stream's receive window is
   * given back as the body is read (see `./stream_body.ts`). Options and failures as
   * {@link request}'s; a failure after the headers fails the body's read.
   */
  open(
    headers: readonly HeaderField[],
    body: Uint8Array,
    maxDataBytes: number,
    options: RequestOptions = {},
  ): StreamingStream {
    const hooks: StreamHooks = openHooks((n) => this.#consumed(hooks.state!, n));
    return streamingOf(this.request(headers, body, maxDataBytes, options, hooks), hooks);
  }

  /** A streamed body's reader took `octets`: give them back as the stream's window. */
  #consumed(s: StreamState, octets: number): void {
    if (this.#closed || this.#streams.get(s.id) !== s) return;
    s.recvUnacked += octets;
    if (s.recvUnacked >= this.#streamWindow / 2) {
      this.#send(windowUpdateFrame(s.id, s.recvUnacked));
      s.recvWindow += s.recvUnacked;
      s.recvUnacked = 0;
    }
  }

  /**
   * Starts a request: `headers` (pseudo-headers first) and `body`, which ends the stream.
   * Waits for a free slot when the peer's SETTINGS_MAX_CONCURRENT_STREAMS is reached.
   *
   * @param maxDataBytes response DATA beyond this fails the stream (`too-large`) and resets it.
   * @param options.fence asked synchronously immediately before each write of the request's
   *   frames (see `./writer.ts`); when it says no, nothing more of the request is written and the
   *   stream fails with {@link FencedError} (reset with CANCEL if its HEADERS had gone out).
   * @param options.sizeHint reads the response's whole length from its first octets, so that its
   *   DATA goes into one array of that size (see `./receive_buffer.ts`).
   */
  request(
    headers: readonly HeaderField[],
    body: Uint8Array,
    maxDataBytes: number,
    options: RequestOptions = {},
    streamed?: StreamHooks,
  ): ClientStream {
    const { fence, sizeHint } = options;
    let resolve!: (r: StreamResponse) => void;
    let reject!: (e: StreamError | FencedError) => void;
    const response = new Promise<StreamResponse>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A cancelled or failed stream nobody awaits any more must not surface as unhandled.
    response.catch(() => {});
    const state: StreamState = {
      id: 0,
      sendWindow: 0,
      recvWindow: this.#streamWindow,
      recvUnacked: 0,
      headers: undefined,
      data: streamed === undefined ? new ReceiveBuffer(maxDataBytes, sizeHint) : NO_DATA,
      maxDataBytes,
      body,
      bodyOffset: 0,
      bodySent: false,
      resolve,
      reject,
    };
    if (streamed !== undefined) {
      state.streaming = streamed.body;
      state.onHead = streamed.onHead;
      streamed.state = state;
    }
    if (fence !== undefined) state.fence = this.#streamFence(state, fence);
    if (!this.usable) {
      reject(
        new StreamError(
          this.#closed
            ? { kind: "connection", message: this.#goneReason ?? "connection closed" }
            : { kind: "refused", message: "the connection is draining" },
        ),
      );
    } else {
      this.#outbound.add({ headers, body, state });
    }
    return {
      response,
      cancel: () => this.#cancel(state),
    };
  }

  /** Closes the connection; open streams fail with `connection`. Idempotent. */
  close(reason = "the client closed the connection"): void {
    this.#terminate(reason);
  }

  /** The writer's fence of a stream's frames: once it said no, it stays no. */
  #streamFence(state: StreamState, fence: LeaseFence): WriteFence {
    let passed = false;
    let closed = false;
    return {
      allowed: () => {
        if (!closed && fence.valid()) return passed = true;
        closed = true;
        return false;
      },
      refused: () => {
        if (this.#streams.get(state.id) !== state) return;
        if (passed) this.#send(rstStreamFrame(state.id, ErrorCode.CANCEL));
        this.#finish(state);
        state.reject(new FencedError());
      },
    };
  }

  #cancel(state: StreamState): void {
    if (this.#outbound.unqueue(state)) {
      state.reject(new StreamError({ kind: "cancelled" }));
      return;
    }
    if (this.#streams.get(state.id) !== state) return;
    this.#send(rstStreamFrame(state.id, ErrorCode.CANCEL));
    this.#finish(state);
    state.reject(new StreamError({ kind: "cancelled" }));
  }

  async #readLoop(): Promise<void> {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(buf);
        if (this.#closed) return;
        this.#health?.heard();
        if (n === null) {
          this.#terminate("error reading from server: EOF");
          return;
        }
        this.#reader.push(buf.subarray(0, n));
        for (let frame = this.#reader.next(); frame; frame = this.#reader.next()) {
          this.#handle(frame);
          if (this.#closed) return;
          if (this.#pacer.frameHandled()) {
            // Thousands of tiny frames in one read: let timers and other I/O run.
            await yieldTurn();
            if (this.#closed) return;
            this.#pacer.yielded();
          }
          if (this.#writer.pendingResponses >= MAX_PENDING_RESPONSES) {
            // The peer asks for more answers than it reads: read nothing until it catches up.
            await this.#writer.responsesBelow(MAX_PENDING_RESPONSES);
            if (this.#closed) return;
          }
        }
      }
    } catch (err) {
      if (this.#closed) return;
      if (err instanceof ConnectionError || err instanceof HpackError) {
        const code = err instanceof ConnectionError ? err.code : ErrorCode.COMPRESSION_ERROR;
        this.#send(goAwayFrame(this.#outbound.lastOpened, code, err.message));
        this.#terminate(`connection error: ${errorCodeName(code)}: ${err.message}`, true);
      } else {
        this.#terminate(`error reading from server: ${errorText(err)}`);
      }
    }
  }

  #handle(frame: Frame): void {
    if (this.#continuation !== null && frame.type !== FrameType.CONTINUATION) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "expected a CONTINUATION frame");
    }
    if (this.#handshake !== undefined && frame.type !== FrameType.SETTINGS) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "the server did not start with SETTINGS");
    }
    switch (frame.type) {
      case FrameType.DATA:
        return this.#onData(frame);
      case FrameType.HEADERS:
        return this.#onHeaders(frame);
      case FrameType.CONTINUATION:
        return this.#onContinuation(frame);
      case FrameType.PRIORITY:
        if (frame.streamId === 0 || frame.payload.length !== 5) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "malformed PRIORITY frame");
        }
        return;
      case FrameType.RST_STREAM:
        return this.#onRstStream(frame);
      case FrameType.SETTINGS:
        return this.#onSettings(frame);
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE with push disabled");
      case FrameType.PING:
        if (frame.streamId !== 0) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream");
        }
        if (frame.payload.length !== 8) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PING payload not 8 bytes");
        }
        if (!(frame.flags & Flag.ACK)) {
          this.#sendResponse(encodeFrame(FrameType.PING, Flag.ACK, 0, frame.payload));
        } else {
          this.#health?.acked(frame.payload);
        }
        return;
      case FrameType.GOAWAY:
        return this.#onGoAway(frame);
      case FrameType.WINDOW_UPDATE:
        return this.#onWindowUpdate(frame);
      default:
        return; // §4.1: unknown frame types are ignored.
    }
  }

  #checkStreamId(streamId: number, what: string): void {
    if (streamId === 0) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${what} on stream 0`);
    }
    if (streamId % 2 === 0 || streamId > this.#outbound.lastOpened) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${what} on idle stream ${streamId}`);
    }
  }

  #onData(frame: Frame): void {
    this.#checkStreamId(frame.streamId, "DATA");
    const length = frame.payload.length; // padding counts for flow control (§6.1)
    this.#connRecvWindow -= length;
    if (this.#connRecvWindow < 0) {
      throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "DATA beyond the connection window");
    }
    this.#connRecvUnacked += length;
    if (this.#connRecvUnacked >= this.#connectionWindow / 2) {
      this.#send(windowUpdateFrame(0, this.#connRecvUnacked));
      this.#connRecvWindow += this.#connRecvUnacked;
      this.#connRecvUnacked = 0;
    }
    const s = this.#streams.get(frame.streamId);
    if (s === undefined) return; // reset or finished by us: consumed, dropped
    if (s.headers === undefined) {
      this.#streamError(s, ErrorCode.PROTOCOL_ERROR, "DATA before the response headers");
      return;
    }
    s.recvWindow -= length;
    if (s.recvWindow < 0) {
      this.#streamError(s, ErrorCode.FLOW_CONTROL_ERROR, "DATA beyond the stream window");
      return;
    }
    const data = frame.flags & Flag.PADDED ? unpad(frame) : frame.payload;
    const sink = s.streaming ?? s.data;
    if (data.length > 0) {
      const size = sink.length + data.length;
      if (size > s.maxDataBytes) {
        this.#send(rstStreamFrame(s.id, ErrorCode.CANCEL));
        this.#finish(s);
        s.reject(new StreamError({ kind: "too-large", size }));
        return;
      }
      // One array per stream, not one per frame: memory follows octets, not frames.
      sink.append(data);
    }
    if (frame.flags & Flag.END_STREAM) {
      this.#complete(s, undefined, false);
      return;
    }
    // A streamed body gives its data back as it is read (#consumed); padding at once.
    s.recvUnacked += s.streaming === undefined ? length : length - data.length;
    if (s.recvUnacked >= this.#streamWindow / 2) {
      this.#send(windowUpdateFrame(s.id, s.recvUnacked));
      s.recvWindow += s.recvUnacked;
      s.recvUnacked = 0;
    }
  }

  #onHeaders(frame: Frame): void {
    this.#checkStreamId(frame.streamId, "HEADERS");
    const fragment = unpad(frame);
    const endStream = (frame.flags & Flag.END_STREAM) !== 0;
    if (frame.flags & Flag.END_HEADERS) {
      this.#onHeaderBlock(frame.streamId, fragment, endStream);
    } else {
      this.#continuation = new HeaderBlock(frame.streamId, endStream, fragment, {
        maxBytes: MAX_HEADER_BLOCK,
        maxContinuations: MAX_CONTINUATION_FRAMES,
      });
    }
  }

  #onContinuation(frame: Frame): void {
    const c = this.#continuation;
    if (c === null || c.streamId !== frame.streamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "unexpected CONTINUATION frame");
    }
    c.add(frame.payload);
    if (frame.flags & Flag.END_HEADERS) {
      this.#continuation = null;
      this.#onHeaderBlock(c.streamId, c.bytes(), c.endStream);
    }
  }

  #onHeaderBlock(streamId: number, block: Uint8Array, endStream: boolean): void {
    // Decoded even when nobody waits: the dynamic table must follow every block (RFC 7541 §2.2).
    let fields: HeaderField[];
    try {
      fields = this.#hpack.decode(block);
    } catch (err) {
      if (!(err instanceof HeaderListSizeError)) throw err;
      // The table followed the block; only this stream fails (grpc-go resets it FRAME_SIZE).
      const s = this.#streams.get(streamId);
      if (s !== undefined) {
        this.#sendResponse(rstStreamFrame(s.id, ErrorCode.FRAME_SIZE_ERROR));
        this.#finish(s);
        s.reject(new StreamError({ kind: "headers-too-large", limit: err.limit }));
      }
      return;
    }
    const s = this.#streams.get(streamId);
    if (s === undefined) return;
    if (s.headers === undefined) {
      const status = fields.find(([n]) => n === ":status")?.[1];
      if (status !== undefined && status.startsWith("1") && !endStream) return; // informational
      s.headers = fields;
      if (endStream) this.#complete(s, undefined, true);
      else s.onHead?.(fields);
    } else if (!endStream) {
      this.#streamError(s, ErrorCode.PROTOCOL_ERROR, "trailers without END_STREAM");
    } else {
      this.#complete(s, fields, false);
    }
  }

  #onRstStream(frame: Frame): void {
    this.#checkStreamId(frame.streamId, "RST_STREAM");
    if (frame.payload.length !== 4) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM payload not 4 bytes");
    }
    const s = this.#streams.get(frame.streamId);
    if (s === undefined) return;
    const code = readUint32(frame.payload, 0);
    this.#finish(s);
    s.reject(
      new StreamError({
        kind: code === ErrorCode.REFUSED_STREAM ? "refused" : "reset",
        code,
        message: `stream terminated by RST_STREAM with error code: ${errorCodeName(code)}`,
      } as StreamFailure),
    );
  }

  #onSettings(frame: Frame): void {
    if (frame.streamId !== 0) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    }
    if (frame.flags & Flag.ACK) {
      if (frame.payload.length !== 0) {
        throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
      }
      return;
    }
    for (const [id, value] of parseSettings(frame.payload)) {
      checkSetting(id, value);
      switch (id) {
        case Setting.INITIAL_WINDOW_SIZE:
          this.#outbound.setInitialWindow(value);
          break;
        case Setting.MAX_FRAME_SIZE:
          this.#outbound.setMaxFrameSize(value);
          break;
        case Setting.MAX_CONCURRENT_STREAMS:
          this.#outbound.setMaxStreams(value);
          break;
        default:
          break; // HEADER_TABLE_SIZE: our encoder uses no dynamic table. Unknown: ignored.
      }
    }
    this.#sendResponse(settingsFrame([], true));
    if (this.#handshake !== undefined) {
      const h = this.#handshake;
      this.#handshake = undefined;
      h.resolve();
    }
    this.#outbound.openPending();
  }

  #onGoAway(frame: Frame): void {
    if (frame.streamId !== 0) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream");
    }
    if (frame.payload.length < 8) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY payload too short");
    }
    const lastStreamId = readUint31(frame.payload, 0);
    const code = readUint32(frame.payload, 4);
    const refused = "the stream is rejected because server is draining the connection";
    for (const s of [...this.#streams.values()]) {
      if (s.id > lastStreamId) {
        this.#finish(s);
        s.reject(new StreamError({ kind: "refused", message: refused }));
      }
    }
    this.#goAwayLocally(`received GOAWAY with error code ${errorCodeName(code)}`);
  }

  /** No new streams from now on; queued requests are refused; closes when idle. */
  #goAwayLocally(reason: string): void {
    if (!this.#goneAway) {
      this.#goneAway = true;
      this.#goneReason = reason;
      this.#onGone?.(reason);
    }
    for (const p of this.#outbound.takePending()) {
      p.state.reject(new StreamError({ kind: "refused", message: "the connection is draining" }));
    }
    if (this.#streams.size === 0) this.#terminate(reason);
  }

  #onWindowUpdate(frame: Frame): void {
    if (frame.payload.length !== 4) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE payload not 4 bytes");
    }
    const increment = readUint31(frame.payload, 0);
    if (frame.streamId === 0) {
      if (increment === 0) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      }
      this.#outbound.connectionWindowUpdate(increment);
    } else {
      this.#checkStreamId(frame.streamId, "WINDOW_UPDATE");
      const s = this.#streams.get(frame.streamId);
      if (s === undefined) return;
      if (increment === 0) {
        this.#streamError(s, ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
        return;
      }
      s.sendWindow += increment;
      if (s.sendWindow > MAX_WINDOW) {
        this.#streamError(s, ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow");
        return;
      }
    }
    this.#outbound.flushData();
  }

  /** A stream error (§5.4.2): reset the stream, fail its request. */
  #streamError(s: StreamState, code: number, message: string): void {
    this.#sendResponse(rstStreamFrame(s.id, code));
    this.#finish(s);
    s.reject(new StreamError({ kind: "protocol", code, message: `stream error: ${message}` }));
  }

  #complete(s: StreamState, trailers: HeaderField[] | undefined, headersOnly: boolean): void {
    if (!s.bodySent) {
      // The server answered before reading the whole request: stop sending (§8.1).
      this.#sendResponse(rstStreamFrame(s.id, ErrorCode.NO_ERROR));
    }
    this.#finish(s);
    s.resolve({ headers: s.headers ?? [], data: s.data.bytes(), trailers, headersOnly });
  }

  /** Forgets a stream and lets waiting requests use its slot. */
  #finish(s: StreamState): void {
    if (this.#streams.get(s.id) !== s) return;
    this.#streams.delete(s.id);
    s.bodySent = true;
    if (this.#goneAway) {
      if (this.#streams.size === 0) this.#terminate(this.#goneReason ?? "connection drained");
    } else if (!this.#closed && this.#outbound.pendingCount > 0) {
      queueMicrotask(() => this.#outbound.openPending());
    }
  }

  /** Ends the session; with `flush`, frames queued (a GOAWAY) are written before closing. */
  #terminate(reason: string, flush = false): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#health?.stop();
    this.#writer.close(flush);
    if (this.#handshake !== undefined) {
      const h = this.#handshake;
      this.#handshake = undefined;
      h.reject(new Error(reason));
    }
    const failure: StreamFailure = { kind: "connection", message: reason };
    for (const s of [...this.#streams.values()]) {
      this.#streams.delete(s.id);
      s.reject(new StreamError(failure));
    }
    for (const p of this.#outbound.takePending()) p.state.reject(new StreamError(failure));
    if (!this.#goneAway) {
      this.#goneAway = true;
      this.#goneReason = reason;
      this.#onGone?.(reason);
    }
  }

  #send(bytes: Uint8Array, fence?: WriteFence): void {
    if (!this.#closed) this.#writer.write(bytes, false, fence);
  }

  /** Sends a frame the peer's frame asks for (an ACK, a RST_STREAM): counted by the writer. */
  #sendResponse(bytes: Uint8Array): void {
    if (!this.#closed) this.#writer.write(bytes, true);
  }
}
