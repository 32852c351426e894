/**
 * The parts of an HTTP/1.1 response that `./transport.ts` reads: the head (status line and
 * header fields, RFC 9112 sections 4 and 5) and the chunked transfer coding (RFC 9112 section
 * 7.1). Pure functions over bytes, so that every split of the input can be tested.
 *
 * @module
 */

import { TransportError } from "./errors.ts";

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

  constructor(fields: Map<string, string[]>) {
    this.#fields = fields;
  }

  get(name: string): string | null {
    return this.#fields.get(name.toLowerCase())?.join(", ") ?? null;
  }
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

/**
 * The head in `bytes` (ending with CRLF CRLF).
 *
 * @throws {TransportError} (`protocol`) for a status line or field line that is not HTTP/1.x.
 */
export function parseHead(bytes: Uint8Array): ResponseHead {
  const lines = LATIN1.decode(bytes).split("\r\n");
  const statusLine = /^(HTTP\/1\.[01]) ([0-9]{3})(?: .*)?$/.exec(lines[0]!);
  if (statusLine === null) {
    throw new TransportError(
      "protocol",
      `malformed HTTP response: status line "${lines[0]!.slice(0, 80)}"`,
    );
  }
  const fields = new Map<string, string[]>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) {
      throw new TransportError("protocol", "malformed HTTP response: a header line without a name");
    }
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    const had = fields.get(name);
    if (had === undefined) fields.set(name, [value]);
    else had.push(value);
  }
  return { version: statusLine[1]!, status: Number(statusLine[2]), fields };
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
  /** Reading the CRLF after chunk data. */
  DataEnd,
  /** Reading trailer lines up to the empty one. */
  Trailer,
  Done,
}

/** Longest chunk-size line accepted (size plus extensions). */
const MAX_SIZE_LINE = 4096;

/**
 * Decodes a chunked body fed in pieces that may split anywhere. Chunk data is handed out as
 * views of the input, never copied; only the short size and trailer lines are kept as text.
 */
export class ChunkedDecoder {
  #state = State.Size;
  #line = "";
  #left = 0;
  /** In {@link State.Trailer}: whether the current trailer line has any byte before its CRLF. */
  #lineHasText = false;

  get done(): boolean {
    return this.#state === State.Done;
  }

  /** @throws {TransportError} (`protocol`) for a malformed chunk framing. */
  push(input: Uint8Array): ChunkedOutput {
    const data: Uint8Array[] = [];
    let i = 0;
    while (i < input.length) {
      switch (this.#state) {
        case State.Size: {
          const lf = input.indexOf(10, i);
          const end = lf < 0 ? input.length : lf;
          this.#line += LATIN1.decode(input.subarray(i, end));
          if (this.#line.length > MAX_SIZE_LINE) {
            throw new TransportError(
              "protocol",
              "malformed chunked encoding: chunk-size line too long",
            );
          }
          i = end;
          if (lf < 0) break;
          i++;
          const size = /^([0-9a-fA-F]{1,12})[ \t]*(?:;.*)?\r?$/.exec(this.#line);
          if (size === null) {
            throw new TransportError(
              "protocol",
              `malformed chunked encoding: chunk size "${this.#line.slice(0, 40)}"`,
            );
          }
          this.#line = "";
          this.#left = parseInt(size[1]!, 16);
          if (this.#left === 0) {
            this.#state = State.Trailer;
            this.#lineHasText = false;
          } else {
            this.#state = State.Data;
          }
          break;
        }
        case State.Data: {
          const take = Math.min(this.#left, input.length - i);
          data.push(input.subarray(i, i + take));
          i += take;
          this.#left -= take;
          if (this.#left === 0) this.#state = State.DataEnd;
          break;
        }
        case State.DataEnd: {
          const byte = input[i++];
          if (byte === 10) this.#state = State.Size;
          else if (byte !== 13) {
            throw new TransportError("protocol", "malformed chunked encoding: no CRLF after data");
          }
          break;
        }
        case State.Trailer: {
          const byte = input[i++];
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
}
