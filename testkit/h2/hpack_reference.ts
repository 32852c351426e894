/**
 * HPACK (RFC 7541) for the test kit, written from the RFC and independent of the attacher's
 * `lib/wire/http2/hpack.ts`: an encoder of literal fields without indexing (what a scripted peer
 * sends, §6.2.2), the integer and Huffman encodings for crafting blocks, and a reference decoder
 * that the fuzz target compares ours with.
 *
 * The reference decoder enforces the limits the attacher's decoder documents (integers up to
 * 2^32-1 in at most 5 continuation octets, table size updates up to the announced size, a header
 * list limit), so that both must agree on every block.
 *
 * @module
 */

import { EOS, HUFFMAN_CODES } from "./huffman_table.ts";

/** A header field as octet strings (one char per octet). */
export type Field = [name: string, value: string];

/** RFC 7541 §5.1: `value` with an N-bit prefix, the other bits of the first octet `flags`. */
export function encodeInteger(value: number, prefixBits: number, flags = 0): number[] {
  const limit = 2 ** prefixBits - 1;
  if (value < limit) return [flags | value];
  const out = [flags | limit];
  let rest = value - limit;
  while (rest >= 128) {
    out.push(128 + (rest % 128));
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/** The octets of a string of one char per octet. */
export function octets(text: string): number[] {
  return Array.from(text, (c) => c.charCodeAt(0) & 0xff);
}

/** A string literal (§5.2), plain or Huffman-coded. */
export function encodeString(text: string, huffman = false): number[] {
  const raw = huffman ? huffmanEncode(octets(text)) : octets(text);
  return [...encodeInteger(raw.length, 7, huffman ? 0x80 : 0), ...raw];
}

/** Literal header fields without indexing, new names (§6.2.2): touch no dynamic table. */
export function encodeLiterals(fields: readonly (readonly [string, string])[]): Uint8Array {
  const out: number[] = [];
  for (const [name, value] of fields) out.push(0x00, ...encodeString(name), ...encodeString(value));
  return Uint8Array.from(out);
}

/** Huffman-codes octets (§5.2), padded with the most significant bits of EOS. */
export function huffmanEncode(bytes: readonly number[]): number[] {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    const [code, length] = HUFFMAN_CODES[b]!;
    for (let i = length - 1; i >= 0; i--) {
      acc = (acc << 1) | ((code >>> i) & 1);
      if (++bits === 8) {
        out.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits > 0) out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) & 0xff);
  return out;
}

/** Codes by `length:code`, for the reference decoder. */
let decodeTable: Map<string, number> | undefined;

/** Decodes a Huffman string; throws on EOS, a code not in the table or bad padding. */
function huffmanDecodeReference(bytes: Uint8Array): string {
  const table = decodeTable ??= new Map(
    HUFFMAN_CODES.map(([code, length], symbol) => [`${length}:${code}`, symbol]),
  );
  let out = "";
  let code = 0;
  let length = 0;
  let ones = true;
  for (const byte of bytes) {
    for (let i = 7; i >= 0; i--) {
      const bit = (byte >> i) & 1;
      code = code * 2 + bit;
      length++;
      ones &&= bit === 1;
      const symbol = table.get(`${length}:${code}`);
      if (symbol !== undefined) {
        if (symbol === EOS) throw new ReferenceHpackError("EOS in a Huffman string");
        out += String.fromCharCode(symbol);
        code = 0;
        length = 0;
        ones = true;
      } else if (length > 30) {
        throw new ReferenceHpackError("no such Huffman code");
      }
    }
  }
  if (length > 7) throw new ReferenceHpackError("Huffman padding longer than 7 bits");
  if (!ones) throw new ReferenceHpackError("Huffman padding not all ones");
  return out;
}

/** A block the reference decoder refuses as malformed. */
export class ReferenceHpackError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReferenceHpackError";
  }
}

/** A well-formed block whose header list is over the limit. */
export class ReferenceListSizeError extends Error {
  constructor() {
    super("header list over the limit");
    this.name = "ReferenceListSizeError";
  }
}

/** RFC 7541 Appendix A, name and value by index 1–61. */
const STATIC: readonly Field[] = (
  ":authority|;:method|GET;:method|POST;:path|/;:path|/index.html;:scheme|http;:scheme|https;" +
  ":status|200;:status|204;:status|206;:status|304;:status|400;:status|404;:status|500;" +
  "accept-charset|;accept-encoding|gzip, deflate;accept-language|;accept-ranges|;accept|;" +
  "access-control-allow-origin|;age|;allow|;authorization|;cache-control|;" +
  "content-disposition|;content-encoding|;content-language|;content-length|;" +
  "content-location|;content-range|;content-type|;cookie|;date|;etag|;expect|;expires|;from|;" +
  "host|;if-match|;if-modified-since|;if-none-match|;if-range|;if-unmodified-since|;" +
  "last-modified|;link|;location|;max-forwards|;proxy-authenticate|;proxy-authorization|;" +
  "range|;referer|;refresh|;retry-after|;server|;set-cookie|;strict-transport-security|;" +
  "transfer-encoding|;user-agent|;vary|;via|;www-authenticate|"
).split(";").map((entry) => entry.split("|") as Field);

/** Options of {@link ReferenceHpackDecoder}. */
export interface ReferenceDecoderOptions {
  /** The announced SETTINGS_HEADER_TABLE_SIZE. Default 4096. */
  maxTableSize?: number;
  /** The announced SETTINGS_MAX_HEADER_LIST_SIZE. Default: none. */
  maxHeaderListSize?: number;
}

/** A straightforward HPACK decoder: one connection's decoding context. */
export class ReferenceHpackDecoder {
  /** Oldest first. */
  #table: Field[] = [];
  #capacity: number;
  readonly #announced: number;
  readonly #maxList: number;

  constructor(options: ReferenceDecoderOptions = {}) {
    this.#capacity = options.maxTableSize ?? 4096;
    this.#announced = this.#capacity;
    this.#maxList = options.maxHeaderListSize ?? Infinity;
  }

  /** Entries, newest first, and the table's size in octets. */
  get table(): { entries: Field[]; size: number } {
    const entries = [...this.#table].reverse();
    return { entries, size: entries.reduce((n, [a, b]) => n + a.length + b.length + 32, 0) };
  }

  /**
   * Decodes one block.
   *
   * @throws {ReferenceHpackError} on a malformed block.
   * @throws {ReferenceListSizeError} when the list is over the limit (the table still follows).
   */
  decode(block: Uint8Array): Field[] {
    let pos = 0;
    const need = () => {
      if (pos >= block.length) throw new ReferenceHpackError("truncated");
      return block[pos++]!;
    };
    const int = (prefixBits: number): number => {
      const limit = 2 ** prefixBits - 1;
      let value = BigInt(need() & limit);
      if (value < BigInt(limit)) return Number(value);
      for (let i = 0;; i++) {
        if (i === 5) throw new ReferenceHpackError("integer: more than 5 continuation octets");
        const b = need();
        value += BigInt(b & 127) << BigInt(7 * i);
        if (value > 0xffffffffn) throw new ReferenceHpackError("integer above 2^32-1");
        if (b < 128) return Number(value);
      }
    };
    const str = (): string => {
      const huffman = pos < block.length && (block[pos]! & 0x80) !== 0;
      const length = int(7);
      if (block.length - pos < length) throw new ReferenceHpackError("truncated string");
      const raw = block.slice(pos, pos + length);
      pos += length;
      return huffman ? huffmanDecodeReference(raw) : String.fromCharCode(...raw);
    };
    const entry = (index: number): Field => {
      if (index < 1) throw new ReferenceHpackError("index 0");
      if (index <= 61) return [...STATIC[index - 1]!];
      const dynamic = this.#table[this.#table.length - (index - 61)];
      if (dynamic === undefined) throw new ReferenceHpackError("index beyond the tables");
      return [...dynamic];
    };
    const out: Field[] = [];
    let list = 0;
    let fieldSeen = false;
    const emit = (f: Field) => {
      fieldSeen = true;
      list += f[0].length + f[1].length + 32;
      if (list <= this.#maxList) out.push(f);
    };
    while (pos < block.length) {
      const b = block[pos]!;
      if (b >= 0x80) {
        emit(entry(int(7)));
      } else if (b >= 0x40) {
        const index = int(6);
        const name = index === 0 ? str() : entry(index)[0];
        const f: Field = [name, str()];
        this.#insert(f);
        emit(f);
      } else if (b >= 0x20) {
        if (fieldSeen) throw new ReferenceHpackError("size update after a field");
        const size = int(5);
        if (size > this.#announced) throw new ReferenceHpackError("size update above the limit");
        this.#capacity = size;
        this.#shrink(0);
      } else {
        const index = int(4);
        const name = index === 0 ? str() : entry(index)[0];
        emit([name, str()]);
      }
    }
    if (list > this.#maxList) throw new ReferenceListSizeError();
    return out;
  }

  #insert(f: Field): void {
    const size = f[0].length + f[1].length + 32;
    if (size > this.#capacity) {
      this.#table = [];
      return;
    }
    this.#shrink(size);
    this.#table.push(f);
  }

  #shrink(room: number): void {
    let size = this.table.size;
    while (size + room > this.#capacity && this.#table.length > 0) {
      const [a, b] = this.#table.shift()!;
      size -= a.length + b.length + 32;
    }
  }
}
