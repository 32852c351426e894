/**
 * A scriptable HTTP/2 server for adversarial tests of the attacher's HTTP/2 and gRPC client: it
 * listens on a unix socket, and each accepted connection is handed to a script that can read the
 * client's frames and send any bytes at all, well-formed or not, at any pace, or stop reading.
 *
 * Written from RFC 9113 and RFC 7541 with the test kit's own frame codec and HPACK
 * (`./frame_codec.ts`, `./hpack_reference.ts`): nothing of `lib/wire/` is used, so a bug in the
 * client's frame or HPACK code cannot hide itself here.
 *
 * Every connection is closed when its script returns, and {@link RawPeerServer.close} closes
 * whatever is left: no test leaves a socket or a script behind.
 *
 * @module
 */

import { type ScriptedSocketServer, startScriptedSocketServer } from "../scripted_socket_server.ts";
import {
  E,
  F,
  frame,
  FrameParser,
  grpcData,
  PREFACE,
  type RawFrame,
  readU32,
  settings,
  settingsAck,
  T,
} from "./frame_codec.ts";
import { encodeLiterals, type Field, ReferenceHpackDecoder } from "./hpack_reference.ts";

/** A request as the peer read it. */
export interface PeerRequest {
  streamId: number;
  headers: Field[];
  body: Uint8Array;
}

/** The result of {@link PeerConn.flood}. */
export interface FloodResult {
  /** Octets the socket took. */
  written: number;
  /** True when a write made no progress for `stallMs` and the flood stopped. */
  stalled: boolean;
}

/** One accepted connection, driven by a script. */
export class PeerConn {
  readonly #conn: Deno.Conn;
  readonly #parser = new FrameParser();
  readonly #hpack = new ReferenceHpackDecoder();
  readonly #buf = new Uint8Array(64 * 1024);
  #eof = false;
  #closed = false;
  /** The client's first SETTINGS, as `[id, value]` pairs. */
  clientSettings: [number, number][] = [];

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  /** True once the client closed its side (or the read failed). */
  get eof(): boolean {
    return this.#eof;
  }

  async #fill(): Promise<boolean> {
    if (this.#eof) return false;
    let n: number | null;
    try {
      n = await this.#conn.read(this.#buf);
    } catch {
      n = null;
    }
    if (n === null) {
      this.#eof = true;
      return false;
    }
    this.#parser.push(this.#buf.slice(0, n));
    return true;
  }

  /** Reads the 24-octet client preface; false when it is not there. */
  async readPreface(): Promise<boolean> {
    for (;;) {
      const head = this.#parser.take(PREFACE.length);
      if (head !== undefined) return new TextDecoder().decode(head) === PREFACE;
      if (!await this.#fill()) return false;
    }
  }

  /** The next frame from the client; undefined at EOF. */
  async readFrame(): Promise<RawFrame | undefined> {
    for (;;) {
      const f = this.#parser.next();
      if (f !== undefined) return f;
      if (!await this.#fill()) return undefined;
    }
  }

  /** Reads frames until `accept` takes one; undefined at EOF. */
  async expect(accept: (f: RawFrame) => boolean): Promise<RawFrame | undefined> {
    for (;;) {
      const f = await this.readFrame();
      if (f === undefined || accept(f)) return f;
    }
  }

  /** Reads until EOF, dropping what comes; resolves true at EOF, false after `timeoutMs`. */
  async untilEof(timeoutMs: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<false>((resolve) =>
      timer = setTimeout(() => resolve(false), timeoutMs)
    );
    const drain = (async () => {
      while (await this.readFrame() !== undefined) { /* dropped */ }
      return true;
    })();
    try {
      return await Promise.race([drain, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The server's side of the connection preface (RFC 9113 §3.4): reads the client's preface and
   * SETTINGS, sends `ours` and an ACK.
   *
   * @throws {Error} when the client does not start as HTTP/2 requires.
   */
  async handshake(ours: readonly [number, number][] = []): Promise<void> {
    if (!await this.readPreface()) throw new Error("no client preface");
    const first = await this.readFrame();
    if (first?.type !== T.SETTINGS) throw new Error("the client did not start with SETTINGS");
    for (let i = 0; i + 6 <= first.payload.length; i += 6) {
      this.clientSettings.push([
        (first.payload[i]! << 8) | first.payload[i + 1]!,
        readU32(first.payload, i + 2),
      ]);
    }
    await this.send(settings(ours), settingsAck());
  }

  /**
   * Reads frames until a request stream ended (END_STREAM), answering nothing; other frames are
   * dropped. Undefined at EOF.
   */
  async readRequest(): Promise<PeerRequest | undefined> {
    let block: number[] = [];
    let headers: Field[] | undefined;
    const body: number[] = [];
    for (;;) {
      const f = await this.readFrame();
      if (f === undefined) return undefined;
      if (f.type === T.HEADERS || f.type === T.CONTINUATION) {
        block.push(...f.payload);
        if (f.flags & F.END_HEADERS) {
          headers = this.#hpack.decode(Uint8Array.from(block));
          block = [];
        }
      } else if (f.type === T.DATA) {
        for (const b of f.payload) body.push(b);
      } else {
        continue;
      }
      if ((f.flags & F.END_STREAM) && headers !== undefined) {
        return { streamId: f.streamId, headers, body: Uint8Array.from(body) };
      }
    }
  }

  /** Writes `chunks` in one write; false when the connection is gone. */
  async send(...chunks: Uint8Array[]): Promise<boolean> {
    let size = 0;
    for (const c of chunks) size += c.length;
    let out = new Uint8Array(size);
    let offset = 0;
    for (const c of chunks) {
      out.set(c, offset);
      offset += c.length;
    }
    try {
      while (out.length > 0) out = out.subarray(await this.#conn.write(out));
      return true;
    } catch {
      return false;
    }
  }

  /** Writes `bytes` one octet per write, `delayMs` apart. */
  async trickle(bytes: Uint8Array, delayMs: number): Promise<boolean> {
    for (const b of bytes) {
      if (!await this.send(Uint8Array.of(b))) return false;
      await new Promise((r) => setTimeout(r, delayMs));
    }
    return true;
  }

  /**
   * Writes `unit` `count` times, in batches, without reading. Stops early when the socket takes
   * nothing for `stallMs` (the client stopped reading) or the connection is gone.
   */
  async flood(unit: Uint8Array, count: number, stallMs = 300): Promise<FloodResult> {
    const perBatch = Math.max(1, Math.floor(64 * 1024 / Math.max(1, unit.length)));
    const batch = new Uint8Array(unit.length * perBatch);
    for (let i = 0; i < perBatch; i++) batch.set(unit, i * unit.length);
    let written = 0;
    let left = count;
    while (left > 0) {
      const n = Math.min(left, perBatch);
      let rest = batch.subarray(0, n * unit.length);
      while (rest.length > 0) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const write = this.#conn.write(rest).catch(() => -1);
        const stall = new Promise<number>((r) => timer = setTimeout(() => r(-2), stallMs));
        const took = await Promise.race([write, stall]);
        clearTimeout(timer);
        if (took === -2) {
          // The write stays pending until the connection closes; it is not awaited.
          return { written, stalled: true };
        }
        if (took < 0) return { written, stalled: false };
        written += took;
        rest = rest.subarray(took);
      }
      left -= n;
    }
    return { written, stalled: false };
  }

  /** Closes the connection. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // closed
    }
  }
}

/** A HEADERS frame with literal fields (END_HEADERS set, `flags` added). */
export function headers(
  streamId: number,
  fields: readonly [string, string][],
  flags = 0,
): Uint8Array {
  return frame(T.HEADERS, F.END_HEADERS | flags, streamId, encodeLiterals(fields));
}

/** The headers of a gRPC response. */
export const GRPC_HEADERS: readonly [string, string][] = [
  [":status", "200"],
  ["content-type", "application/grpc"],
];

/** Trailers with `grpc-status` (and `grpc-message`). */
export function grpcTrailers(streamId: number, code: number, message?: string): Uint8Array {
  const fields: [string, string][] = [["grpc-status", String(code)]];
  if (message !== undefined) fields.push(["grpc-message", message]);
  return headers(streamId, fields, F.END_STREAM);
}

/** A complete OK answer to `streamId` carrying `message` (empty by default). */
export function grpcOk(streamId: number, message: ArrayLike<number> = []): Uint8Array[] {
  return [
    headers(streamId, [...GRPC_HEADERS]),
    grpcData(streamId, message),
    grpcTrailers(streamId, 0),
  ];
}

/** A well-behaved peer: handshake, then answer every request OK until EOF. */
export async function answerOk(peer: PeerConn): Promise<void> {
  await peer.handshake();
  for (;;) {
    const req = await peer.readRequest();
    if (req === undefined) return;
    await peer.send(...grpcOk(req.streamId));
  }
}

/** A running server (see {@link startRawPeer}). */
export type RawPeerServer = ScriptedSocketServer;

/**
 * Listens on a unix socket in a new temp dir and runs `script` on each connection (with its
 * index, from 0). A script's error is kept and rethrown by {@link RawPeerServer.close}.
 */
export function startRawPeer(
  script: (peer: PeerConn, index: number) => Promise<void>,
): Promise<RawPeerServer> {
  return startScriptedSocketServer("raw_peer", (conn) => new PeerConn(conn), script);
}

export { E, F, frame, T };
