/**
 * HPACK, header compression for HTTP/2 (RFC 7541): a complete decoder (static and dynamic table,
 * §2.3; integers, §5.1; Huffman-coded strings, §5.2 and Appendix B; every field representation and
 * the table size update, §6) and a simple encoder that never indexes and never Huffman-codes,
 * which every decoder must accept (RFC 7541 §6.2.2, §5.2).
 *
 * Refused with {@link HpackError} (a connection error COMPRESSION_ERROR for the session): a
 * truncated block, index 0 or an index beyond the tables, a bad Huffman code, EOS or bad padding
 * (§5.2), a table size update after a field or above the limit we announced (§4.2, §6.3; the
 * protocol default SETTINGS_HEADER_TABLE_SIZE, 4 096 octets, which we never change).
 *
 * Limits:
 * - integers (§5.1) up to 2^32-1 in at most 5 continuation octets, checked before each octet is
 *   added, so no value can overflow (nghttp2 refuses above UINT32_MAX; Go's hpack past 63 bits);
 * - the dynamic table at most the announced size, every entry counted as its octets plus 32
 *   (§4.1) and the oldest evicted first (§4.4);
 * - the decoded header list at most {@link HpackDecoderOptions.maxHeaderListSize}: beyond it the
 *   block is still decoded to its end, then refused with {@link HeaderListSizeError} (as Go's
 *   `Framer.readMetaFrame` keeps decoding with emitting disabled and marks the list truncated).
 *
 * Header names and values are kept as "binary strings": one character per octet (latin1), so
 * sizes are octet counts as RFC 7541 §4.1 counts them. gRPC headers are ASCII.
 *
 * @module
 */

/** A header field: name (lower case in HTTP/2) and value. */
export type HeaderField = readonly [name: string, value: string];

/** A malformed header block: HTTP/2 treats it as a connection error COMPRESSION_ERROR. */
export class HpackError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HpackError";
  }
}

/** RFC 7541 Appendix A: the static table, index 1 to 61. */
const STATIC_TABLE: readonly HeaderField[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

/**
 * RFC 7541 Appendix B: the code length in bits of each symbol 0–255 and EOS (256). The code is
 * canonical (codes of one length are consecutive, in symbol order, after every shorter code), so
 * the lengths determine the codes; `hpack_test.ts` checks every code against the RFC's table.
 */
const HUFFMAN_LENGTHS = [
  13,
  23,
  28,
  28,
  28,
  28,
  28,
  28,
  28,
  24,
  30,
  28,
  28,
  30,
  28,
  28,
  28,
  28,
  28,
  28,
  28,
  28,
  30,
  28,
  28,
  28,
  28,
  28,
  28,
  28,
  28,
  28,
  6,
  10,
  10,
  12,
  13,
  6,
  8,
  11,
  10,
  10,
  8,
  11,
  8,
  6,
  6,
  6,
  5,
  5,
  5,
  6,
  6,
  6,
  6,
  6,
  6,
  6,
  7,
  8,
  15,
  6,
  12,
  10,
  13,
  6,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  7,
  8,
  7,
  8,
  13,
  19,
  13,
  14,
  6,
  15,
  5,
  6,
  5,
  6,
  5,
  6,
  6,
  6,
  5,
  7,
  7,
  6,
  6,
  6,
  5,
  6,
  7,
  6,
  5,
  5,
  6,
  7,
  7,
  7,
  7,
  7,
  15,
  11,
  14,
  13,
  28,
  20,
  22,
  20,
  20,
  22,
  22,
  22,
  23,
  22,
  23,
  23,
  23,
  23,
  23,
  24,
  23,
  24,
  24,
  22,
  23,
  24,
  23,
  23,
  23,
  23,
  21,
  22,
  23,
  22,
  23,
  23,
  24,
  22,
  21,
  20,
  22,
  22,
  23,
  23,
  21,
  23,
  22,
  22,
  24,
  21,
  22,
  23,
  23,
  21,
  21,
  22,
  21,
  23,
  22,
  23,
  23,
  20,
  22,
  22,
  22,
  23,
  22,
  22,
  23,
  26,
  26,
  20,
  19,
  22,
  23,
  22,
  25,
  26,
  26,
  26,
  27,
  27,
  26,
  24,
  25,
  19,
  21,
  26,
  27,
  27,
  26,
  27,
  24,
  21,
  21,
  26,
  26,
  28,
  27,
  27,
  27,
  20,
  24,
  20,
  21,
  22,
  21,
  21,
  23,
  22,
  22,
  25,
  25,
  24,
  24,
  26,
  23,
  26,
  27,
  26,
  26,
  27,
  27,
  27,
  27,
  27,
  28,
  27,
  27,
  27,
  27,
  27,
  26,
  30,
];

const EOS = 256;
const MAX_CODE_LENGTH = 30;

/** Canonical decoding tables, built on first use. */
interface HuffmanTables {
  /** Symbols in code order. */
  symbols: Uint16Array;
  /** Per length: the first code of that length, its index in `symbols`, and how many. */
  firstCode: Int32Array;
  firstIndex: Int32Array;
  count: Int32Array;
}

let huffmanTables: HuffmanTables | undefined;

function buildHuffmanTables(): HuffmanTables {
  const count = new Int32Array(MAX_CODE_LENGTH + 1);
  for (const len of HUFFMAN_LENGTHS) count[len]!++;
  const symbols = new Uint16Array(HUFFMAN_LENGTHS.length);
  const firstCode = new Int32Array(MAX_CODE_LENGTH + 1);
  const firstIndex = new Int32Array(MAX_CODE_LENGTH + 1);
  let code = 0;
  let index = 0;
  for (let len = 1; len <= MAX_CODE_LENGTH; len++) {
    firstCode[len] = code;
    firstIndex[len] = index;
    for (let sym = 0; sym < HUFFMAN_LENGTHS.length; sym++) {
      if (HUFFMAN_LENGTHS[sym] === len) symbols[index++] = sym;
    }
    code = (code + count[len]!) * 2;
  }
  return { symbols, firstCode, firstIndex, count };
}

/**
 * Decodes a Huffman-coded string (RFC 7541 §5.2) into a binary string.
 *
 * @throws {HpackError} on the EOS symbol, padding longer than 7 bits or not all ones, or a code
 *   that is not in the table.
 */
function huffmanDecode(bytes: Uint8Array): string {
  const t = huffmanTables ??= buildHuffmanTables();
  let out = "";
  let code = 0;
  let len = 0;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      code = code * 2 + ((byte >> bit) & 1);
      len++;
      const offset = code - t.firstCode[len]!;
      if (offset >= 0 && offset < t.count[len]!) {
        const symbol = t.symbols[t.firstIndex[len]! + offset]!;
        if (symbol === EOS) throw new HpackError("Huffman-coded string contains EOS");
        out += String.fromCharCode(symbol);
        code = 0;
        len = 0;
      } else if (len >= MAX_CODE_LENGTH) {
        throw new HpackError("invalid Huffman code");
      }
    }
  }
  // What is left must be a prefix of EOS (all ones), shorter than a byte.
  if (len > 7) throw new HpackError("Huffman padding longer than 7 bits");
  if (code !== 2 ** len - 1) throw new HpackError("Huffman padding is not a prefix of EOS");
  return out;
}

/**
 * The largest integer accepted (RFC 7541 §5.1: "Integer encodings that exceed implementation
 * limits -- in value or octet length -- MUST be treated as decoding errors"): 2^32-1, as nghttp2
 * (`lib/nghttp2_hd.c` decode_length refuses a value above UINT32_MAX). Every size HPACK carries
 * (indexes, string lengths, table sizes) is far below it.
 */
const MAX_INTEGER = 2 ** 32 - 1;

/**
 * Continuation octets of an integer: 5 carry 35 bits, enough for {@link MAX_INTEGER} written
 * with padding zeros. Go's hpack stops at 63 bits of shift (`readVarInt`, errVarintOverflow).
 */
const MAX_INTEGER_OCTETS = 5;

/** Reads a header block: integers, string literals, octets. */
class Reader {
  pos = 0;
  constructor(readonly bytes: Uint8Array) {}

  get done(): boolean {
    return this.pos >= this.bytes.length;
  }

  /**
   * An integer with an N-bit prefix (RFC 7541 §5.1), refused above {@link MAX_INTEGER} or past
   * {@link MAX_INTEGER_OCTETS} continuation octets, before anything can overflow.
   */
  integer(prefixBits: number): number {
    const max = (1 << prefixBits) - 1;
    let value = this.byte() & max;
    if (value < max) return value;
    for (let octets = 0;; octets++) {
      if (octets === MAX_INTEGER_OCTETS) {
        throw new HpackError(
          `integer too large: more than ${MAX_INTEGER_OCTETS} continuation octets`,
        );
      }
      const b = this.byte();
      value += (b & 0x7f) * 2 ** (7 * octets);
      if (value > MAX_INTEGER) throw new HpackError(`integer too large: above ${MAX_INTEGER}`);
      if ((b & 0x80) === 0) return value;
    }
  }

  string(): string {
    const huffman = (this.peek() & 0x80) !== 0;
    const length = this.integer(7);
    if (this.pos + length > this.bytes.length) throw new HpackError("truncated string literal");
    const raw = this.bytes.subarray(this.pos, this.pos + length);
    this.pos += length;
    return huffman ? huffmanDecode(raw) : binaryString(raw);
  }

  peek(): number {
    if (this.pos >= this.bytes.length) throw new HpackError("truncated header block");
    return this.bytes[this.pos]!;
  }

  byte(): number {
    const b = this.peek();
    this.pos++;
    return b;
  }
}

/** Octets to a binary string, one character per octet. */
function binaryString(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    out += String.fromCharCode(...bytes.subarray(i, i + 4096));
  }
  return out;
}

/** RFC 7541 §4.1: an entry's size is its name and value octets plus 32. */
function entrySize(name: string, value: string): number {
  return name.length + value.length + 32;
}

/**
 * A header list larger than the decoder's {@link HpackDecoderOptions.maxHeaderListSize}. The
 * block was decoded to its end, so the dynamic table is intact and the connection can go on:
 * HTTP/2 fails only the stream (grpc-go: Internal "peer header list size exceeded limit").
 */
export class HeaderListSizeError extends Error {
  constructor(readonly limit: number) {
    super(`header list larger than ${limit} octets`);
    this.name = "HeaderListSizeError";
  }
}

/** Options of {@link HpackDecoder}. */
export interface HpackDecoderOptions {
  /**
   * SETTINGS_HEADER_TABLE_SIZE we announced: the initial size of the dynamic table and the
   * limit of table size updates. Default 4 096, the protocol's.
   */
  maxTableSize?: number;
  /**
   * SETTINGS_MAX_HEADER_LIST_SIZE we announced: a block whose fields add up to more (each name
   * and value plus 32, RFC 9113 §6.5.2) fails with {@link HeaderListSizeError}. Default: no limit.
   */
  maxHeaderListSize?: number;
}

/**
 * The decoding context of one connection: the dynamic table persists across header blocks, so
 * every block received must be decoded, in order, even for streams nobody waits for.
 */
export class HpackDecoder {
  /** Newest first. */
  #dynamic: HeaderField[] = [];
  #size = 0;
  #maxSize: number;
  /** SETTINGS_HEADER_TABLE_SIZE we announced: the limit of table size updates. */
  readonly #limit: number;
  readonly #maxListSize: number;

  constructor(options: HpackDecoderOptions = {}) {
    this.#maxSize = options.maxTableSize ?? 4096;
    this.#limit = this.#maxSize;
    this.#maxListSize = options.maxHeaderListSize ?? Infinity;
  }

  /**
   * Decodes one complete header block. Fields beyond the header list limit are decoded (the
   * dynamic table must follow every block) but not kept.
   *
   * @throws {HpackError} when the block is malformed (truncated, bad index, an integer out of
   *   range, table size update above the limit or after a field, bad Huffman code): a
   *   connection error COMPRESSION_ERROR.
   * @throws {HeaderListSizeError} when the block is well formed but its fields exceed the
   *   header list limit.
   */
  decode(block: Uint8Array): HeaderField[] {
    const r = new Reader(block);
    const fields: HeaderField[] = [];
    let listSize = 0;
    let sawField = false;
    const keep = (field: HeaderField) => {
      sawField = true;
      listSize += entrySize(field[0], field[1]);
      if (listSize <= this.#maxListSize) fields.push(field);
    };
    while (!r.done) {
      const first = r.peek();
      if (first & 0x80) {
        // §6.1 indexed header field.
        keep(this.#lookup(r.integer(7)));
      } else if (first & 0x40) {
        // §6.2.1 literal with incremental indexing.
        const field = this.#literal(r, 6);
        this.#add(field);
        keep(field);
      } else if (first & 0x20) {
        // §6.3 dynamic table size update: only at the start of a block (§4.2).
        if (sawField) throw new HpackError("table size update after a header field");
        const size = r.integer(5);
        if (size > this.#limit) {
          throw new HpackError(`table size update ${size} above the limit ${this.#limit}`);
        }
        this.#maxSize = size;
        this.#evict(0);
      } else {
        // §6.2.2 without indexing, §6.2.3 never indexed: both 4-bit prefixes.
        keep(this.#literal(r, 4));
      }
    }
    if (listSize > this.#maxListSize) throw new HeaderListSizeError(this.#maxListSize);
    return fields;
  }

  #literal(r: Reader, prefixBits: number): HeaderField {
    const index = r.integer(prefixBits);
    const name = index === 0 ? r.string() : this.#lookup(index)[0];
    return [name, r.string()];
  }

  #lookup(index: number): HeaderField {
    if (index === 0) throw new HpackError("header index 0");
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]!;
    const entry = this.#dynamic[index - STATIC_TABLE.length - 1];
    if (entry === undefined) throw new HpackError(`header index ${index} out of range`);
    return entry;
  }

  #add(field: HeaderField): void {
    const size = entrySize(field[0], field[1]);
    if (size > this.#maxSize) {
      // §4.4: an entry larger than the table empties it and is not added.
      this.#dynamic = [];
      this.#size = 0;
      return;
    }
    this.#evict(size);
    this.#dynamic.unshift(field);
    this.#size += size;
  }

  /** Evicts the oldest entries until `room` more octets fit. */
  #evict(room: number): void {
    while (this.#size + room > this.#maxSize && this.#dynamic.length > 0) {
      const old = this.#dynamic.pop()!;
      this.#size -= entrySize(old[0], old[1]);
    }
  }
}

function staticIndex(name: string, value: string): { full: number; name: number } {
  let nameIndex = 0;
  for (let i = 0; i < STATIC_TABLE.length; i++) {
    const [n, v] = STATIC_TABLE[i]!;
    if (n !== name) continue;
    if (v === value) return { full: i + 1, name: i + 1 };
    if (nameIndex === 0) nameIndex = i + 1;
  }
  return { full: 0, name: nameIndex };
}

function pushInteger(out: number[], value: number, prefixBits: number, first: number): void {
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    out.push(first | value);
    return;
  }
  out.push(first | max);
  value -= max;
  while (value >= 0x80) {
    out.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  out.push(value);
}

function pushString(out: number[], s: string): void {
  pushInteger(out, s.length, 7, 0);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff) throw new RangeError("header text must be latin1");
    out.push(c);
  }
}

/**
 * Encodes header fields without touching any dynamic table: a full static-table match as an
 * indexed field (§6.1), anything else as a literal without indexing (§6.2.2), the name indexed
 * when the static table has it. Strings are not Huffman-coded.
 *
 * @throws {RangeError} for a character above U+00FF.
 */
export function encodeHeaders(fields: readonly HeaderField[]): Uint8Array {
  const out: number[] = [];
  for (const [name, value] of fields) {
    const index = staticIndex(name, value);
    if (index.full !== 0) {
      pushInteger(out, index.full, 7, 0x80);
      continue;
    }
    pushInteger(out, index.name, 4, 0x00);
    if (index.name === 0) pushString(out, name);
    pushString(out, value);
  }
  return new Uint8Array(out);
}
