/**
 * Reading an HTTP/1.1 response (RFC 9112) from any source of bytes: the head (status line and
 * field lines, sections 4 and 5; interim 1xx answers skipped, section 15.2 of RFC 9110), how the
 * body ends (section 6.3), and the body itself, chunked (section 7.1) or not. `./transport.ts`
 * reads connections with it; the fuzz target reads bytes split at random with it.
 *
 * Every size a server controls is bounded; a response past a bound fails with a `too-large`
 * {@link TransportError}, a malformed one with a `protocol` one, a source that ends too early
 * with an `eof` one:
 *
 * | limit | here | Go `net/http` |
 * | --- | --- | --- |
 * | {@link MAX_HEAD_BYTES}: the heads of one answer, its 1xx heads included | 64 KiB | `Transport.MaxResponseHeaderBytes`, 10 MiB, 1xx heads included |
 * | {@link MAX_CHUNK_LINE_BYTES}: one chunk-size line with its extensions | 4 KiB | `internal/chunked.go` `maxLineLength`, 4096 |
 * | {@link MAX_CHUNK_OVERHEAD_BYTES}: chunk framing beyond 16 bytes per chunk plus twice its data | 16 KiB | `internal/chunked.go` `excess`, 16 KiB |
 * | {@link MAX_TRAILER_BYTES}: the trailer section | 64 KiB | read with the header reader |
 * | the body: the caller's `maxBytes` | set per request | none (client-go reads whole bodies) |
 *
 * What it refuses: a status line other than `HTTP/1.0` or `HTTP/1.1` with a three-digit code of
 * at least 100; `101 Switching Protocols` (nothing here upgrades); a field name that is not a
 * token (whitespace before the colon, obsolete line folding) or a value with a CR or NUL; a
 * `Transfer-Encoding` other than `chunked` (Go's transport supports nothing else either);
 * differing or non-numeric `Content-Length` values; chunk data not followed by exactly CRLF. A
 * head whose lines end with a bare LF never ends: it fails at {@link MAX_HEAD_BYTES} or at EOF.
 *
 * @module
 */

import { peerText } from "../../peer_text.ts";
import { TransportError } from "./errors.ts";
import { concatBytes } from "../../bytes.ts";

/** Most bytes of the heads of one answer, interim 1xx heads included (Go: 10 MiB). */
export const MAX_HEAD_BYTES = 64 * 1024;
/** Longest chunk-size line accepted, size and extensions (Go `maxLineLength`: 4096). */
export const MAX_CHUNK_LINE_BYTES = 4096;
/**
 * Most chunk framing (size lines, extensions, CRLFs) beyond an allowance of 16 bytes per chunk
 * plus twice the chunk's data (Go `internal/chunked.go`: 16 KiB, "chunked encoding contains too
 * much non-data"): one byte per chunk is fine, kilobytes of extensions per byte are not.
 */
export const MAX_CHUNK_OVERHEAD_BYTES = 16 * 1024;
/** Most bytes of the trailer section of a chunked body. */
export const MAX_TRAILER_BYTES = 64 * 1024;

/** A response's status line and header fields. */
export interface ResponseHead {
  status: number;
  /** `HTTP/1.0` or `HTTP/1.1`. */
  version: string;
  /** Lowercase name → values in order. */
  fields: Map<string, string[]>;
}

/** Header fields as `fetch`'s `Headers.get` reads them: a repeated name's values joined by ", ". */
export class ResponseHeaders {
  readonly #fields: Map<string, string[]>;

  /** Headers over `fields` (lowercase names). */
  constructor(fields: Map<string, string[]>) {
    this.#fields = fields;
  }

  /** The values of `name` (any case) joined by ", ", or null. */
  get(name: string): string | null {
    return this.#fields.get(name.toLowerCase())?.join(", ") ?? null;
  }
}

/** Where response bytes come from: a connection, or a test's pieces. */
export interface ByteSource {
  /** The next bytes (a view later reads leave intact), or null at the end. */
  read(): Promise<Uint8Array | null>;
  /** Puts `bytes` back in front of the next read. */
  unread(bytes: Uint8Array): void;
}

/** The end of the head: the empty line after the header fields. */
const HEAD_END = [13, 10, 13, 10];

/** The index just after the head's final CRLF CRLF in `bytes`, or -1 when it has not come yet. */
export function headEnd(bytes: Uint8Array, from = 0): number {
  for (let i = bytes.indexOf(13, Math.max(0, from - 3)); i >= 0; i = bytes.indexOf(13, i + 1)) {
    if (i + 3 >= bytes.length) return -1;
    if (bytes[i + 1] === HEAD_END[1] && bytes[i + 2] === HEAD_END[2] && bytes[i + 3] === 10) {
      return i + 4;
    }
  }
  return -1;
}

const LATIN1 = new TextDecoder("latin1");

/** Longest run of bytes turned into a string by one `String.fromCharCode` call. */
const CHAR_CODE_CHUNK = 4096;

/**
 * `bytes` decoded as `TextDecoder("latin1")` decodes them (WHATWG's windows-1252). An all-ASCII
 * input, as heads and chunk-size lines are, is turned into a string in JavaScript: the decoder is
 * a call into the runtime per use (0.8 % of busy CPU for the heads alone at N=20 000).
 */
export function latin1(bytes: Uint8Array): string {
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i]! >= 0x80) return LATIN1.decode(bytes);
  }
  if (bytes.length <= CHAR_CODE_CHUNK) {
    return String.fromCharCode.apply(null, bytes as unknown as number[]);
  }
  let out = "";
  for (let at = 0; at < bytes.length; at += CHAR_CODE_CHUNK) {
    const part = bytes.subarray(at, at + CHAR_CODE_CHUNK);
    out += String.fromCharCode.apply(null, part as unknown as number[]);
  }
  return out;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * The most characters of a status line the errors quote, and of a header name, transfer coding
 * or chunk-size line; control characters are escaped (`lib/peer_text.ts`).
 */
const QUOTED_LINE_MAX = 128;
const QUOTED_TOKEN_MAX = 40;

/** A `protocol` {@link TransportError} with `what` after the usual prefix. */
function malformed(what: string): TransportError {
  return new TransportError("protocol", `malformed HTTP response: ${what}`);
}

/**
 * The head in `bytes` (ending with CRLF CRLF).
 *
 * @throws {TransportError} (`protocol`) for a status line or field line that is not HTTP/1.x.
 */
export function parseHead(bytes: Uint8Array): ResponseHead {
  const lines = latin1(bytes).split("\r\n");
  const statusLine = /^(HTTP\/1\.[01]) ([0-9]{3})(?: [^\r\n\0]*)?$/.exec(lines[0]!);
  if (statusLine === null || Number(statusLine[2]) < 100) {
    throw malformed(`status line "${peerText(lines[0]!, QUOTED_LINE_MAX)}"`);
  }
  const fields = new Map<string, string[]>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) throw malformed("a header line without a name");
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) throw malformed(`header name "${peerText(name, QUOTED_TOKEN_MAX)}"`);
    const value = line.slice(colon + 1).trim();
    if (/[\r\n\0]/.test(value)) throw malformed(`a CR, LF or NUL in header "${name}"`);
    const key = name.toLowerCase();
    const had = fields.get(key);
    if (had === undefined) fields.set(key, [value]);
    else had.push(value);
  }
  return { version: statusLine[1]!, status: Number(statusLine[2]), fields };
}

/**
 * Reads the head of the final answer from `source`, skipping interim 1xx answers; the bytes after
 * it stay in `source`. Each piece is searched once (with the three bytes before it), so a head
 * sent one byte at a time costs no more than one sent whole.
 *
 * @throws {TransportError} `eof` when the source ends first, `too-large` past
 *   {@link MAX_HEAD_BYTES} (all heads of the answer together), `protocol` for a malformed head or
 *   a `101`.
 */
export async function readHead(source: ByteSource): Promise<ResponseHead> {
  let total = 0;
  let answered = false;
  for (;;) {
    const parts: Uint8Array[] = [];
    let length = 0;
    let tail = new Uint8Array(0);
    for (;;) {
      const chunk = await source.read();
      if (chunk === null) {
        throw new TransportError(
          "eof",
          `unexpected EOF: the server closed the connection ${
            answered || length > 0 ? "in the answer's head" : "before the answer"
          }`,
        );
      }
      if (chunk.length === 0) continue;
      // The first piece is searched as it is; later ones with the three bytes before them.
      const window = tail.length === 0
        ? chunk
        : concatBytes([tail, chunk], tail.length + chunk.length);
      const end = headEnd(window);
      if (end >= 0) {
        const used = end - tail.length;
        parts.push(chunk.subarray(0, used));
        length += used;
        total += used;
        source.unread(chunk.subarray(used));
        break;
      }
      parts.push(chunk);
      length += chunk.length;
      total += chunk.length;
      if (total > MAX_HEAD_BYTES) {
        throw new TransportError(
          "too-large",
          `malformed HTTP response: head over ${MAX_HEAD_BYTES} bytes`,
        );
      }
      tail = window.slice(Math.max(0, window.length - 3));
    }
    if (total > MAX_HEAD_BYTES) {
      throw new TransportError(
        "too-large",
        `malformed HTTP response: head over ${MAX_HEAD_BYTES} bytes`,
      );
    }
    const head = parseHead(concatBytes(parts, length));
    if (head.status === 101) throw malformed("101 Switching Protocols was not asked for");
    if (head.status >= 200) return head;
    answered = true;
  }
}

/** How the body of an answer ends (RFC 9112 section 6.3). */
export type Framing =
  /** `Content-Length` (or no body: 0). */
  | { kind: "length"; length: number }
  /** `Transfer-Encoding: chunked`. */
  | { kind: "chunked" }
  /** Neither: the body ends when the server closes the connection. */
  | { kind: "close" };

/** What {@link framingOf} found: the framing, and whether the connection may be reused after. */
export interface BodyFraming {
  framing: Framing;
  /**
   * False when the head makes the connection unfit for another request: both
   * `Transfer-Encoding` and `Content-Length` (RFC 9112 section 6.1: the sender may be smuggling
   * answers), or a body that ends at close.
   */
  reusable: boolean;
}

/**
 * How the body of an answer to `method` with `head` ends.
 *
 * @throws {TransportError} (`protocol`) for a transfer coding other than `chunked`, or
 *   `Content-Length` values that are not one number.
 */
export function framingOf(method: string, head: ResponseHead): BodyFraming {
  const { status, fields } = head;
  if (method === "HEAD" || status === 204 || status === 304) {
    return { framing: { kind: "length", length: 0 }, reusable: true };
  }
  const coding = fields.get("transfer-encoding");
  const lengths = fields.get("content-length");
  if (coding !== undefined) {
    const codings = coding.join(",").split(",").map((c) => c.trim().toLowerCase());
    if (codings.length !== 1 || codings[0] !== "chunked") {
      throw malformed(
        `unsupported transfer encoding "${peerText(coding.join(", "), QUOTED_TOKEN_MAX)}"`,
      );
    }
    return { framing: { kind: "chunked" }, reusable: lengths === undefined };
  }
  if (lengths !== undefined) {
    const values = new Set(lengths.join(",").split(",").map((v) => v.trim()));
    const [value] = values;
    if (values.size !== 1 || !/^[0-9]{1,15}$/.test(value!)) {
      throw malformed("invalid Content-Length");
    }
    return { framing: { kind: "length", length: Number(value) }, reusable: true };
  }
  return { framing: { kind: "close" }, reusable: false };
}

/** What a {@link ChunkedDecoder.push} found. */
export interface ChunkedOutput {
  /** Views of `input` holding chunk data, in order. */
  data: Uint8Array[];
  /** True when the last chunk and the trailer section have ended. */
  done: boolean;
  /** When done: the bytes of `input` after the body (belonging to no response). */
  rest?: Uint8Array;
}

/** Where the decoder is in the body. */
const enum State {
  /** Reading a chunk-size line (with extensions) up to its LF. */
  Size,
  /** Reading chunk data. */
  Data,
  /** Expecting the CR after chunk data. */
  DataCr,
  /** Expecting the LF after chunk data. */
  DataLf,
  /** Reading trailer lines up to the empty one. */
  Trailer,
  Done,
}

/**
 * Decodes a chunked body fed in pieces that may split anywhere. Chunk data is handed out as
 * views of the input, never copied; only the short size lines are kept as text.
 */
export class ChunkedDecoder {
  #state = State.Size;
  #line = "";
  #left = 0;
  /** Framing bytes beyond the allowance (Go's `excess`). */
  #excess = 0;
  #trailerBytes = 0;
  /** In {@link State.Trailer}: whether the current trailer line has any byte before its CRLF. */
  #lineHasText = false;

  /** True once the last chunk and the trailer section have ended. */
  get done(): boolean {
    return this.#state === State.Done;
  }

  /**
   * The data in `input` and whether the body ended there.
   *
   * @throws {TransportError} (`protocol`) for a malformed chunk framing or too much of it.
   */
  push(input: Uint8Array): ChunkedOutput {
    const data: Uint8Array[] = [];
    let i = 0;
    while (i < input.length) {
      switch (this.#state) {
        case State.Size: {
          const lf = input.indexOf(10, i);
          const end = lf < 0 ? input.length : lf;
          if (this.#line.length + (end - i) > MAX_CHUNK_LINE_BYTES) {
            throw new TransportError(
              "protocol",
              "malformed chunked encoding: chunk-size line too long",
            );
          }
          this.#line += latin1(input.subarray(i, end));
          i = end;
          if (lf < 0) break;
          i++;
          this.#sizeLine();
          break;
        }
        case State.Data: {
          const take = Math.min(this.#left, input.length - i);
          data.push(input.subarray(i, i + take));
          i += take;
          this.#left -= take;
          if (this.#left === 0) this.#state = State.DataCr;
          break;
        }
        case State.DataCr:
        case State.DataLf: {
          const want = this.#state === State.DataCr ? 13 : 10;
          if (input[i++] !== want) {
            throw new TransportError("protocol", "malformed chunked encoding: no CRLF after data");
          }
          this.#state = this.#state === State.DataCr ? State.DataLf : State.Size;
          break;
        }
        case State.Trailer: {
          const byte = input[i++];
          if (++this.#trailerBytes > MAX_TRAILER_BYTES) {
            throw new TransportError(
              "protocol",
              `malformed chunked encoding: trailer section over ${MAX_TRAILER_BYTES} bytes`,
            );
          }
          if (byte === 10) {
            if (!this.#lineHasText) {
              this.#state = State.Done;
              return { data, done: true, rest: input.subarray(i) };
            }
            this.#lineHasText = false;
          } else if (byte !== 13) {
            this.#lineHasText = true;
          }
          break;
        }
        case State.Done:
          return { data, done: true, rest: input.subarray(i) };
      }
    }
    return { data, done: this.#state === State.Done, rest: input.subarray(i) };
  }

  /** A complete chunk-size line was read: the size, and what it costs in framing. */
  #sizeLine(): void {
    const line = this.#line;
    this.#line = "";
    this.#excess += line.length + 1 + 2;
    const size = /^([0-9a-fA-F]{1,12})[ \t]*(?:;.*)?\r?$/.exec(line);
    if (size === null) {
      throw new TransportError(
        "protocol",
        `malformed chunked encoding: chunk size "${peerText(line, QUOTED_TOKEN_MAX)}"`,
      );
    }
    this.#left = parseInt(size[1]!, 16);
    this.#excess = Math.max(0, this.#excess - 16 - 2 * this.#left);
    if (this.#excess > MAX_CHUNK_OVERHEAD_BYTES) {
      throw new TransportError(
        "protocol",
        "malformed chunked encoding: chunked encoding contains too much non-data",
      );
    }
    if (this.#left === 0) {
      this.#state = State.Trailer;
      this.#lineHasText = false;
    } else {
      this.#state = State.Data;
    }
  }
}

/**
 * The body of one answer read from a {@link ByteSource}: data as views of what the source read
 * (no copy but for the chunk framing), at most `maxBytes` of it.
 */
export class BodyReader {
  readonly #source: ByteSource;
  readonly #framing: Framing;
  readonly #maxBytes: number;
  readonly #chunked: ChunkedDecoder | undefined;
  #left: number;
  #received = 0;
  #ended = false;
  #clean = false;

  /**
   * A reader of the body framed by `framing`.
   *
   * @throws {TransportError} (`too-large`) when a `Content-Length` is over `maxBytes`.
   */
  constructor(source: ByteSource, framing: Framing, maxBytes = Infinity) {
    this.#source = source;
    this.#framing = framing;
    this.#maxBytes = maxBytes;
    this.#chunked = framing.kind === "chunked" ? new ChunkedDecoder() : undefined;
    this.#left = framing.kind === "length" ? framing.length : 0;
    if (framing.kind === "length" && framing.length > maxBytes) throw this.#tooLarge();
    if (framing.kind === "length" && framing.length === 0) this.#end(true);
  }

  /** True once the body has ended (or failed). */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * True when the body ended exactly where its framing said, with nothing read past it: the
   * connection may carry another request (if the head allows it).
   */
  get clean(): boolean {
    return this.#clean;
  }

  /**
   * The next data of the body (at least one non-empty view), or null at its end.
   *
   * @throws {TransportError} `eof` when the source ends before the body, `too-large` past
   *   `maxBytes`, `protocol` for a malformed chunk framing; or what the source throws.
   */
  async next(): Promise<Uint8Array[] | null> {
    for (;;) {
      if (this.#ended) return null;
      const bytes = await this.#source.read();
      if (bytes === null) {
        if (this.#framing.kind !== "close") {
          this.#ended = true;
          throw new TransportError(
            "eof",
            "unexpected EOF: the server closed the connection in the middle of the body",
          );
        }
        this.#end(true);
        return null;
      }
      if (bytes.length === 0) continue;
      let data: Uint8Array[];
      if (this.#chunked !== undefined) {
        let out: ChunkedOutput;
        try {
          out = this.#chunked.push(bytes);
        } catch (err) {
          this.#ended = true;
          throw err;
        }
        data = out.data;
        if (out.done) this.#end(out.rest === undefined || out.rest.length === 0);
      } else if (this.#framing.kind === "length") {
        const take = Math.min(this.#left, bytes.length);
        this.#left -= take;
        data = [bytes.subarray(0, take)];
        // Bytes past the end belong to no request: the connection is not reused.
        if (this.#left === 0) this.#end(take === bytes.length);
      } else {
        data = [bytes];
      }
      let empty = 0;
      for (const part of data) {
        this.#received += part.length;
        if (part.length === 0) empty++;
      }
      if (this.#received > this.#maxBytes) {
        this.#ended = true;
        this.#clean = false;
        throw this.#tooLarge();
      }
      if (empty === 0 && data.length > 0) return data;
      if (empty < data.length) return data.filter((part) => part.length > 0);
    }
  }

  #tooLarge(): TransportError {
    return new TransportError("too-large", `the answer's body is over ${this.#maxBytes} bytes`);
  }

  #end(clean: boolean): void {
    this.#ended = true;
    this.#clean = clean;
  }
}
