/**
 * Frame-size mutation: an HTTP/2 byte stream re-framed at other sizes, carrying the same data.
 * Cut with the test kit's own frame parser (`testkit/h2/frame_codec.ts`), at sizes drawn from a
 * PRNG seeded with the stream's bytes (so a finding replays from its input alone):
 *
 * - a DATA frame (not padded, payload up to 16 384 octets) becomes DATA frames of 1 to 16 octets,
 *   sometimes up to 4 096, with empty DATA frames between them; END_STREAM on the last;
 * - a HEADERS frame with END_HEADERS (not padded, no priority block) becomes a HEADERS frame and
 *   CONTINUATION frames, at most 64 pieces (the client allows 128 CONTINUATION frames a block);
 * - every other frame, and a trailing partial frame, stays as it was.
 *
 * A receiver must give the same result for the stream and its re-framing (RFC 9113 §6.1, §6.10:
 * frame boundaries carry no meaning in DATA or in a header block).
 *
 * @module
 */

import { F, frame, FrameParser, T } from "../../testkit/h2/frame_codec.ts";
import { createRng } from "./rng.ts";
import { concatBytes } from "../../lib/bytes.ts";

const MAX_FRAME = 16_384;
const MAX_HEADER_PIECES = 64;

/** `stream` re-framed (see the module documentation); `salt` varies the cuts. */
export function reframe(stream: Uint8Array, salt: number): Uint8Array {
  let seed = salt | 0;
  for (const byte of stream) seed = Math.imul(seed ^ byte, 0x85ebca6b);
  const random = createRng(seed);
  const size = () => random.next() < 0.1 ? 1 + random.int(4096) : 1 + random.int(16);
  const parser = new FrameParser();
  parser.push(stream);
  const out: Uint8Array[] = [];
  for (let f = parser.next(); f !== undefined; f = parser.next()) {
    const body = f.payload;
    if (f.type === T.DATA && !(f.flags & F.PADDED) && body.length > 1 && body.length <= MAX_FRAME) {
      for (let at = 0; at < body.length;) {
        const piece = body.subarray(at, at + size());
        at += piece.length;
        const last = at >= body.length;
        out.push(frame(T.DATA, last ? f.flags : f.flags & ~F.END_STREAM, f.streamId, piece));
        if (!last && random.next() < 0.2) out.push(frame(T.DATA, 0, f.streamId));
      }
    } else if (
      f.type === T.HEADERS && (f.flags & F.END_HEADERS) && !(f.flags & (F.PADDED | F.PRIORITY)) &&
      body.length > 1 && body.length <= MAX_FRAME
    ) {
      const least = Math.ceil(body.length / MAX_HEADER_PIECES);
      let first = true;
      for (let at = 0; at < body.length;) {
        const piece = body.subarray(at, at + Math.max(least, size()));
        at += piece.length;
        const end = at >= body.length ? F.END_HEADERS : 0;
        out.push(
          first
            ? frame(T.HEADERS, (f.flags & ~F.END_HEADERS) | end, f.streamId, piece)
            : frame(T.CONTINUATION, end, f.streamId, piece),
        );
        first = false;
      }
    } else {
      out.push(frame(f.type, f.flags, f.streamId, body));
    }
  }
  const rest = parser.take(parser.buffered);
  if (rest !== undefined) out.push(rest);
  return concatBytes(out);
}
