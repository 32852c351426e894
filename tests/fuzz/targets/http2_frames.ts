/**
 * Fuzz target `http2_frames`: the HTTP/2 frame reader (`lib/wire/http2/frames.ts`) fed a byte
 * stream cut into reads of any size, checked against the test kit's independent frame parser
 * (`testkit/h2/frame_codec.ts`), and the payload helpers the session uses on each frame
 * (`unpad`, `parseSettings`). The first input octet sets the read size.
 *
 * Only a `ConnectionError` may come out: FRAME_SIZE_ERROR for a frame above 16 384 octets (and
 * only then), or the helpers' errors for a bad payload. Every frame must be the reference's, and
 * the reader's memory stays its first 32 KiB buffer however the stream is cut.
 *
 * @module
 */

import {
  ConnectionError,
  ErrorCode,
  FrameReader,
  FrameType,
  parseSettings,
  unpad,
} from "../../../lib/wire/http2/frames.ts";
import { F, frame, FrameParser, settings, T } from "../../../testkit/h2/frame_codec.ts";
import type { FuzzTarget, Rng } from "../target.ts";

const MAX_FRAME = 16_384;
/** The reader's buffer: it holds one partial frame (16 393 octets) and one read (256) at most. */
const READER_BUFFER = 32 * 1024;

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The payload helpers on one frame; only ConnectionError may come out. */
function payload(type: number, flags: number, streamId: number, body: Uint8Array): void {
  const f = { type, flags, streamId, payload: body };
  try {
    if (type === FrameType.DATA || type === FrameType.HEADERS) {
      const data = unpad(f);
      if (data.length > body.length) throw new Error("unpad() grew the payload");
    } else if (type === FrameType.SETTINGS) {
      const pairs = parseSettings(body);
      if (pairs.length * 6 !== body.length) throw new Error("parseSettings() lost octets");
    }
  } catch (err) {
    if (!(err instanceof ConnectionError)) throw err;
  }
}

export const target: FuzzTarget = {
  name: "http2_frames",
  seeds(): Uint8Array[] {
    return [
      concat([Uint8Array.of(7), settings([[4, 65_535]]), frame(T.PING, 0, 0, new Uint8Array(8))]),
      concat([
        Uint8Array.of(0),
        frame(T.HEADERS, F.PADDED | F.PRIORITY | F.END_HEADERS, 1, [2, 0, 0, 0, 0, 9, 0x88, 0, 0]),
      ]),
      concat([
        Uint8Array.of(200),
        frame(T.DATA, F.PADDED, 1, [3, 1, 2, 0, 0, 0]),
        frame(T.DATA, 0, 1, [], 20_000),
      ]),
    ];
  },
  generate(rng: Rng): Uint8Array {
    const parts: Uint8Array[] = [Uint8Array.of(rng.int(256))];
    const count = 1 + rng.int(20);
    for (let i = 0; i < count; i++) {
      const type = rng.next() < 0.9 ? rng.int(10) : rng.int(256);
      const flags = rng.int(256);
      const stream = rng.next() < 0.3 ? 0 : rng.int(8) | (rng.next() < 0.05 ? 0x80000000 : 0);
      const length = rng.next() < 0.05 ? MAX_FRAME - 2 + rng.int(4) : rng.int(40);
      const body = rng.bytes(Math.min(length, 4096));
      parts.push(frame(type, flags, stream, body, rng.next() < 0.05 ? length : body.length));
    }
    return concat(parts);
  },
  run(input: Uint8Array): void {
    const step = 1 + (input[0] ?? 0);
    const bytes = input.subarray(1);
    const reader = new FrameReader();
    const reference = new FrameParser();
    reference.push(bytes);
    try {
      for (let pos = 0; pos < bytes.length; pos += step) {
        reader.push(bytes.subarray(pos, pos + step));
        // Less than one frame is ever left over: the reader's first buffer always suffices.
        if (reader.capacity > READER_BUFFER) {
          throw new Error(`the reader's buffer grew to ${reader.capacity} octets`);
        }
        for (let f = reader.next(); f !== undefined; f = reader.next()) {
          const r = reference.next();
          if (r === undefined) throw new Error("a frame the reference does not see");
          if (
            r.type !== f.type || r.flags !== f.flags || r.streamId !== f.streamId ||
            !same(r.payload, f.payload)
          ) {
            throw new Error(
              `frame differs: type ${f.type}/${r.type}, stream ${f.streamId}/${r.streamId}`,
            );
          }
          if (f.payload.length > MAX_FRAME) throw new Error("a frame above the limit was given");
          payload(f.type, f.flags, f.streamId, f.payload);
        }
      }
    } catch (err) {
      if (!(err instanceof ConnectionError)) throw err;
      const length = reference.nextLength;
      if (err.code !== ErrorCode.FRAME_SIZE_ERROR || length === undefined || length <= MAX_FRAME) {
        throw new Error(`unexpected ${err.message} (next length ${length})`);
      }
      return;
    }
    const left = reference.next();
    if (left !== undefined) throw new Error(`the reader missed a whole frame of type ${left.type}`);
  },
};
