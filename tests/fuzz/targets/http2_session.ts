/**
 * Fuzz target `http2_session`: the whole HTTP/2 client connection (`lib/wire/http2/session.ts`:
 * frames, HPACK, streams, flow control, SETTINGS, GOAWAY) and the gRPC reading of its answer
 * (`lib/wire/grpc/response.ts`), over an in-memory connection that plays the input as what the
 * server sends.
 *
 * The input follows an empty SETTINGS frame (so that the handshake passes) and the opening of
 * one request on stream 1; the first octet sets the size of the reads. When the input is played
 * the connection ends. The request must then have settled, with a response that the gRPC layer
 * reads into a message or a `GrpcStatusError`, or with a `StreamError`; anything else, or a
 * request that never settles (a hang), is a finding.
 *
 * Each input is also played with a large window twice, as it is and re-framed (`../reframe.ts`:
 * DATA and header blocks cut into frames of other sizes, empty DATA frames between): the two
 * results must be the same, and a response's DATA must sit in an array of at most twice its
 * octets (or the length its gRPC prefix states), never more than the request's limit.
 *
 * @module
 */

import { Http2Session } from "../../../lib/wire/http2/session.ts";
import { StreamError } from "../../../lib/wire/http2/stream_error.ts";
import { GRPC_MESSAGE_SIZE, parseResponse } from "../../../lib/wire/grpc/response.ts";
import type { DataSizeHint } from "../../../lib/wire/http2/receive_buffer.ts";
import { GrpcStatusError } from "../../../lib/wire/grpc/status.ts";
import {
  E,
  F,
  frame,
  goAway,
  grpcData,
  ping,
  priority,
  rstStream,
  settings,
  T,
  windowUpdate,
} from "../../../testkit/h2/frame_codec.ts";
import {
  encodeInteger,
  encodeLiterals,
  encodeString,
} from "../../../testkit/h2/hpack_reference.ts";
import type { FuzzTarget, Rng } from "../target.ts";
import { reframe } from "../reframe.ts";
import { toHex } from "../inputs.ts";

/** The response DATA the request accepts. */
const LIMIT = 1 << 20;

/** A connection that reads `first`, then (once opened) the chunks, then EOF; writes vanish. */
class ScriptedConn {
  #first: Uint8Array | undefined;
  #chunks: Uint8Array[];
  #open!: () => void;
  readonly #opened = new Promise<void>((resolve) => this.#open = resolve);
  #closed = false;

  constructor(first: Uint8Array, chunks: Uint8Array[]) {
    this.#first = first;
    this.#chunks = chunks;
  }

  /** Lets the reads after the first one go on. */
  open(): void {
    this.#open();
  }

  async read(buf: Uint8Array): Promise<number | null> {
    if (this.#first !== undefined) {
      const first = this.#first;
      this.#first = undefined;
      buf.set(first);
      return first.length;
    }
    await this.#opened;
    if (this.#closed) throw new Deno.errors.BadResource("closed");
    const chunk = this.#chunks.shift();
    if (chunk === undefined) return null;
    buf.set(chunk);
    return chunk.length;
  }

  write(bytes: Uint8Array): Promise<number> {
    if (this.#closed) return Promise.reject(new Deno.errors.BrokenPipe("closed"));
    return Promise.resolve(bytes.length);
  }

  close(): void {
    this.#closed = true;
    this.#open();
  }
}

const REQUEST: [string, string][] = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/csi.v1.Identity/Probe"],
  [":authority", "localhost"],
];

/** One server frame for stream 1 (or another), mostly well formed. */
function serverFrame(rng: Rng): Uint8Array {
  const stream = rng.next() < 0.8 ? 1 : rng.int(6);
  switch (rng.int(14)) {
    case 0:
    case 1:
      return frame(
        T.HEADERS,
        F.END_HEADERS | (rng.next() < 0.3 ? F.END_STREAM : 0),
        stream,
        encodeLiterals([[":status", rng.next() < 0.9 ? "200" : String(rng.int(600))], [
          "content-type",
          rng.next() < 0.9 ? "application/grpc" : "text/plain",
        ]]),
      );
    case 2:
      return frame(
        T.HEADERS,
        F.END_HEADERS | F.END_STREAM,
        stream,
        encodeLiterals([["grpc-status", String(rng.int(20))], [
          "grpc-message",
          "m%20" + rng.int(9),
        ]]),
      );
    case 3:
      return grpcData(stream, rng.bytes(rng.int(64)), rng.next() < 0.2 ? F.END_STREAM : 0);
    case 4:
      return frame(T.DATA, F.PADDED, stream, [rng.int(8), ...rng.bytes(rng.int(12))]);
    case 5: {
      // A header block split over CONTINUATION frames, with an indexed dynamic entry.
      const block = [0x88, 0x40, ...encodeString("x-k"), ...encodeString("v", true), 0xbe];
      const cut = rng.int(block.length);
      return new Uint8Array([
        ...frame(T.HEADERS, 0, stream, block.slice(0, cut)),
        ...frame(T.CONTINUATION, F.END_HEADERS, stream, block.slice(cut)),
      ]);
    }
    case 6:
      return ping(rng.int(1000), rng.next() < 0.3);
    case 7:
      return settings([[1 + rng.int(6), rng.int(2) === 0 ? rng.int(70_000) : rng.int(2 ** 31)]]);
    case 8:
      return windowUpdate(rng.next() < 0.5 ? 0 : stream, rng.int(1 << 20));
    case 9:
      return rstStream(stream, rng.int(14));
    case 10:
      return goAway(rng.int(4), rng.next() < 0.7 ? E.NO_ERROR : rng.int(14));
    case 11:
      return priority(stream);
    case 12:
      return frame(T.HEADERS, F.END_HEADERS, stream, [
        ...encodeInteger(rng.int(200), 5, 0x20),
        0x88,
      ]);
    default:
      return frame(rng.int(256), rng.int(256), stream, rng.bytes(rng.int(20)));
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

export const target: FuzzTarget = {
  name: "http2_session",
  seeds(): Uint8Array[] {
    const ok = [
      frame(
        T.HEADERS,
        F.END_HEADERS,
        1,
        encodeLiterals([[":status", "200"], ["content-type", "application/grpc"]]),
      ),
      grpcData(1, [8, 1]),
      frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, encodeLiterals([["grpc-status", "0"]])),
    ];
    return [
      concat([Uint8Array.of(255), ...ok]),
      concat([Uint8Array.of(3), settings([[4, 0]]), ping(1), ...ok]),
      concat([Uint8Array.of(0), goAway(1, E.NO_ERROR), ...ok]),
    ];
  },
  generate(rng: Rng): Uint8Array {
    const parts: Uint8Array[] = [Uint8Array.of(rng.int(256))];
    const count = 1 + rng.int(12);
    for (let i = 0; i < count; i++) parts.push(serverFrame(rng));
    return concat(parts);
  },
  async run(input: Uint8Array): Promise<void> {
    const step = 1 + (input[0] ?? 0);
    const stream = input.subarray(1);
    await play(stream, step, { initialWindowSize: 1024 });
    // Frame-size mutation: the same stream re-framed must give the same result. A window larger
    // than any input, so that when WINDOW_UPDATEs go out cannot matter.
    const options = { initialWindowSize: 1 << 22, hint: GRPC_MESSAGE_SIZE };
    const whole = await play(stream, step, options);
    const reframed = await play(reframe(stream, 0x5e55), step, options);
    if (whole !== reframed) {
      throw new Error(`re-framed, the result differs:\n  ${whole}\n  ${reframed}`);
    }
  },
};

/**
 * Plays `stream` as the server's bytes in reads of `step` octets; the call's result as text: the
 * message, the status, or the stream's failure. Throws on a finding: any other error, or a
 * response kept in more memory than its octets call for.
 */
async function play(
  stream: Uint8Array,
  step: number,
  options: { initialWindowSize: number; hint?: DataSizeHint },
): Promise<string> {
  const chunks: Uint8Array[] = [];
  for (let pos = 0; pos < stream.length; pos += step) chunks.push(stream.slice(pos, pos + step));
  const conn = new ScriptedConn(settings(), chunks);
  const session = await Http2Session.start(conn as unknown as Deno.Conn, () => {}, {
    initialWindowSize: options.initialWindowSize,
  });
  const stream1 = session.request(REQUEST, Uint8Array.of(0, 0, 0, 0, 1, 7), LIMIT, {
    sizeHint: options.hint,
  });
  conn.open();
  try {
    const response = await stream1.response;
    checkMemory(response.data, options.hint);
    const out = parseResponse(response);
    if (out instanceof Uint8Array) return `message ${toHex(out)}`;
    if (out instanceof GrpcStatusError) return `status ${out.code} ${out.details}`;
    throw new Error("parseResponse() gave neither a message nor a status");
  } catch (err) {
    if (!(err instanceof StreamError)) throw err;
    return `stream ${err.failure.kind} ${err.message}`;
  } finally {
    session.close();
  }
}

/**
 * The array behind a response's DATA: at most twice its octets (1 KiB at least) or the length
 * its gRPC prefix states, and never more than the limit.
 */
function checkMemory(data: Uint8Array, hint: DataSizeHint | undefined): void {
  const held = data.buffer.byteLength;
  const stated = hint !== undefined && data.length >= hint.prefixLength
    ? hint.total(data.subarray(0, hint.prefixLength))
    : 0;
  if (held > LIMIT || held > Math.max(1024, 2 * data.length, stated)) {
    throw new Error(`${data.length} octets of DATA held in an array of ${held}`);
  }
}
