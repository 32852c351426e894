/**
 * A scripted HTTP/2 server for tests of the attacher's HTTP/2 and gRPC client: each accepted
 * connection is handed to a script that reads the client's frames and writes frames byte by
 * byte as it likes (split, padded, CONTINUATION, GOAWAY, RST_STREAM, windows), which a real
 * server would not do on demand. It uses the attacher's frame and HPACK code for its own side;
 * interoperability with real servers is tested against grpc-js and, in e2e, grpc-go.
 *
 * @module
 */

import { type ScriptedSocketServer, startScriptedSocketServer } from "../scripted_socket_server.ts";
import {
  CLIENT_PREFACE,
  encodeFrame,
  Flag,
  type Frame,
  FrameReader,
  FrameType,
  parseSettings,
  settingsFrame,
} from "../../lib/wire/http2/frames.ts";
import { encodeHeaders, type HeaderField, HpackDecoder } from "../../lib/wire/http2/hpack.ts";

/** A request as the server read it. */
export interface RawRequest {
  streamId: number;
  headers: HeaderField[];
  body: Uint8Array;
}

/** One accepted connection. */
export class RawH2Conn {
  readonly #conn: Deno.Conn;
  readonly #reader = new FrameReader(1 << 24);
  readonly #hpack = new HpackDecoder();
  readonly #buf = new Uint8Array(64 * 1024);
  #preface = false;
  /** Every frame read, in order. */
  readonly frames: Frame[] = [];
  /** SETTINGS the client sent first. */
  clientSettings: [number, number][] = [];

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  /** Reads the next frame; undefined at EOF. */
  async readFrame(): Promise<Frame | undefined> {
    for (;;) {
      if (!this.#preface) {
        // The preface is not a frame: take its 24 bytes off first.
        const head = await this.#readExactly(CLIENT_PREFACE.length);
        if (head === undefined) return undefined;
        if (new TextDecoder().decode(head) !== new TextDecoder().decode(CLIENT_PREFACE)) {
          throw new Error("bad client preface");
        }
        this.#preface = true;
      }
      const next = this.#reader.next();
      if (next !== undefined) {
        // The reader gives a view of its buffer: keep a copy.
        const frame = { ...next, payload: next.payload.slice() };
        this.frames.push(frame);
        return frame;
      }
      const n = await this.#read();
      if (n === null) return undefined;
    }
  }

  #pending = new Uint8Array(0);

  async #read(): Promise<number | null> {
    let n: number | null;
    try {
      n = await this.#conn.read(this.#buf);
    } catch {
      return null;
    }
    if (n === null) return null;
    this.#reader.push(this.#buf.subarray(0, n));
    return n;
  }

  async #readExactly(length: number): Promise<Uint8Array | undefined> {
    while (this.#pending.length < length) {
      let n: number | null;
      try {
        n = await this.#conn.read(this.#buf);
      } catch {
        return undefined;
      }
      if (n === null) return undefined;
      const joined = new Uint8Array(this.#pending.length + n);
      joined.set(this.#pending);
      joined.set(this.#buf.subarray(0, n), this.#pending.length);
      this.#pending = joined;
    }
    const head = this.#pending.slice(0, length);
    this.#reader.push(this.#pending.subarray(length));
    this.#pending = new Uint8Array(0);
    return head;
  }

  /** Reads frames until one matches `accept`; throws at EOF. */
  async expectFrame(accept: (f: Frame) => boolean, what = "frame"): Promise<Frame> {
    for (;;) {
      const f = await this.readFrame();
      if (f === undefined) throw new Error(`EOF while waiting for ${what}`);
      if (accept(f)) return f;
    }
  }

  /**
   * Reads the client's preface and SETTINGS and answers with `settings` and an ACK of the
   * client's.
   */
  async handshake(settings: [number, number][] = []): Promise<void> {
    const first = await this.readFrame();
    if (first?.type !== FrameType.SETTINGS) throw new Error("client did not start with SETTINGS");
    this.clientSettings = parseSettings(first.payload);
    await this.write(settingsFrame(settings), settingsFrame([], true));
  }

  /** Reads frames until a whole request arrived (END_STREAM), skipping other frames. */
  async readRequest(): Promise<RawRequest> {
    let streamId = 0;
    let block: number[] = [];
    let headers: HeaderField[] | undefined;
    const body: number[] = [];
    for (;;) {
      const f = await this.expectFrame(() => true, "a request");
      if (f.type === FrameType.HEADERS || f.type === FrameType.CONTINUATION) {
        streamId = f.streamId;
        block.push(...f.payload);
        if (f.flags & Flag.END_HEADERS) {
          headers = this.#hpack.decode(new Uint8Array(block));
          block = [];
        }
      } else if (f.type === FrameType.DATA) {
        body.push(...f.payload);
      } else {
        continue;
      }
      if ((f.flags & Flag.END_STREAM) && headers !== undefined) {
        return { streamId, headers, body: new Uint8Array(body) };
      }
    }
  }

  /** Writes frames (already encoded) as one write. */
  async write(...frames: Uint8Array[]): Promise<void> {
    const size = frames.reduce((n, f) => n + f.length, 0);
    const out = new Uint8Array(size);
    let offset = 0;
    for (const f of frames) {
      out.set(f, offset);
      offset += f.length;
    }
    let rest = out;
    while (rest.length > 0) rest = rest.subarray(await this.#conn.write(rest));
  }

  /** Writes bytes one at a time, each in its own write (split reads on the other side). */
  async writeSlowly(bytes: Uint8Array): Promise<void> {
    for (const b of bytes) {
      await this.#conn.write(Uint8Array.of(b));
      await new Promise((r) => setTimeout(r, 0));
    }
  }

  /** Closes the socket. Idempotent. */
  close(): void {
    try {
      this.#conn.close();
    } catch {
      // closed
    }
  }
}

/** A HEADERS frame with the fields encoded, END_HEADERS set, `flags` added. */
export function headersFrame(streamId: number, fields: HeaderField[], flags = 0): Uint8Array {
  return encodeFrame(FrameType.HEADERS, Flag.END_HEADERS | flags, streamId, encodeHeaders(fields));
}

/** A gRPC response's headers. */
export const GRPC_OK_HEADERS: HeaderField[] = [
  [":status", "200"],
  ["content-type", "application/grpc"],
];

/** A DATA frame with a length-prefixed gRPC message. */
export function grpcDataFrame(streamId: number, message: Uint8Array, flags = 0): Uint8Array {
  const payload = new Uint8Array(5 + message.length);
  new DataView(payload.buffer).setUint32(1, message.length);
  payload.set(message, 5);
  return encodeFrame(FrameType.DATA, flags, streamId, payload);
}

/** A running scripted server (see {@link startRawH2Server}). */
export type RawH2Server = ScriptedSocketServer;

/**
 * Listens on a unix socket in a new temp dir; runs `script` for each connection (with its
 * index). Errors of scripts are rethrown by {@link RawH2Server.close}.
 */
export function startRawH2Server(
  script: (conn: RawH2Conn, index: number) => Promise<void>,
): Promise<RawH2Server> {
  return startScriptedSocketServer("raw_h2", (conn) => new RawH2Conn(conn), script);
}
