/**
 * The sending side of an `Http2Session` (RFC 9113): request streams opened within the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS (§5.1.2), the others waiting for a slot; their HEADERS split
 * into CONTINUATION frames at the peer's SETTINGS_MAX_FRAME_SIZE (§4.2, §6.10); their DATA sent
 * as far as the connection's and the stream's send windows allow (§6.9), and the windows as the
 * peer's SETTINGS_INITIAL_WINDOW_SIZE (§6.9.2) and WINDOW_UPDATE frames (§6.9.1) change them.
 * Like Go's `http2.ClientConn` write path: the session reads frames and tells this what the peer
 * allows; this writes.
 *
 * @module
 */

import {
  ConnectionError,
  DEFAULT_MAX_FRAME_SIZE,
  encodeFrame,
  ErrorCode,
  Flag,
  FrameType,
  MAX_WINDOW,
} from "./frames.ts";
import { encodeHeaders } from "./hpack.ts";
import type { WriteFence } from "./writer.ts";
import type { PendingOpen, StreamState } from "./stream_state.ts";
import { PROTOCOL_INITIAL_WINDOW } from "./session_limits.ts";

/** What {@link OutboundStreams} writes through and tells its session. */
export interface OutboundDeps {
  /** The session's open streams by id, shared: opened here, finished by the session. */
  streams: Map<number, StreamState>;
  /** Writes one frame (or the preface), under the stream's fence when it has one. */
  send(bytes: Uint8Array, fence?: WriteFence): void;
  /** Stream ids ran out: the session takes no more streams. */
  exhausted(): void;
}

/** The streams a session opens and the DATA it sends on them; see the module doc. */
export class OutboundStreams {
  readonly #streams: Map<number, StreamState>;
  readonly #send: (bytes: Uint8Array, fence?: WriteFence) => void;
  readonly #exhausted: () => void;
  /** Requests waiting for a stream slot, oldest first. */
  #pending: PendingOpen[] = [];
  #nextStreamId = 1;
  #lastOpened = 0;
  #peerInitialWindow = PROTOCOL_INITIAL_WINDOW;
  #peerMaxFrameSize = DEFAULT_MAX_FRAME_SIZE;
  #peerMaxStreams = Infinity;
  #connSendWindow = PROTOCOL_INITIAL_WINDOW;

  constructor(deps: OutboundDeps) {
    this.#streams = deps.streams;
    this.#send = deps.send;
    this.#exhausted = deps.exhausted;
  }

  /** The id of the last stream opened; 0 before the first. */
  get lastOpened(): number {
    return this.#lastOpened;
  }

  /** The peer's SETTINGS_MAX_CONCURRENT_STREAMS; unlimited until it says. */
  get peerMaxStreams(): number {
    return this.#peerMaxStreams;
  }

  /** Requests waiting for a slot. */
  get pendingCount(): number {
    return this.#pending.length;
  }

  /** Queues a request and opens what the peer's stream limit allows. */
  add(open: PendingOpen): void {
    this.#pending.push(open);
    this.openPending();
  }

  /** Takes a request still waiting for a slot out of the queue; false when it was not there. */
  unqueue(state: StreamState): boolean {
    const index = this.#pending.findIndex((p) => p.state === state);
    if (index < 0) return false;
    this.#pending.splice(index, 1);
    return true;
  }

  /** Empties the queue and returns what waited in it. */
  takePending(): PendingOpen[] {
    return this.#pending.splice(0);
  }

  /** Opens waiting requests while the peer's stream limit allows, then sends their DATA. */
  openPending(): void {
    while (this.#pending.length > 0 && this.#streams.size < this.#peerMaxStreams) {
      if (this.#nextStreamId > 2 ** 31 - 1) {
        // Stream ids exhausted: this connection takes no more streams.
        this.#exhausted();
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
    this.flushData();
  }

  /** Sends request DATA as far as the windows and the frame size allow. */
  flushData(): void {
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

  /**
   * The peer's SETTINGS_INITIAL_WINDOW_SIZE: every open stream's window moves by the change.
   * @throws {ConnectionError} FLOW_CONTROL_ERROR when a window would exceed 2^31-1 (§6.9.2).
   */
  setInitialWindow(value: number): void {
    const delta = value - this.#peerInitialWindow;
    this.#peerInitialWindow = value;
    for (const s of this.#streams.values()) {
      s.sendWindow += delta;
      if (s.sendWindow > MAX_WINDOW) {
        // §6.9.2: a change that makes a window exceed the maximum is a connection error.
        throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow");
      }
    }
  }

  /** The peer's SETTINGS_MAX_FRAME_SIZE (already checked). */
  setMaxFrameSize(value: number): void {
    this.#peerMaxFrameSize = value;
  }

  /** The peer's SETTINGS_MAX_CONCURRENT_STREAMS. */
  setMaxStreams(value: number): void {
    this.#peerMaxStreams = value;
  }

  /**
   * A WINDOW_UPDATE of the connection (its increment checked non-zero).
   * @throws {ConnectionError} FLOW_CONTROL_ERROR when the window would exceed 2^31-1.
   */
  connectionWindowUpdate(increment: number): void {
    this.#connSendWindow += increment;
    if (this.#connSendWindow > MAX_WINDOW) {
      throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "connection window overflow");
    }
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
}
