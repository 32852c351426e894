/**
 * HTTP/2 frames for the test kit's peers, written from RFC 9113 §4.1 and §6 and independent of
 * the attacher's `lib/wire/http2/` code: a test that drives our client with frames built here
 * does not share a bug with the code under test.
 *
 * @module
 */

/** Frame types (RFC 9113 §6, §11.2). */
export const T = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;

/** Flags (RFC 9113 §6). */
export const F = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

/** SETTINGS identifiers (RFC 9113 §6.5.2). */
export const S = {
  HEADER_TABLE_SIZE: 1,
  ENABLE_PUSH: 2,
  MAX_CONCURRENT_STREAMS: 3,
  INITIAL_WINDOW_SIZE: 4,
  MAX_FRAME_SIZE: 5,
  MAX_HEADER_LIST_SIZE: 6,
} as const;

/** Error codes (RFC 9113 §7). */
export const E = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 11,
} as const;

/** The 24 octets a client starts with (RFC 9113 §3.4). */
export const PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/** A parsed frame. */
export interface RawFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Uint8Array;
}

function u32(value: number): number[] {
  return [(value >>> 24) & 0xff, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff];
}

/**
 * One frame, header and payload. `length` overrides the length field (to lie about it); the
 * stream id is written as given, reserved bit included.
 */
export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload: ArrayLike<number> = [],
  length: number = payload.length,
): Uint8Array {
  const out = new Uint8Array(9 + payload.length);
  out[0] = (length >>> 16) & 0xff;
  out[1] = (length >>> 8) & 0xff;
  out[2] = length & 0xff;
  out[3] = type;
  out[4] = flags;
  out.set(u32(streamId >>> 0), 5);
  out.set(payload, 9);
  return out;
}

/** A SETTINGS frame of `[id, value]` pairs. */
export function settings(pairs: readonly [number, number][] = []): Uint8Array {
  const payload: number[] = [];
  for (const [id, value] of pairs) payload.push((id >>> 8) & 0xff, id & 0xff, ...u32(value));
  return frame(T.SETTINGS, 0, 0, payload);
}

/** A SETTINGS ACK. */
export function settingsAck(): Uint8Array {
  return frame(T.SETTINGS, F.ACK, 0);
}

/** A PING (8 octets of `data`) or its ACK. */
export function ping(data = 0, ack = false): Uint8Array {
  return frame(T.PING, ack ? F.ACK : 0, 0, [0, 0, 0, 0, ...u32(data)]);
}

/** A WINDOW_UPDATE of `increment`. */
export function windowUpdate(streamId: number, increment: number): Uint8Array {
  return frame(T.WINDOW_UPDATE, 0, streamId, u32(increment));
}

/** A RST_STREAM with `code`. */
export function rstStream(streamId: number, code: number): Uint8Array {
  return frame(T.RST_STREAM, 0, streamId, u32(code));
}

/** A GOAWAY. */
export function goAway(lastStreamId: number, code: number, debug = ""): Uint8Array {
  return frame(T.GOAWAY, 0, 0, [...u32(lastStreamId), ...u32(code), ...utf8(debug)]);
}

/** A PRIORITY frame (RFC 9113 §6.3: 5 octets). */
export function priority(streamId: number, dependsOn = 0): Uint8Array {
  return frame(T.PRIORITY, 0, streamId, [...u32(dependsOn), 15]);
}

/** A DATA frame carrying a gRPC message: its 5-octet prefix and `message`. */
export function grpcData(streamId: number, message: ArrayLike<number>, flags = 0): Uint8Array {
  return frame(T.DATA, flags, streamId, [0, ...u32(message.length), ...Array.from(message)]);
}

/** UTF-8 octets of `text`. */
export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** Big-endian 32-bit integer at `offset`. */
export function readU32(b: Uint8Array, offset: number): number {
  return ((b[offset]! << 24) >>> 0) + (b[offset + 1]! << 16) + (b[offset + 2]! << 8) +
    b[offset + 3]!;
}

/** Cuts bytes into frames (any frame size accepted: this side only observes). */
export class FrameParser {
  #buf = new Uint8Array(0);

  /** Appends received bytes. */
  push(chunk: Uint8Array): void {
    const joined = new Uint8Array(this.#buf.length + chunk.length);
    joined.set(this.#buf);
    joined.set(chunk, this.#buf.length);
    this.#buf = joined;
  }

  /** Bytes received and not yet taken. */
  get buffered(): number {
    return this.#buf.length;
  }

  /** The length field of the next frame, once its 9-octet header is buffered. */
  get nextLength(): number | undefined {
    const b = this.#buf;
    return b.length < 9 ? undefined : (b[0]! << 16) | (b[1]! << 8) | b[2]!;
  }

  /** Takes `n` raw octets (the preface), or undefined when fewer are buffered. */
  take(n: number): Uint8Array | undefined {
    if (this.#buf.length < n) return undefined;
    const out = this.#buf.slice(0, n);
    this.#buf = this.#buf.slice(n);
    return out;
  }

  /** The next whole frame, or undefined. */
  next(): RawFrame | undefined {
    if (this.#buf.length < 9) return undefined;
    const b = this.#buf;
    const length = (b[0]! << 16) | (b[1]! << 8) | b[2]!;
    if (b.length < 9 + length) return undefined;
    const f: RawFrame = {
      type: b[3]!,
      flags: b[4]!,
      streamId: readU32(b, 5) & 0x7fffffff,
      payload: b.slice(9, 9 + length),
    };
    this.#buf = b.slice(9 + length);
    return f;
  }
}
