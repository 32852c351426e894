/**
 * Fuzz target: the HTTP/1.1 response reader (`lib/wire/http1/response.ts`: `readHead`,
 * `framingOf`, `BodyReader` with `ChunkedDecoder`) fed one input in pieces split at random.
 *
 * Each input is read three ways (whole, in pieces cut where a PRNG seeded from the input says,
 * and byte by byte when short); all three must reach the same outcome (status, header fields and
 * body, or the same kind of `TransportError`). Any other error type, a body over the reader's
 * limit, or a `Content-Length` body of another length is a finding.
 *
 * @module
 */

import type { FuzzTarget, Rng } from "../target.ts";
import {
  BodyReader,
  type ByteSource,
  framingOf,
  readHead,
} from "../../../lib/wire/http1/response.ts";
import { TransportError } from "../../../lib/wire/http1/errors.ts";
import { randomPieces } from "../rng.ts";

/** The body limit the reader is given: small, so that generated inputs reach it. */
const MAX_BODY_BYTES = 64 * 1024;
/** Inputs up to this size are also read one byte at a time. */
const BYTEWISE_MAX = 4096;

const ENCODER = new TextEncoder();
const LATIN1 = new TextDecoder("latin1");

/** What reading one input gave. */
interface Outcome {
  status?: number;
  fields?: string;
  body?: string;
  error?: string;
}

/** A source handing out `pieces` in turn, then the end. */
function sourceOf(pieces: Uint8Array[]): ByteSource {
  const queue = [...pieces];
  return {
    read: () => Promise.resolve(queue.shift() ?? null),
    unread: (bytes) => void queue.unshift(bytes),
  };
}

/** Reads one response from `pieces`, as the transport reads a GET's answer. */
async function readAll(pieces: Uint8Array[]): Promise<Outcome> {
  const source = sourceOf(pieces);
  try {
    const head = await readHead(source);
    const { framing } = framingOf("GET", head);
    const reader = new BodyReader(source, framing, MAX_BODY_BYTES);
    const parts: string[] = [];
    let length = 0;
    for (let data = await reader.next(); data !== null; data = await reader.next()) {
      for (const part of data) {
        if (part.length === 0) throw new Error("invariant: an empty piece of body data");
        length += part.length;
        parts.push(LATIN1.decode(part));
      }
    }
    if (length > MAX_BODY_BYTES) throw new Error(`invariant: a body of ${length} bytes passed`);
    if (framing.kind === "length" && length !== framing.length) {
      throw new Error(`invariant: ${length} body bytes for a Content-Length of ${framing.length}`);
    }
    const fields = JSON.stringify([...head.fields.entries()].sort());
    return { status: head.status, fields, body: parts.join("") };
  } catch (err) {
    if (err instanceof TransportError) return { error: err.kind };
    throw err;
  }
}

const SEEDS = [
  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n1\r\n!\r\n0\r\nX: y\r\n\r\n",
  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" +
  "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
  "HTTP/1.0 200 OK\r\n\r\nbody until the end",
  "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffff\r\n",
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
  "HTTP/1.1 101 Switching Protocols\r\n\r\n",
  "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
  "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
  "HTTP/2 200\r\n\r\n",
];

/** `rng`'s choice among `options`. */
function pick<T>(rng: Rng, options: readonly T[]): T {
  return options[rng.int(options.length)]!;
}

/** Printable random text of up to `max` characters. */
function text(rng: Rng, max: number): string {
  let out = "";
  for (let i = rng.int(max + 1); i > 0; i--) out += String.fromCharCode(32 + rng.int(95));
  return out;
}

/** A chunked encoding of `body` in random chunk sizes, with random extensions and trailers. */
function chunkedBody(rng: Rng, body: string): string {
  let out = "";
  for (let at = 0; at < body.length;) {
    const size = 1 + rng.int(Math.min(body.length - at, 300));
    const ext = rng.next() < 0.2 ? `;${text(rng, 10).replace(/[\r\n]/g, "")}` : "";
    out += `${size.toString(16)}${ext}\r\n${body.slice(at, at + size)}\r\n`;
    at += size;
  }
  out += "0\r\n";
  if (rng.next() < 0.3) out += `Trailer: ${text(rng, 20)}\r\n`;
  return out + "\r\n";
}

/** The target. */
export const target: FuzzTarget = {
  name: "http1_response",
  seeds: () => SEEDS.map((s) => ENCODER.encode(s)),
  generate(rng: Rng): Uint8Array {
    let out = "";
    for (let i = rng.next() < 0.2 ? rng.int(4) : 0; i > 0; i--) {
      out += `HTTP/1.1 ${pick(rng, [100, 102, 103])} Interim\r\nX: ${text(rng, 10)}\r\n\r\n`;
    }
    const status = rng.next() < 0.9
      ? pick(rng, [200, 201, 204, 304, 404, 409, 429, 500, 503])
      : rng.int(1000);
    const body = text(rng, 2000);
    const framing = pick(rng, ["length", "chunked", "close", "both", "wrong-length"]);
    out += `${pick(rng, ["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2"])} ${status} Reason\r\n`;
    for (let i = rng.int(5); i > 0; i--) {
      out += `X-${text(rng, 8).replace(/\W/g, "")}a: ${text(rng, 40)}\r\n`;
    }
    if (framing === "length" || framing === "both") out += `Content-Length: ${body.length}\r\n`;
    if (framing === "wrong-length") out += `Content-Length: ${rng.int(4000)}\r\n`;
    if (framing === "chunked" || framing === "both") out += "Transfer-Encoding: chunked\r\n";
    out += "\r\n";
    out += framing === "chunked" || framing === "both" ? chunkedBody(rng, body) : body;
    const bytes = ENCODER.encode(out);
    // Sometimes a byte flipped, or the end cut off.
    if (rng.next() < 0.3) bytes[rng.int(bytes.length)] = rng.int(256);
    return rng.next() < 0.2 ? bytes.subarray(0, rng.int(bytes.length + 1)) : bytes;
  },
  async run(input: Uint8Array): Promise<void> {
    const whole = await readAll([input]);
    const ways: [string, Uint8Array[]][] = [["random pieces", randomPieces(input, 0x9e3779b9)]];
    if (input.length <= BYTEWISE_MAX) {
      ways.push(["byte by byte", [...input].map((b) => new Uint8Array([b]))]);
    }
    for (const [how, pieces] of ways) {
      const got = await readAll(pieces);
      if (JSON.stringify(got) !== JSON.stringify(whole)) {
        throw new Error(
          `read ${how}: ${JSON.stringify(got).slice(0, 200)}; whole: ${
            JSON.stringify(whole).slice(0, 200)
          }`,
        );
      }
    }
  },
};
