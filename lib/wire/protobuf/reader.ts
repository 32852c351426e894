/**
 * Reading the protobuf wire format (https://protobuf.dev/programming-guides/encoding/): varints,
 * tags, length-delimited values and the skipping of a field by its wire type, with every bound
 * checked. Shared by the CSI codec (`../grpc/protowire.ts`) and the Kubernetes decoder
 * (`../kubernetes/`).
 *
 * Refused with {@link ProtoWireError}: a value running past the end of its message (a truncated
 * varint, a length past the end), a varint longer than 10 bytes, a tag or length above 2^32-1,
 * wire types 6 and 7, an end-group without its start, groups nested deeper than
 * {@link MAX_NESTING}.
 *
 * @module
 */

/** Malformed input bytes, or a value that cannot be encoded. */
export class ProtoWireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtoWireError";
  }
}

/** Wire type of varints. */
export const WIRE_VARINT = 0;
/** Wire type of 64-bit fixed values. */
export const WIRE_I64 = 1;
/** Wire type of length-delimited values (strings, bytes, messages, packed repeated). */
export const WIRE_LEN = 2;
/** Wire type of a group's start (deprecated, skipped). */
export const WIRE_SGROUP = 3;
/** Wire type of a group's end. */
export const WIRE_EGROUP = 4;
/** Wire type of 32-bit fixed values. */
export const WIRE_I32 = 5;

/**
 * A cursor over `buf[start, end)`. Every read checks the end; none reads past it.
 */
export class Reader {
  /** The next byte to read. */
  pos: number;
  /** A cursor at `start`, reading up to `end` (exclusive). */
  constructor(readonly buf: Uint8Array, start: number, public end: number) {
    this.pos = start;
  }

  /** A varint as a number when below 2^53, else as a bigint. */
  varint(): number | bigint {
    // One byte: tags of fields below 16, short lengths, small numbers and booleans.
    const at = this.pos;
    if (at < this.end) {
      const first = this.buf[at]!;
      if (first < 0x80) {
        this.pos = at + 1;
        return first;
      }
    }
    let value = 0;
    for (let i = 0; i < 7; i++) {
      const b = this.#byte();
      value += (b & 0x7f) * 2 ** (7 * i);
      if ((b & 0x80) === 0) return value;
    }
    let big = BigInt(value);
    for (let i = 7; i < 10; i++) {
      const b = this.#byte();
      big += BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) return BigInt.asUintN(64, big);
    }
    throw new ProtoWireError("varint longer than 10 bytes");
  }

  /** A varint that must fit a number (tags, lengths). */
  smallVarint(): number {
    const at = this.pos;
    if (at < this.end) {
      const first = this.buf[at]!;
      if (first < 0x80) {
        this.pos = at + 1;
        return first;
      }
    }
    const v = this.varint();
    if (typeof v === "bigint" || v > 0xffffffff) throw new ProtoWireError("varint too large");
    return v;
  }

  /**
   * Reads the length of a length-delimited value and returns the value's end; `pos` is then at
   * its start, and the caller moves it to the end. No tuple, for decoders that read many fields.
   */
  lengthEnd(): number {
    const length = this.smallVarint();
    const end = this.pos + length;
    if (end > this.end) throw new ProtoWireError("truncated length-delimited field");
    return end;
  }

  lengthDelimited(): [start: number, end: number] {
    const length = this.smallVarint();
    const start = this.pos;
    if (start + length > this.end) throw new ProtoWireError("truncated length-delimited field");
    this.pos += length;
    return [start, start + length];
  }

  /** Skips one field's value; `depth` is the nesting of the message holding it. */
  skip(wireType: number, number: number, depth: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_I64:
        this.#advance(8);
        return;
      case WIRE_LEN:
        this.pos = this.lengthEnd();
        return;
      case WIRE_I32:
        this.#advance(4);
        return;
      case WIRE_SGROUP:
        checkDepth(depth + 1);
        for (;;) {
          const tag = this.smallVarint();
          const wt = tag & 7;
          if (wt === WIRE_EGROUP) {
            if (tag >>> 3 !== number) throw new ProtoWireError("mismatched end group");
            return;
          }
          this.skip(wt, tag >>> 3, depth + 1);
        }
      default:
        throw new ProtoWireError(`invalid wire type ${wireType}`);
    }
  }

  #advance(n: number): void {
    if (this.pos + n > this.end) throw new ProtoWireError("truncated field");
    this.pos += n;
  }

  #byte(): number {
    if (this.pos >= this.end) throw new ProtoWireError("truncated varint");
    return this.buf[this.pos++]!;
  }
}

/**
 * How deep messages and groups may nest: protobuf's default recursion limit (C++ and Java
 * `kDefaultRecursionLimit`, 100; protobuf-go's `RecursionLimit` is 10 000). Deeper input is
 * refused with a {@link ProtoWireError} before the stack can run out.
 */
export const MAX_NESTING = 100;

export function checkDepth(depth: number): void {
  if (depth > MAX_NESTING) {
    throw new ProtoWireError(`messages or groups nested deeper than ${MAX_NESTING} levels`);
  }
}

/**
 * The most bytes {@link utf8Text} joins from single characters: V8 copies a concatenation shorter
 * than 13 characters into a flat string (`ConsString::kMinLength` in V8's `objects/string.h`),
 * but keeps a longer one as a tree of cons strings, 216 heap bytes for 20 characters against 40
 * flat, and the caches keep many such strings (names, uids, volume handles). The TextDecoder
 * reads longer text about 40 ns slower than joined pieces (100 against 60 ns for 10 to 68
 * bytes) and makes it flat.
 */
const MAX_JOINED_BYTES = 12;

/** The text of `buf[from, to)` as UTF-8 (malformed sequences become U+FFFD, as Go's JSON does). */
export function utf8Text(buf: Uint8Array, from: number, to: number): string {
  // Short ASCII (resource versions, short keys and values) by single characters, without a view
  // of the bytes or a TextDecoder call; anything longer through the TextDecoder, flat.
  if (to - from > MAX_JOINED_BYTES) return UTF8.decode(buf.subarray(from, to));
  let out = "";
  let i = from;
  if (i + 8 <= to) {
    const b0 = buf[i]!, b1 = buf[i + 1]!, b2 = buf[i + 2]!, b3 = buf[i + 3]!;
    const b4 = buf[i + 4]!, b5 = buf[i + 5]!, b6 = buf[i + 6]!, b7 = buf[i + 7]!;
    if (((b0 | b1 | b2 | b3 | b4 | b5 | b6 | b7) & 0x80) !== 0) {
      return UTF8.decode(buf.subarray(from, to));
    }
    out = String.fromCharCode(b0, b1, b2, b3, b4, b5, b6, b7);
    i += 8;
  }
  for (; i < to; i++) {
    const b = buf[i]!;
    if (b >= 0x80) return UTF8.decode(buf.subarray(from, to));
    out += String.fromCharCode(b);
  }
  return out;
}

const UTF8 = new TextDecoder();

/** A varint as a signed 64-bit value, as a number (exact up to 2^53, as `JSON.parse` reads). */
export function toInt64(v: number | bigint): number {
  return typeof v === "number" ? v : Number(BigInt.asIntN(64, v));
}

/** A varint as protobuf's `int32`: its low 32 bits, signed. */
export function toInt32(v: number | bigint): number {
  if (typeof v === "bigint") return Number(BigInt.asIntN(32, v));
  return v < 2 ** 31 ? v : (v % 2 ** 32) | 0;
}
