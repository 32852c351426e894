/**
 * The HTTP/2 + gRPC client against a hostile or broken server, by class: floods of every control
 * frame, bad frame sizes and lengths, frames on the wrong stream or in the wrong state, bad HPACK,
 * CONTINUATION abuse, window abuse, GOAWAY and RST_STREAM at every point of a call, slow, silent
 * and non-reading peers, malformed gRPC answers. The peer (`testkit/h2/raw_peer.ts`) is written
 * from the RFCs, independent of `lib/wire/`. What every row asserts: `./h2_harness.ts`.
 *
 * The table runs in the test files of its {@link SHARDS}, `h2_peer_<shard>_test.ts`, each named by
 * the sections of the table it runs, so that `deno test --parallel` spreads them over its workers
 * (each row measures its own worker's heap). A new row goes into {@link ROWS}, in its section.
 *
 * @module
 */

import { type Row, type RowContext, runRow } from "./h2_harness.ts";
import { type Shard, shardRows } from "./shards.ts";
import { GrpcCode } from "../../lib/wire/grpc/status.ts";
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
} from "../../testkit/h2/frame_codec.ts";
import { encodeInteger, encodeString } from "../../testkit/h2/hpack_reference.ts";
import {
  GRPC_HEADERS,
  grpcOk,
  grpcTrailers,
  headers,
  type PeerConn,
} from "../../testkit/h2/raw_peer.ts";

const C = GrpcCode;
/** A connection error, as the call reports it. */
const conn = (h2: string) => new RegExp(`^connection error: ${h2}`);

/** Handshake, read the request, then `fn` with its stream id. */
function answer(
  fn: (peer: PeerConn, id: number, ctx: RowContext) => Promise<unknown>,
  ours: [number, number][] = [],
): Row["script"] {
  return async (peer, ctx) => {
    await peer.handshake(ours);
    const req = await peer.readRequest();
    if (req === undefined) return;
    await fn(peer, req.streamId, ctx);
    await ctx.hold();
  };
}

/** Sends `frames` after the request, then holds. */
function reply(...frames: (Uint8Array | ((id: number) => Uint8Array | Uint8Array[]))[]) {
  return answer(async (peer, id) => {
    for (const f of frames) {
      const out = typeof f === "function" ? f(id) : f;
      await peer.send(...(Array.isArray(out) ? out : [out]));
    }
  });
}

/** Reads whatever the client sends until EOF, so that its writes never block. */
function drain(peer: PeerConn): Promise<boolean> {
  return peer.untilEof(10_000);
}

/** Floods `unit` without reading while the client writes a large request, then holds. */
function floodWhileBlocked(unit: Uint8Array): Row["script"] {
  return async (peer, ctx) => {
    await peer.handshake([[4, 2 ** 31 - 1]]);
    await peer.send(windowUpdate(0, 2 ** 31 - 1 - 65_535));
    await peer.expect((f) => f.type === T.HEADERS);
    await peer.flood(unit, 300_000);
    ctx.checkpoint();
    await ctx.hold();
  };
}

/** Floods `unit` count times while reading, then answers OK. */
function floodThenOk(unit: (id: number) => Uint8Array, count: number): Row["script"] {
  return answer(async (peer, id, ctx) => {
    drain(peer);
    await peer.flood(unit(id), count);
    ctx.checkpoint();
    await peer.send(...grpcOk(id));
  });
}

/** A HEADERS frame carrying a raw header block. */
const block = (id: number, bytes: number[], flags: number = F.END_HEADERS) =>
  frame(T.HEADERS, flags, id, bytes);

const STATUS_200 = 0x88; // static index 8, §6.1
const BIG = 8 * 1024 * 1024;
/** Octets of the one-octet-frame answer: 0x0493e0, the length its prefix states. */
const DRIBBLE = 300_000;

/** The rows, in the order the shard files split them. */
export const ROWS: Row[] = [
  // Floods of each control frame.
  {
    name: "PING flood while the client's writes are blocked",
    script: floodWhileBlocked(ping(1)),
    body: BIG,
    timeoutMs: 800,
    code: C.DeadlineExceeded,
  },
  {
    name: "SETTINGS flood while the client's writes are blocked",
    script: floodWhileBlocked(settings()),
    body: BIG,
    timeoutMs: 800,
    code: C.DeadlineExceeded,
  },
  {
    name: "CVE-2019-9512 ping flood: 50 000 PINGs answered, then the answer",
    script: floodThenOk(() => ping(2), 50_000),
    code: 0,
  },
  {
    name: "CVE-2019-9515 SETTINGS flood of full frames (2730 entries each), then the answer",
    script: floodThenOk(() => settings(new Array(2730).fill([3, 100])), 100),
    code: 0,
  },
  {
    name: "WINDOW_UPDATE flood on the connection, then the answer",
    script: floodThenOk(() => windowUpdate(0, 1), 100_000),
    code: 0,
  },
  {
    name: "WINDOW_UPDATE flood on the stream, then the answer",
    script: floodThenOk((id) => windowUpdate(id, 1), 100_000),
    code: 0,
  },
  {
    name: "CVE-2019-9513 PRIORITY flood, then the answer",
    script: floodThenOk((id) => priority(id), 100_000),
    code: 0,
  },
  {
    name: "CVE-2019-9518 empty frames: 0-octet DATA without END_STREAM, then the answer",
    script: answer(async (peer, id, ctx) => {
      drain(peer);
      await peer.send(headers(id, [...GRPC_HEADERS]));
      await peer.flood(frame(T.DATA, 0, id), 100_000);
      ctx.checkpoint();
      await peer.send(grpcData(id, []), grpcTrailers(id, 0));
    }),
    code: 0,
  },
  {
    name: "CVE-2019-9514 RST_STREAM flood on a closed stream",
    script: answer(async (peer, id, ctx) => {
      drain(peer);
      await peer.send(...grpcOk(id));
      await peer.flood(rstStream(id, E.CANCEL), 100_000);
      ctx.checkpoint();
    }),
    code: 0,
  },
  {
    name: "GOAWAY flood, then the answer",
    script: floodThenOk((id) => goAway(id, E.NO_ERROR), 20_000),
    code: 0,
  },
  {
    name: "unknown frame type flood, then the answer",
    script: floodThenOk(() => frame(0xfa, 0xff, 0, [1, 2, 3]), 100_000),
    code: 0,
  },
  {
    name: "empty CONTINUATION flood",
    script: answer(async (peer, id, ctx) => {
      await peer.send(block(id, [STATUS_200], 0));
      await peer.flood(frame(T.CONTINUATION, 0, id), 300_000);
      ctx.checkpoint();
    }),
    code: C.Unavailable,
    details: conn("ENHANCE_YOUR_CALM: too many CONTINUATION frames"),
  },
  // The 2019 HTTP/2 attack family from the client's side (CVE-2019-9511 to -9518).
  {
    name: "CVE-2019-9511 data dribble: a 300 000-octet answer in one-octet DATA frames",
    script: answer(async (peer, id, ctx) => {
      drain(peer);
      await peer.send(headers(id, [...GRPC_HEADERS]));
      for (const b of [0, 0, 0x04, 0x93, 0xe0]) await peer.send(frame(T.DATA, 0, id, [b]));
      await peer.flood(frame(T.DATA, 0, id, [0]), DRIBBLE);
      ctx.checkpoint();
      await peer.send(grpcTrailers(id, 0));
    }),
    code: 0,
  },
  {
    name: "CVE-2019-9513 priority loop: streams depending on each other and on themselves",
    script: floodThenOk(
      (id) =>
        Uint8Array.from([
          ...priority(id, id + 2),
          ...priority(id + 2, id + 4),
          ...priority(id + 4, id),
          ...priority(id, id),
        ]),
      50_000,
    ),
    code: 0,
  },
  {
    name: "CVE-2019-9514 reset flood: RST_STREAM on the call's open stream, 100 000 times",
    script: answer(async (peer, id, ctx) => {
      drain(peer);
      await peer.flood(rstStream(id, E.CANCEL), 100_000);
      ctx.checkpoint();
    }),
    code: C.Canceled,
  },
  {
    name: "CVE-2019-9515 settings flood: full frames changing INITIAL_WINDOW_SIZE, then the answer",
    script: floodThenOk(
      () =>
        settings(
          Array.from({ length: 2730 }, (_, i) => [i % 3 === 2 ? 1 : 4, i % 2 ? 65_535 : 1 << 20]),
        ),
      200,
    ),
    code: 0,
  },
  {
    name: "CVE-2019-9516 zero-length header fields: 40 000 empty fields over CONTINUATION",
    script: answer(async (peer, id, ctx) => {
      drain(peer);
      // Literal without indexing, new name: a 0-octet name and value, plain and Huffman.
      const fields = new Uint8Array(40_000 * 3);
      for (let i = 0; i < fields.length; i += 3) fields.set([0x00, i % 2 ? 0x80 : 0, 0x80], i);
      const cut = 16_384;
      await peer.send(block(id, [STATUS_200, ...fields.subarray(0, cut - 1)], 0));
      for (let at = cut - 1; at < fields.length; at += cut) {
        const last = at + cut >= fields.length;
        await peer.send(
          frame(T.CONTINUATION, last ? F.END_HEADERS : 0, id, fields.subarray(at, at + cut)),
        );
      }
      ctx.checkpoint();
    }),
    code: C.Internal,
    details: /^peer header list size exceeded limit$/,
  },
  // Bad frame sizes and lengths.
  {
    name: "a frame above SETTINGS_MAX_FRAME_SIZE",
    script: reply((id) => frame(T.DATA, 0, id, new Uint8Array(16_385))),
    code: C.Unavailable,
    details: conn("FRAME_SIZE_ERROR"),
  },
  {
    name: "PING of 7 octets",
    script: reply(frame(T.PING, 0, 0, [1, 2, 3, 4, 5, 6, 7])),
    code: C.Unavailable,
    details: conn("FRAME_SIZE_ERROR"),
  },
  {
    name: "SETTINGS of 5 octets",
    script: reply(frame(T.SETTINGS, 0, 0, [0, 3, 0, 0, 0])),
    code: C.Unavailable,
    details: conn("FRAME_SIZE_ERROR"),
  },
  {
    name: "SETTINGS ACK with a payload",
    script: reply(frame(T.SETTINGS, F.ACK, 0, [0, 3, 0, 0, 0, 1])),
    code: C.Unavailable,
    details: conn("FRAME_SIZE_ERROR"),
  },
  {
    name: "RST_STREAM of 3 octets",
    script: reply((id) => frame(T.RST_STREAM, 0, id, [0, 0, 8])),
    code: C.Unavailable,
    details: conn("FRAME_SIZE_ERROR"),
  },
  {
    name: "WINDOW_UPDATE of 5 octets",
    script: reply(frame(T.WINDOW_UPDATE, 0, 0, [0, 0, 0, 1, 0])),
    code: C.Unavailable,
    details: conn("FRAME_SIZE_ERROR"),
  },
  {
    name: "PRIORITY of 4 octets",
    script: reply((id) => frame(T.PRIORITY, 0, id, [0, 0, 0, 0])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR"),
  },
  {
    name: "GOAWAY of 7 octets",
    script: reply(frame(T.GOAWAY, 0, 0, [0, 0, 0, 1, 0, 0, 0])),
    code: C.Unavailable,
    details: conn("FRAME_SIZE_ERROR"),
  },
  {
    name: "DATA padding longer than the payload",
    script: reply(
      (id) => headers(id, [...GRPC_HEADERS]),
      (id) => frame(T.DATA, F.PADDED, id, [200, 1, 2]),
    ),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR"),
  },
  {
    name: "a length field that promises more than ever arrives",
    script: reply((id) => frame(T.DATA, 0, id, [1, 2], 100)),
    timeoutMs: 300,
    code: C.DeadlineExceeded,
  },
  // Frames on stream 0, on idle or wrong streams, in the wrong state.
  {
    name: "DATA on stream 0",
    script: reply(frame(T.DATA, 0, 0, [1])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: DATA on stream 0"),
  },
  {
    name: "HEADERS on stream 0",
    script: reply(headers(0, [[":status", "200"]])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: HEADERS on stream 0"),
  },
  {
    name: "HEADERS on an idle stream",
    script: reply((id) => headers(id + 2, [[":status", "200"]])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: HEADERS on idle stream"),
  },
  {
    name: "HEADERS on a server-initiated (even) stream",
    script: reply(headers(2, [[":status", "200"]])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR"),
  },
  {
    name: "DATA on an idle stream",
    script: reply(frame(T.DATA, 0, 99, [1])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: DATA on idle stream"),
  },
  {
    name: "RST_STREAM on stream 0",
    script: reply(rstStream(0, E.CANCEL)),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR"),
  },
  {
    name: "WINDOW_UPDATE on an idle stream",
    script: reply(windowUpdate(99, 1)),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR"),
  },
  {
    name: "PING on a stream",
    script: reply((id) => frame(T.PING, 0, id, new Uint8Array(8))),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: PING on a stream"),
  },
  {
    name: "SETTINGS on a stream",
    script: reply((id) => frame(T.SETTINGS, 0, id)),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR"),
  },
  {
    name: "GOAWAY on a stream",
    script: reply((id) => frame(T.GOAWAY, 0, id, new Uint8Array(8))),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR"),
  },
  {
    name: "PUSH_PROMISE with push disabled",
    script: reply((id) => frame(T.PUSH_PROMISE, F.END_HEADERS, id, [0, 0, 0, 2, STATUS_200])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: PUSH_PROMISE"),
  },
  {
    name: "CONTINUATION without HEADERS",
    script: reply((id) => frame(T.CONTINUATION, F.END_HEADERS, id, [STATUS_200])),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: unexpected CONTINUATION"),
  },
  {
    name: "CONTINUATION on another stream than its HEADERS",
    script: reply(
      (id) => block(id, [STATUS_200], 0),
      (id) => frame(T.CONTINUATION, F.END_HEADERS, id + 2, []),
    ),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: unexpected CONTINUATION"),
  },
  {
    name: "another frame inside a header block",
    script: reply((id) => block(id, [STATUS_200], 0), ping(3)),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: expected a CONTINUATION"),
  },
  {
    name: "DATA before the response headers",
    script: reply((id) => grpcData(id, [1])),
    code: C.Internal,
    details: /DATA before the response headers/,
  },
  {
    name: "HEADERS in the middle of the response without END_STREAM",
    script: reply(
      (id) => headers(id, [...GRPC_HEADERS]),
      (id) => grpcData(id, []),
      (id) => headers(id, [["grpc-status", "0"]]),
    ),
    code: C.Internal,
    details: /trailers without END_STREAM/,
  },
  {
    name: "a server that starts with PING instead of SETTINGS",
    script: async (peer) => {
      await peer.readPreface();
      await peer.send(ping(1));
      await drain(peer);
    },
    code: C.Unavailable,
    details: /did not start with SETTINGS/,
  },
  // Bad HPACK.
  {
    name: "HPACK index 0",
    script: reply((id) => block(id, [0x80])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: header index 0"),
  },
  {
    name: "HPACK index beyond both tables",
    script: reply((id) => block(id, [0xbe])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: header index 62 out of range"),
  },
  {
    name: "HPACK integer that overflows (a string length of 151 octets)",
    script: reply((id) => block(id, [0x00, 0x01, 0x61, 0x7f, ...new Array(150).fill(0x80), 1])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: integer too large"),
  },
  {
    name: "HPACK table size update whose integer overflows",
    script: reply((id) => block(id, [0x3f, ...new Array(150).fill(0x80), 1, STATUS_200])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: integer too large"),
  },
  {
    name: "HPACK Huffman string holding EOS",
    script: reply((id) => block(id, [0x00, 0x01, 0x61, 0x84, 0xff, 0xff, 0xff, 0xff])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: Huffman"),
  },
  {
    name: "HPACK table size update above the announced 4096",
    script: reply((id) => block(id, [...encodeInteger(4097, 5, 0x20), STATUS_200])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: table size update 4097 above the limit 4096"),
  },
  {
    name: "HPACK table size update after a field",
    script: reply((id) => block(id, [STATUS_200, 0x20])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: table size update after a header field"),
  },
  {
    name: "HPACK block cut in the middle of a literal",
    script: reply((id) => block(id, [0x00, 0x05, 0x61])),
    code: C.Unavailable,
    details: conn("COMPRESSION_ERROR: truncated"),
  },
  {
    name: "a header list over SETTINGS_MAX_HEADER_LIST_SIZE (4000-octet entry indexed 300 times)",
    script: reply((id) =>
      block(id, [
        STATUS_200,
        0x40,
        ...encodeString("x-big"),
        ...encodeString("v".repeat(4000)),
        ...new Array(300).fill(0xbe),
      ])
    ),
    code: C.Internal,
    details: /^peer header list size exceeded limit$/,
  },
  {
    name: "a header block over 2 MiB in full CONTINUATION frames",
    script: answer(async (peer, id) => {
      await peer.send(block(id, [STATUS_200], 0));
      const filler = new Uint8Array(16_384).fill(0x88);
      for (let i = 0; i < 130; i++) {
        if (!await peer.send(frame(T.CONTINUATION, 0, id, filler))) break;
      }
    }),
    code: C.Unavailable,
    details: conn("ENHANCE_YOUR_CALM: header block too large"),
  },
  // Window abuse.
  {
    name: "a connection WINDOW_UPDATE past 2^31-1",
    script: reply(windowUpdate(0, 2 ** 31 - 1)),
    code: C.Unavailable,
    details: conn("FLOW_CONTROL_ERROR: connection window overflow"),
  },
  {
    name: "a stream WINDOW_UPDATE past 2^31-1",
    script: reply((id) => windowUpdate(id, 2 ** 31 - 1)),
    code: C.Internal,
    details: /stream window overflow/,
  },
  {
    name: "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
    script: reply(settings([[4, 2 ** 31]])),
    code: C.Unavailable,
    details: conn("FLOW_CONTROL_ERROR: initial window too large"),
  },
  {
    name: "a WINDOW_UPDATE of 0 on the connection",
    script: reply(windowUpdate(0, 0)),
    code: C.Unavailable,
    details: conn("PROTOCOL_ERROR: WINDOW_UPDATE of 0"),
  },
  {
    name: "a window that stays zero for ever",
    script: async (peer, ctx) => {
      await peer.handshake([[4, 0]]);
      await peer.expect((f) => f.type === T.HEADERS);
      await ctx.hold();
    },
    body: 1024,
    timeoutMs: 300,
    code: C.DeadlineExceeded,
  },
  {
    name: "DATA beyond the stream window the client granted",
    script: reply(
      (id) => headers(id, [...GRPC_HEADERS]),
      (id) => grpcData(id, new Uint8Array(2000)),
    ),
    session: { initialWindowSize: 1000 },
    code: C.Internal,
    details: /DATA beyond the stream window/,
  },
  {
    name: "a response message over 4 MiB",
    script: answer(async (peer, id) => {
      drain(peer);
      await peer.send(headers(id, [...GRPC_HEADERS]));
      const chunk = new Uint8Array(16_384);
      await peer.send(frame(T.DATA, 0, id, [0, 0, 0x40, 0, 1, ...chunk.subarray(5)]));
      for (let i = 1; i < 260; i++) {
        if (!await peer.send(frame(T.DATA, 0, id, chunk))) break;
      }
    }),
    code: C.ResourceExhausted,
    details: /received message larger than max/,
  },
  // GOAWAY and RST_STREAM at every point of a call.
  {
    name: "GOAWAY with last-stream-id 0 before the request is read",
    script: async (peer, ctx) => {
      await peer.handshake();
      await peer.send(goAway(0, E.NO_ERROR));
      await ctx.hold();
    },
    code: C.Unavailable,
  },
  {
    name: "GOAWAY with last-stream-id 0 after the request",
    script: reply(goAway(0, E.NO_ERROR)),
    code: C.Unavailable,
    details: /draining/,
  },
  {
    name: "GOAWAY that lets the call finish, then the answer",
    script: reply((id) => goAway(id, E.NO_ERROR), (id) => grpcOk(id)),
    code: 0,
  },
  {
    name: "GOAWAY after the headers, then the connection closes",
    script: answer(async (peer, id) => {
      await peer.send(headers(id, [...GRPC_HEADERS]), goAway(id, E.INTERNAL_ERROR));
      peer.close();
    }),
    code: C.Unavailable,
    details: /EOF/,
  },
  {
    name: "RST_STREAM CANCEL right after the request",
    script: reply((id) => rstStream(id, E.CANCEL)),
    code: C.Canceled,
  },
  {
    name: "RST_STREAM REFUSED_STREAM",
    script: reply((id) => rstStream(id, E.REFUSED_STREAM)),
    code: C.Unavailable,
  },
  {
    name: "RST_STREAM INTERNAL_ERROR after the headers",
    script: reply((id) => headers(id, [...GRPC_HEADERS]), (id) => rstStream(id, E.INTERNAL_ERROR)),
    code: C.Internal,
  },
  {
    name: "RST_STREAM PROTOCOL_ERROR in the middle of the message",
    script: reply(
      (id) => headers(id, [...GRPC_HEADERS]),
      (id) => frame(T.DATA, 0, id, [0, 0, 0, 0, 9, 1]),
      (id) => rstStream(id, E.PROTOCOL_ERROR),
    ),
    code: C.Internal,
  },
  {
    name: "RST_STREAM ENHANCE_YOUR_CALM",
    script: reply((id) => rstStream(id, E.ENHANCE_YOUR_CALM)),
    code: C.ResourceExhausted,
  },
  {
    name: "RST_STREAM with an unknown error code",
    script: reply((id) => rstStream(id, 0x99)),
    code: C.Internal,
    details: /unknown error code 0x99/,
  },
  {
    name: "the connection closed before the server's SETTINGS",
    script: async (peer) => {
      await peer.readPreface();
      peer.close();
    },
    code: C.Unavailable,
  },
  {
    name: "the connection closed after the handshake, before the answer",
    script: answer((peer) => Promise.resolve(peer.close())),
    code: C.Unavailable,
    details: /EOF/,
  },
  {
    name: "the connection closed in the middle of a frame",
    script: answer(async (peer, id) => {
      await peer.send(headers(id, [...GRPC_HEADERS]).subarray(0, 12));
      peer.close();
    }),
    code: C.Unavailable,
    details: /EOF/,
  },
  // Slow, silent and non-reading peers.
  {
    name: "a silent peer: accepts and sends nothing",
    script: async (_peer, ctx) => await ctx.hold(),
    timeoutMs: 300,
    code: C.DeadlineExceeded,
  },
  {
    name: "silent after the handshake",
    script: answer(async () => {}),
    timeoutMs: 300,
    code: C.DeadlineExceeded,
  },
  {
    name: "a slow peer: the answer one octet at a time, within the deadline",
    script: answer(async (peer, id) => {
      const bytes = grpcOk(id);
      for (const b of bytes) await peer.trickle(b, 1);
    }),
    timeoutMs: 5000,
    code: 0,
  },
  {
    name: "a slow peer: the answer one octet at a time, past the deadline",
    script: answer(async (peer, id, ctx) => {
      for (const octet of grpcOk(id).flatMap((b) => [...b])) {
        if (ctx.callSettled() || !await peer.trickle(Uint8Array.of(octet), 20)) return;
      }
    }),
    timeoutMs: 300,
    code: C.DeadlineExceeded,
  },
  {
    name: "CVE-2019-9517 internal buffering: a peer that opens every window, never reads 8 MiB",
    script: async (peer, ctx) => {
      await peer.handshake([[4, 2 ** 31 - 1]]);
      await peer.send(windowUpdate(0, 2 ** 31 - 1 - 65_535));
      await peer.expect((f) => f.type === T.HEADERS);
      await ctx.hold();
    },
    body: BIG,
    timeoutMs: 500,
    code: C.DeadlineExceeded,
  },
  // Malformed gRPC answers.
  {
    name: "grpc-status that is not an int32",
    script: reply(
      (id) => headers(id, [...GRPC_HEADERS]),
      (id) => headers(id, [["grpc-status", "100000000000000000000"]], F.END_STREAM),
    ),
    code: C.Internal,
    details: /malformed grpc-status/,
  },
  {
    name: "the stream ends without trailers",
    script: reply((id) => headers(id, [...GRPC_HEADERS]), (id) => grpcData(id, [], F.END_STREAM)),
    code: C.Internal,
    details: /without sending trailers/,
  },
  {
    name: "the compressed flag without grpc-encoding",
    script: reply(
      (id) => headers(id, [...GRPC_HEADERS]),
      (id) => frame(T.DATA, 0, id, [1, 0, 0, 0, 0]),
      (id) => grpcTrailers(id, 0),
    ),
    code: C.Internal,
    details: /compressed flag set/,
  },
  {
    name: ":status 503 with text/html",
    script: reply((id) =>
      headers(id, [[":status", "503"], ["content-type", "text/html"]], F.END_STREAM)
    ),
    code: C.Unavailable,
    details: /unexpected HTTP status code received from server: 503/,
  },
];

/** The test files that share the table, each from the first row of its sections. */
export const SHARDS: readonly Shard[] = [
  // Floods of control frames and the 2019 attack family.
  { name: "floods", from: "PING flood while the client's writes are blocked" },
  // Bad frame sizes and lengths, frames on the wrong stream or in the wrong state.
  { name: "bad_frames", from: "a frame above SETTINGS_MAX_FRAME_SIZE" },
  // Bad HPACK and window abuse.
  { name: "hpack_and_windows", from: "HPACK index 0" },
  // GOAWAY and RST_STREAM, slow and silent peers, malformed gRPC answers.
  {
    name: "call_ends_and_answers",
    from: "GOAWAY with last-stream-id 0 before the request is read",
  },
];

/** Registers the rows of shard `name` (see {@link SHARDS}) as tests. */
export function testShard(name: string): void {
  for (const row of shardRows(ROWS, SHARDS, name)) {
    Deno.test(`hostile HTTP/2 peer: ${row.name}`, () => runRow(row));
  }
}
