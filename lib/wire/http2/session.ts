/**
 * A minimal HTTP/2 client connection (RFC 9113) over a `Deno.Conn`, for gRPC over cleartext
 * ("prior knowledge", §3.3): the preface and SETTINGS exchange (§3.4, §6.5), request streams
 * (HEADERS and CONTINUATION out, DATA out under the peer's flow-control windows and frame size,
 * §6.9), responses with their trailers (§8.1), flow control of what we receive (a large window,
 * topped up as data is consumed), PING (§6.7), RST_STREAM (§6.4) and GOAWAY (§6.8).
 *
 * Every response is collected whole ({@link StreamResponse}): unary gRPC needs nothing else.
 *
 * Not implemented: TLS and h2 over TLS (the CSI socket is cleartext), the HTTP/1.1 Upgrade
 * (§3.2, removed from RFC 9113), server push (we announce SETTINGS_ENABLE_PUSH 0 and treat
 * PUSH_PROMISE as a connection error), priorities (PRIORITY frames are checked and ignored, §5.3),
 * a dynamic table for what we send, and a SETTINGS ACK timeout. Violations of RFC 9113 by the
 * peer end the connection with GOAWAY and the error code (§5.4.1), or reset the one stream
 * (§5.4.2); every request then fails with a {@link StreamError}.
 *
 * Limits (the reference values: grpc-go `internal/transport`, Go `net/http` h2_bundle.go):
 * - our stream receive window 4 MiB (SETTINGS_INITIAL_WINDOW_SIZE; Go's Transport 4 MiB, grpc-go
 *   64 KiB growing with its BDP estimate to 16 MiB) and connection window 16 MiB (grpc-go 16 MiB
 *   at most, Go 1 GiB): DATA beyond them is FLOW_CONTROL_ERROR;
 * - a response header list of at most {@link MAX_HEADER_LIST_SIZE} (1 MiB, announced as
 *   SETTINGS_MAX_HEADER_LIST_SIZE; grpc-go 16 MiB, Go 10 MiB): a larger one resets the stream
 *   with FRAME_SIZE_ERROR and fails it `headers-too-large`, the connection goes on;
 * - a header block of at most 2 MiB over HEADERS and at most 128 CONTINUATION frames (Go gives
 *   up at twice the header list size; nghttp2 allows 8 CONTINUATION frames): more is a connection
 *   error ENHANCE_YOUR_CALM;
 * - at most 50 frames owed to the peer (SETTINGS and PING ACKs, RST_STREAM) waiting unsent:
 *   beyond that the reader reads nothing until the writer catches up (grpc-go
 *   `maxQueuedTransportResponseFrames`, 50), so a peer that floods and does not read cannot grow
 *   our memory;
 * - flow-control windows up to 2^31-1 (§6.9.1): a WINDOW_UPDATE or a SETTINGS_INITIAL_WINDOW_SIZE
 *   change beyond it is FLOW_CONTROL_ERROR;
 * - a stream's response DATA beyond the caller's `maxDataBytes` resets it (`too-large`);
 * - the server's SETTINGS within 20 s of connecting (grpc-go's `minConnectTimeout`, 20 s).
 *
 * Memory follows octets, not frames: the reader copies no payload (`./frames.ts`) and a stream's
 * DATA goes into one array (`./receive_buffer.ts`); the read loop yields to timers and I/O after
 * 5 ms of frames (`./read_pacer.ts`), so a flood of tiny frames holds neither memory nor the
 * event loop.
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
import {
  encodeHeaders,
  type HeaderField,
  HeaderListSizeError,
  HpackDecoder,
  HpackError,
} from "./hpack.ts";
import { FrameWriter, type WriteFence } from "./writer.ts";
import { StreamError, type StreamFailure } from "./stream_error.ts";
import { HeaderBlock } from "./header_block.ts";
import { type Clock, realClock } from "../../clock.ts";
import { errorText } from "../../errors.ts";
import { FencedError, type LeaseFence } from "../../lease_fence.ts";
import { ReceiveBuffer } from "./receive_buffer.ts";
import { ReadPacer, yieldTurn } from "./read_pacer.ts";
import type {
  ClientStream,
  Http2SessionOptions,
  RequestOptions,
  StreamResponse,
} from "./session_types.ts";

export type { ClientStream, Http2SessionOptions, RequestOptions, StreamResponse };

interface StreamState {
  id: number;
  sendWindow: number;
  recvWindow: number;
  recvUnacked: number;
  headers: HeaderField[] | undefined;
  data: ReceiveBuffer;
  maxDataBytes: number;
  body: Uint8Array;
  bodyOffset: number;
  bodySent: boolean;
  /** Checked right before each write of the request's frames; see {@link Http2Session.request}. */
  fence?: WriteFence;
  resolve: (r: StreamResponse) => void;
  reject: (e: StreamError | FencedError) => void;
}

interface PendingOpen {
  headers: readonly HeaderField[];
  body: Uint8Array;
  state: StreamState;
}

const DEFAULT_STREAM_WINDOW = 4 * 1024 * 1024;
const DEFAULT_CONNECTION_WINDOW = 16 * 1024 * 1024;
/** RFC 9113 §6.9.2: the initial window of every connection and stream. */
const PROTOCOL_INITIAL_WINDOW = 65_535;
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
const MAX_HEADER_BLOCK = 2 * MAX_HEADER_LIST_SIZE;
/**
 * CONTINUATION frames one header block may take: enough for the largest block sent in frames of
 * the default size (2 MiB / 16 KiB = 128). Counting frames, not only octets, bounds a flood of
 * empty CONTINUATION frames (CVE-2024-27316 class; nghttp2 allows 8 by default,
 * `NGHTTP2_DEFAULT_MAX_CONTINUATIONS`).
 */
const MAX_CONTINUATION_FRAMES = MAX_HEADER_BLOCK / DEFAULT_MAX_FRAME_SIZE;
/**
 * Frames we owe the peer (SETTINGS and PING ACKs, RST_STREAM) that may wait unsent before the
 * reader stops reading until the writer catches up: grpc-go's `maxQueuedTransportResponseFrames`,
 * 50 (v1.72; later releases make it configurable, default 100).
 */
const MAX_PENDING_RESPONSES = 50;

/**
 * One HTTP/2 connection. Create it with {@link Http2Session.start}; it reads until the peer
 * closes or {@link close} is called.
 */
export class Http2Session {
  readonly #conn: Deno.Conn;
  readonly #reader = new FrameReader(DEFAULT_MAX_FRAME_SIZE);
  readonly #hpack = new HpackDecoder({ maxHeaderListSize: MAX_HEADER_LIST_SIZE });
  readonly #streamWindow: number;
  readonly #connectionWindow: number;
  readonly #streams = new Map<number, StreamState>();
  #pending: PendingOpen[] = [];
  #nextStreamId = 1;
  #lastOpened = 0;

  #peerInitialWindow = PROTOCOL_INITIAL_WINDOW;
  #peerMaxFrameSize = DEFAULT_MAX_FRAME_SIZE;
  #peerMaxStreams = Infinity;
  #connSendWindow = PROTOCOL_INITIAL_WINDOW;
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

  private constructor(conn: Deno.Conn, options: Http2SessionOptions) {
    this.#conn = conn;
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
      [Setting.MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST_SIZE],
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
    return session;
  }

  /** False once GOAWAY arrived or the connection ended: no new streams. */
  get usable(): boolean {
    return !this.#closed && !this.#goneAway;
  }

  /** Streams open or waiting for a free slot. */
  get activeStreams(): number {
    return this.#streams.size + this.#pending.length;
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
      data: new ReceiveBuffer(maxDataBytes, sizeHint),
      maxDataBytes,
      body,
      bodyOffset: 0,
      bodySent: false,
      resolve,
      reject,
    };
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
      this.#pending.push({ headers, body, state });
      this.#openPending();
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
    const pendingIndex = this.#pending.findIndex((p) => p.state === state);
    if (pendingIndex >= 0) {
      this.#pending.splice(pendingIndex, 1);
      state.reject(new StreamError({ kind: "cancelled" }));
      return;
    }
    if (this.#streams.get(state.id) !== state) return;
    this.#send(rstStreamFrame(state.id, ErrorCode.CANCEL));
    this.#finish(state);
    state.reject(new StreamError({ kind: "cancelled" }));
  }

  #openPending(): void {
    while (this.#pending.length > 0 && this.#streams.size < this.#peerMaxStreams) {
      if (this.#nextStreamId > 2 ** 31 - 1) {
        // Stream ids exhausted: this connection takes no more streams.
        this.#goAwayLocally("stream ids exhausted");
        return;
      }
      const { headers, state } = this.#pending.shift()!;
      state.id = this.#nextStreamId;
      this.#nextStreamId += 2;
      this.#lastOpened = state.id;
      state.sendWindow = this.#peerInitialWindow;
      this.#streams.set(state.id, state);
      this.#sendHeaders(state.id, encodeHeaders(headers), state.body.length === 0, state.fence);
      if (state.body.length === 0) state.bodySent = true;
    }
    this.#flushData();
  }

  #sendHeaders(streamId: number, block: Uint8Array, endStream: boolean, fence?: WriteFence): void {
    const max = this.#peerMaxFrameSize;
    let offset = 0;
    let first = true;
    do {
      const part = block.subarray(offset, offset + max);
      offset += part.length;
      const last = offset >= block.length;
      const flags = (last ? Flag.END_HEADERS : 0) | (first && endStream ? Flag.END_STREAM : 0);
      this.#send(
        encodeFrame(first ? FrameType.HEADERS : FrameType.CONTINUATION, flags, streamId, part),
        fence,
      );
      first = false;
    } while (offset < block.length);
  }

  /** Sends request DATA as far as the windows and the frame size allow. */
  #flushData(): void {
    for (const s of this.#streams.values()) {
      while (!s.bodySent) {
        const remaining = s.body.length - s.bodyOffset;
        const n = Math.min(remaining, this.#connSendWindow, s.sendWindow, this.#peerMaxFrameSize);
        if (n <= 0 && remaining > 0) break;
        const chunk = s.body.subarray(s.bodyOffset, s.bodyOffset + n);
        s.bodyOffset += n;
        s.sendWindow -= n;
        this.#connSendWindow -= n;
        const end = s.bodyOffset >= s.body.length;
        this.#send(encodeFrame(FrameType.DATA, end ? Flag.END_STREAM : 0, s.id, chunk), s.fence);
        if (end) s.bodySent = true;
      }
      if (this.#connSendWindow <= 0) return;
    }
  }

  async #readLoop(): Promise<void> {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(buf);
        if (this.#closed) return;
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
        this.#send(goAwayFrame(this.#lastOpened, code, err.message));
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
    if (streamId % 2 === 0 || streamId > this.#lastOpened) {
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
    if (data.length > 0) {
      const size = s.data.length + data.length;
      if (size > s.maxDataBytes) {
        this.#send(rstStreamFrame(s.id, ErrorCode.CANCEL));
        this.#finish(s);
        s.reject(new StreamError({ kind: "too-large", size }));
        return;
      }
      // One array per stream, not one per frame: memory follows octets, not frames.
      s.data.append(data);
    }
    if (frame.flags & Flag.END_STREAM) {
      this.#complete(s, undefined, false);
      return;
    }
    s.recvUnacked += length;
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
      switch (id) {
        case Setting.INITIAL_WINDOW_SIZE: {
          if (value > MAX_WINDOW) {
            throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "initial window too large");
          }
          const delta = value - this.#peerInitialWindow;
          this.#peerInitialWindow = value;
          for (const s of this.#streams.values()) {
            s.sendWindow += delta;
            if (s.sendWindow > MAX_WINDOW) {
              // §6.9.2: a change that makes a window exceed the maximum is a connection error.
              throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow");
            }
          }
          break;
        }
        case Setting.MAX_FRAME_SIZE:
          if (value < DEFAULT_MAX_FRAME_SIZE || value > 16_777_215) {
            throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `invalid max frame size ${value}`);
          }
          this.#peerMaxFrameSize = value;
          break;
        case Setting.MAX_CONCURRENT_STREAMS:
          this.#peerMaxStreams = value;
          break;
        case Setting.ENABLE_PUSH:
          if (value > 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "invalid ENABLE_PUSH");
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
    this.#openPending();
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
    for (const p of this.#pending.splice(0)) {
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
      this.#connSendWindow += increment;
      if (this.#connSendWindow > MAX_WINDOW) {
        throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "connection window overflow");
      }
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
    this.#flushData();
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
    } else if (!this.#closed) {
      queueMicrotask(() => this.#openPending());
    }
  }

  /** Ends the session; with `flush`, frames queued (a GOAWAY) are written before closing. */
  #terminate(reason: string, flush = false): void {
    if (this.#closed) return;
    this.#closed = true;
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
    for (const p of this.#pending.splice(0)) p.state.reject(new StreamError(failure));
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
