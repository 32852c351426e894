/**
 * HTTP/2 frames (RFC 9113 §4, §6): the constants, a reader that cuts a byte stream into frames
 * whatever the read boundaries, and builders of the frames a client sends.
 *
 * Limits: a frame payload above {@link FrameReader.maxFrameSize} (our SETTINGS_MAX_FRAME_SIZE,
 * the protocol default 16 384 octets, as grpc-go's `http2MaxFrameLen` and nghttp2's default) is a
 * connection error FRAME_SIZE_ERROR (§4.2); the reader never holds more than one frame beyond
 * what it was given.
 *
 * Memory: the reader keeps one buffer, at least 32 KiB and at most the next power of two above
 * what one push and one partial frame need (128 KiB for reads of 64 KiB). It copies no payload:
 * {@link FrameReader.next} gives the same {@link Frame} object each time, its payload a view of
 * that buffer, so a frame costs one short-lived view whatever its size (a flood of empty or
 * one-octet frames allocates no more per frame than one of full frames).
 *
 * @module
 */

/** Frame types (RFC 9113 §6). */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

/** Frame flags. */
export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

/** SETTINGS parameters (RFC 9113 §6.5.2). */
export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** Error codes (RFC 9113 §7). */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

const ERROR_NAMES = [
  "NO_ERROR",
  "PROTOCOL_ERROR",
  "INTERNAL_ERROR",
  "FLOW_CONTROL_ERROR",
  "SETTINGS_TIMEOUT",
  "STREAM_CLOSED",
  "FRAME_SIZE_ERROR",
  "REFUSED_STREAM",
  "CANCEL",
  "COMPRESSION_ERROR",
  "CONNECT_ERROR",
  "ENHANCE_YOUR_CALM",
  "INADEQUATE_SECURITY",
  "HTTP_1_1_REQUIRED",
];

/** The name of an error code, e.g. `CANCEL`, or `unknown error code 0x2a`. */
export function errorCodeName(code: number): string {
  return ERROR_NAMES[code] ?? `unknown error code 0x${code.toString(16)}`;
}

/** The client connection preface (RFC 9113 §3.4). */
export const CLIENT_PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** The frame size every endpoint must accept (RFC 9113 §4.2). */
export const DEFAULT_MAX_FRAME_SIZE = 16_384;
/** The largest flow-control window (RFC 9113 §6.9.1). */
export const MAX_WINDOW = 2 ** 31 - 1;
/** Frame header length. */
export const FRAME_HEADER_LENGTH = 9;

/**
 * One received frame. From {@link FrameReader.next}, `payload` is a view of the reader's buffer,
 * valid until the next call of `next` or `push`: a receiver that keeps it must copy it.
 */
export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Uint8Array;
}

/** A violation of RFC 9113 that ends the connection (§5.4.1), with the code for GOAWAY. */
export class ConnectionError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
    this.name = "ConnectionError";
  }
}

/**
 * Cuts a byte stream into frames. Feed it what the socket gives ({@link push}) and take the
 * complete frames ({@link next}); a frame split over any number of reads comes out whole.
 */
export class FrameReader {
  #buf = new Uint8Array(32 * 1024);
  #start = 0;
  #end = 0;
  /** The one frame {@link next} fills in and gives. */
  readonly #frame: Frame = { type: 0, flags: 0, streamId: 0, payload: new Uint8Array(0) };
  /** Largest payload accepted (our SETTINGS_MAX_FRAME_SIZE). */
  maxFrameSize: number;

  constructor(maxFrameSize = DEFAULT_MAX_FRAME_SIZE) {
    this.maxFrameSize = maxFrameSize;
  }

  /** Appends received bytes. */
  push(chunk: Uint8Array): void {
    const needed = this.#end - this.#start + chunk.length;
    if (this.#end + chunk.length > this.#buf.length) {
      if (needed <= this.#buf.length) {
        this.#buf.copyWithin(0, this.#start, this.#end);
      } else {
        let size = this.#buf.length * 2;
        while (size < needed) size *= 2;
        const grown = new Uint8Array(size);
        grown.set(this.#buf.subarray(this.#start, this.#end));
        this.#buf = grown;
      }
      this.#end -= this.#start;
      this.#start = 0;
    }
    this.#buf.set(chunk, this.#end);
    this.#end += chunk.length;
  }

  /** Octets of the reader's buffer (what it holds, whatever it has been given). */
  get capacity(): number {
    return this.#buf.length;
  }

  /**
   * The next complete frame, or undefined when more bytes are needed. The same object comes
   * back each time, its payload a view of the reader's buffer: both are valid until the next
   * call of `next` or {@link push}.
   *
   * @throws {ConnectionError} FRAME_SIZE_ERROR for a frame above {@link maxFrameSize}.
   */
  next(): Frame | undefined {
    const available = this.#end - this.#start;
    if (available < FRAME_HEADER_LENGTH) return undefined;
    const b = this.#buf;
    const s = this.#start;
    const length = (b[s]! << 16) | (b[s + 1]! << 8) | b[s + 2]!;
    if (length > this.maxFrameSize) {
      throw new ConnectionError(
        ErrorCode.FRAME_SIZE_ERROR,
        `frame of ${length} bytes exceeds the maximum frame size ${this.maxFrameSize}`,
      );
    }
    if (available < FRAME_HEADER_LENGTH + length) return undefined;
    const frame = this.#frame;
    frame.type = b[s + 3]!;
    frame.flags = b[s + 4]!;
    frame.streamId = readUint31(b, s + 5);
    frame.payload = b.subarray(s + FRAME_HEADER_LENGTH, s + FRAME_HEADER_LENGTH + length);
    this.#start += FRAME_HEADER_LENGTH + length;
    if (this.#start === this.#end) this.#start = this.#end = 0;
    return frame;
  }
}

/** A 31-bit big-endian integer at `offset`, the reserved high bit ignored. */
export function readUint31(b: Uint8Array, offset: number): number {
  return ((b[offset]! & 0x7f) * 2 ** 24) + (b[offset + 1]! << 16) + (b[offset + 2]! << 8) +
    b[offset + 3]!;
}

/** A 32-bit big-endian unsigned integer at `offset`. */
export function readUint32(b: Uint8Array, offset: number): number {
  return (b[offset]! * 2 ** 24) + (b[offset + 1]! << 16) + (b[offset + 2]! << 8) + b[offset + 3]!;
}

function writeUint32(b: Uint8Array, offset: number, value: number): void {
  b[offset] = (value >>> 24) & 0xff;
  b[offset + 1] = (value >>> 16) & 0xff;
  b[offset + 2] = (value >>> 8) & 0xff;
  b[offset + 3] = value & 0xff;
}

/** Serializes one frame. */
export function encodeFrame(
  type: number,
  flags: number,
  streamId: number,
  payload: Uint8Array = new Uint8Array(0),
): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_LENGTH + payload.length);
  out[0] = (payload.length >>> 16) & 0xff;
  out[1] = (payload.length >>> 8) & 0xff;
  out[2] = payload.length & 0xff;
  out[3] = type;
  out[4] = flags;
  writeUint32(out, 5, streamId & 0x7fffffff);
  out.set(payload, FRAME_HEADER_LENGTH);
  return out;
}

/** A SETTINGS frame with the given [id, value] pairs, or an ACK when `ack`. */
export function settingsFrame(settings: readonly [number, number][], ack = false): Uint8Array {
  const payload = new Uint8Array(settings.length * 6);
  settings.forEach(([id, value], i) => {
    payload[i * 6] = (id >> 8) & 0xff;
    payload[i * 6 + 1] = id & 0xff;
    writeUint32(payload, i * 6 + 2, value);
  });
  return encodeFrame(FrameType.SETTINGS, ack ? Flag.ACK : 0, 0, payload);
}

/** Parses a SETTINGS payload. @throws {ConnectionError} FRAME_SIZE_ERROR on a bad length. */
export function parseSettings(payload: Uint8Array): [number, number][] {
  if (payload.length % 6 !== 0) {
    throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6");
  }
  const out: [number, number][] = [];
  for (let i = 0; i < payload.length; i += 6) {
    out.push([(payload[i]! << 8) | payload[i + 1]!, readUint32(payload, i + 2)]);
  }
  return out;
}

/** A WINDOW_UPDATE frame. */
export function windowUpdateFrame(streamId: number, increment: number): Uint8Array {
  const payload = new Uint8Array(4);
  writeUint32(payload, 0, increment);
  return encodeFrame(FrameType.WINDOW_UPDATE, 0, streamId, payload);
}

/** A RST_STREAM frame. */
export function rstStreamFrame(streamId: number, code: number): Uint8Array {
  const payload = new Uint8Array(4);
  writeUint32(payload, 0, code);
  return encodeFrame(FrameType.RST_STREAM, 0, streamId, payload);
}

/** A GOAWAY frame. */
export function goAwayFrame(lastStreamId: number, code: number, debug = ""): Uint8Array {
  const text = new TextEncoder().encode(debug);
  const payload = new Uint8Array(8 + text.length);
  writeUint32(payload, 0, lastStreamId);
  writeUint32(payload, 4, code);
  payload.set(text, 8);
  return encodeFrame(FrameType.GOAWAY, 0, 0, payload);
}

/**
 * The content of a DATA or HEADERS payload without padding (and, for HEADERS, without the
 * priority fields).
 *
 * @throws {ConnectionError} PROTOCOL_ERROR when the padding is longer than the payload.
 */
export function unpad(frame: Frame): Uint8Array {
  let start = 0;
  let end = frame.payload.length;
  if (frame.flags & Flag.PADDED) {
    if (end < 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "padded frame too short");
    end -= frame.payload[0]!;
    start = 1;
  }
  if (frame.type === FrameType.HEADERS && (frame.flags & Flag.PRIORITY)) start += 5;
  if (end < start) {
    throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "padding exceeds the frame payload");
  }
  return frame.payload.subarray(start, end);
}
