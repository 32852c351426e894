import assert from "node:assert/strict";
import { FencedError } from "../../lease_fence.ts";
import { Http2Session, MAX_HEADER_LIST_SIZE } from "./session.ts";
import { StreamError } from "./stream_error.ts";
import {
  E,
  F,
  frame,
  goAway,
  ping,
  settings,
  T,
  windowUpdate,
} from "../../../testkit/h2/frame_codec.ts";
import { encodeInteger, encodeString } from "../../../testkit/h2/hpack_reference.ts";
import { grpcOk, headers, type PeerConn, startRawPeer } from "../../../testkit/h2/raw_peer.ts";

const REQUEST: [string, string][] = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/p"],
  [":authority", "localhost"],
];

declare const gc: () => void;

/** Live heap after a full collection, in MiB (`deno test --v8-flags=--expose-gc`). */
function liveHeapMiB(): number {
  if (typeof gc === "function") {
    gc();
    gc();
  }
  return Deno.memoryUsage().heapUsed / 2 ** 20;
}

/**
 * Runs `fn` with a session to a raw peer running `script`; then gives the script up to 2 s to
 * finish, and closes both.
 */
async function withSession(
  script: (peer: PeerConn) => Promise<void>,
  fn: (session: Http2Session, gone: Promise<string>) => Promise<void>,
): Promise<void> {
  let scriptDone!: () => void;
  const done = new Promise<void>((resolve) => scriptDone = resolve);
  const server = await startRawPeer((peer) => script(peer).finally(scriptDone));
  const conn = await Deno.connect({ transport: "unix", path: server.address });
  let onGone!: (reason: string) => void;
  const gone = new Promise<string>((resolve) => onGone = resolve);
  const session = await Http2Session.start(conn, onGone);
  try {
    await fn(session, gone);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([done, new Promise((r) => timer = setTimeout(r, 2000))]);
    clearTimeout(timer);
  } finally {
    session.close();
    await server.close();
  }
}

/** The failure of a request, or "ok"; fails the test when it takes more than 5 s. */
async function outcome(p: Promise<unknown>): Promise<StreamError | "ok"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("the request did not settle within 5 s")), 5000);
  });
  try {
    return await Promise.race([
      p.then(() => "ok" as const, (err: unknown) => {
        assert.ok(err instanceof StreamError, `expected a StreamError, got ${err}`);
        return err;
      }),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("a flood of empty CONTINUATION frames ends the connection with ENHANCE_YOUR_CALM", async () => {
  let goAwayCode: number | undefined;
  let floodWritten = 0;
  await withSession(async (peer) => {
    await peer.handshake();
    const req = await peer.readRequest();
    if (req === undefined) return;
    await peer.send(frame(T.HEADERS, 0, req.streamId, [0x88])); // :status 200, no END_HEADERS
    floodWritten = (await peer.flood(frame(T.CONTINUATION, 0, req.streamId), 300_000)).written;
    const f = await peer.expect((f) => f.type === T.GOAWAY);
    goAwayCode = f === undefined ? undefined : new DataView(f.payload.buffer).getUint32(4);
  }, async (session, gone) => {
    const before = liveHeapMiB();
    const result = await outcome(session.request(REQUEST, new Uint8Array(), 1024).response);
    assert.ok(result !== "ok" && result.failure.kind === "connection", String(result));
    assert.match(result.message, /ENHANCE_YOUR_CALM: too many CONTINUATION frames/);
    assert.match(await gone, /too many CONTINUATION/);
    assert.ok(liveHeapMiB() - before < 4, "the frames were not kept");
  });
  assert.equal(goAwayCode, E.ENHANCE_YOUR_CALM);
  assert.ok(floodWritten < 300_000 * 9, "the client stopped reading the flood");
});

/**
 * A peer that does not read what the client writes and floods it with `unit` (a PING or a
 * SETTINGS frame): each asks for an answer, which cannot be written.
 */
async function floodWhileBlocked(unit: Uint8Array): Promise<void> {
  let stalled = false;
  let written = 0;
  let release!: () => void;
  const released = new Promise<void>((r) => release = r);
  let measured!: () => void;
  const floodDone = new Promise<void>((r) => measured = r);
  await withSession(async (peer) => {
    // Windows as large as allowed: the client's DATA is held back only by the socket.
    await peer.handshake([[4, 2 ** 31 - 1]]);
    await peer.send(windowUpdate(0, 2 ** 31 - 1 - 65_535));
    await peer.expect((f) => f.type === T.HEADERS);
    const result = await peer.flood(unit, 400_000);
    stalled = result.stalled;
    written = result.written;
    measured();
    await released;
  }, async (session) => {
    const before = liveHeapMiB();
    const body = new Uint8Array(8 * 1024 * 1024);
    const stream = session.request(REQUEST, body, 1024);
    await floodDone;
    const grown = liveHeapMiB() - before;
    stream.cancel();
    release();
    await outcome(stream.response);
    assert.ok(grown < 16, `the heap grew ${grown.toFixed(1)} MiB while flooded`);
  });
  assert.ok(stalled, "the client stopped reading");
  assert.ok(written < 400_000 * unit.length / 4, `${written} octets of flood were read`);
}

Deno.test("a PING flood while the client's writes are blocked: reading stops, memory stays bounded", async () => {
  await floodWhileBlocked(ping(7));
});

Deno.test("a SETTINGS flood while the client's writes are blocked: reading stops, memory stays bounded", async () => {
  await floodWhileBlocked(settings([[3, 100]]));
});

Deno.test("a PING flood from a peer that reads is answered in full", async () => {
  let acks = 0;
  await withSession(async (peer) => {
    await peer.handshake();
    const req = await peer.readRequest();
    if (req === undefined) return;
    const reading = (async () => {
      for (let f = await peer.readFrame(); f !== undefined; f = await peer.readFrame()) {
        if (f.type === T.PING && (f.flags & F.ACK)) acks++;
        if (acks === 5000) return;
      }
    })();
    await peer.flood(ping(1), 5000);
    await reading;
    await peer.send(...grpcOk(req.streamId));
  }, async (session) => {
    const result = await outcome(session.request(REQUEST, Uint8Array.of(1), 1024).response);
    assert.equal(result, "ok");
  });
  assert.equal(acks, 5000);
});

Deno.test("a header list above SETTINGS_MAX_HEADER_LIST_SIZE fails the stream, not the connection", async () => {
  let reset: number | undefined;
  let announced: number | undefined;
  await withSession(async (peer) => {
    await peer.handshake();
    announced = peer.clientSettings.find(([id]) => id === 6)?.[1];
    const first = await peer.readRequest();
    if (first === undefined) return;
    // A 4000-octet value indexed once (§6.2.1), then referred to by one octet each (§6.1).
    const value = "v".repeat(4000);
    const block = [0x88, 0x40, ...encodeString("x-big"), ...encodeString(value)];
    const refs = Math.ceil(MAX_HEADER_LIST_SIZE / (5 + 4000 + 32));
    for (let i = 0; i < refs; i++) block.push(...encodeInteger(62, 7, 0x80));
    await peer.send(frame(T.HEADERS, F.END_HEADERS, first.streamId, block));
    const rst = await peer.expect((f) => f.type === T.RST_STREAM);
    reset = rst === undefined ? undefined : new DataView(rst.payload.buffer).getUint32(0);
    // The same connection answers the next request; its dynamic table still has the entry.
    const second = await peer.readRequest();
    if (second === undefined) return;
    await peer.send(frame(T.HEADERS, F.END_HEADERS, second.streamId, [0x88, 0xbe]));
    await peer.send(...grpcOk(second.streamId).slice(1));
  }, async (session) => {
    const first = await outcome(session.request(REQUEST, Uint8Array.of(1), 1024).response);
    assert.ok(first !== "ok" && first.failure.kind === "headers-too-large", String(first));
    assert.equal(first.message, `response header list larger than ${MAX_HEADER_LIST_SIZE} octets`);
    const stream = session.request(REQUEST, Uint8Array.of(1), 1024);
    assert.equal(await outcome(stream.response), "ok");
    const second = await stream.response;
    assert.deepEqual(second.headers, [[":status", "200"], ["x-big", "v".repeat(4000)]]);
  });
  assert.equal(reset, E.FRAME_SIZE_ERROR);
  assert.equal(announced, MAX_HEADER_LIST_SIZE);
});

Deno.test("SETTINGS_INITIAL_WINDOW_SIZE that overflows an open stream's window is FLOW_CONTROL_ERROR", async () => {
  let goAwayCode: number | undefined;
  await withSession(async (peer) => {
    await peer.handshake();
    await peer.expect((f) => f.type === T.HEADERS);
    await peer.send(windowUpdate(1, 2 ** 31 - 1 - 65_535)); // the stream's window at the maximum
    await peer.send(settings([[4, 65_536]])); // one more octet for every stream
    const f = await peer.expect((f) => f.type === T.GOAWAY);
    goAwayCode = f === undefined ? undefined : new DataView(f.payload.buffer).getUint32(4);
  }, async (session) => {
    const result = await outcome(session.request(REQUEST, new Uint8Array(), 1024).response);
    assert.ok(result !== "ok", "the stream failed");
    assert.match(result.message, /FLOW_CONTROL_ERROR: stream window overflow/);
  });
  assert.equal(goAwayCode, E.FLOW_CONTROL_ERROR);
});

Deno.test("GOAWAY then a header block for a stream above last-stream-id is still decoded", async () => {
  await withSession(async (peer) => {
    await peer.handshake();
    const req = await peer.readRequest();
    if (req === undefined) return;
    await peer.send(goAway(req.streamId, E.NO_ERROR));
    await peer.send(headers(req.streamId, [[":status", "200"], ["content-type", "a"]]));
    await peer.send(headers(req.streamId, [["grpc-status", "0"]], F.END_STREAM));
  }, async (session) => {
    const stream = session.request(REQUEST, Uint8Array.of(1), 1024);
    assert.equal(await outcome(stream.response), "ok");
    assert.deepEqual((await stream.response).trailers, [["grpc-status", "0"]]);
    assert.equal(session.usable, false);
  });
});

Deno.test("a request's fence that closes after its HEADERS went out stops its DATA and resets the stream", async () => {
  const seen: string[] = [];
  let open = true;
  let asked = 0;
  await withSession(async (peer) => {
    await peer.handshake([[4, 10]]); // a 10-octet stream window: the body goes out in parts
    for (let f = await peer.readFrame(); f !== undefined; f = await peer.readFrame()) {
      if (f.type === T.HEADERS) seen.push("HEADERS");
      if (f.type === T.DATA) {
        seen.push(`DATA ${f.payload.length}${f.flags & F.END_STREAM ? " END_STREAM" : ""}`);
        open = false; // closes before the rest may be sent
        await peer.send(windowUpdate(f.streamId, 1000));
      }
      if (f.type === T.RST_STREAM) {
        seen.push(`RST_STREAM ${new DataView(f.payload.buffer).getUint32(0)}`);
        return;
      }
    }
  }, async (session) => {
    const fence = {
      valid: () => {
        asked++;
        return open;
      },
    };
    await assert.rejects(
      session.request(REQUEST, new Uint8Array(100), 1024, { fence }).response,
      FencedError,
    );
  });
  assert.deepEqual(seen, ["HEADERS", "DATA 10", `RST_STREAM ${E.CANCEL}`]);
  assert.equal(asked, 2, "asked before each write that carried the request's frames");
});

Deno.test("a request whose fence says no at once writes nothing; the next request works", async () => {
  const seen: number[] = [];
  await withSession(async (peer) => {
    await peer.handshake();
    const req = await peer.readRequest();
    if (req === undefined) return;
    seen.push(req.streamId);
    for (const f of grpcOk(req.streamId)) await peer.send(f);
  }, async (session) => {
    await assert.rejects(
      session.request(REQUEST, Uint8Array.of(1), 1024, { fence: { valid: () => false } }).response,
      FencedError,
    );
    assert.equal(await outcome(session.request(REQUEST, Uint8Array.of(1), 1024).response), "ok");
  });
  assert.deepEqual(
    seen,
    [3],
    "stream 1 never reached the peer (skipping an id is allowed, §5.1.1)",
  );
});

/**
 * A connection whose reads resolve at once (no I/O turn between them) once {@link open} is
 * called, the first one before; writes vanish.
 */
class InstantConn {
  #queue: Uint8Array[];
  #reads = 0;
  #close!: () => void;
  readonly #closed = new Promise<null>((resolve) => this.#close = () => resolve(null));
  open!: () => void;
  readonly #opened = new Promise<void>((resolve) => this.open = resolve);

  constructor(chunks: Uint8Array[]) {
    this.#queue = chunks;
  }

  async read(buf: Uint8Array): Promise<number | null> {
    if (this.#reads++ === 1) await this.#opened;
    const next = this.#queue[0];
    if (next === undefined) return this.#closed;
    const n = Math.min(buf.length, next.length);
    buf.set(next.subarray(0, n));
    if (n === next.length) this.#queue.shift();
    else this.#queue[0] = next.subarray(n);
    return n;
  }

  write(bytes: Uint8Array): Promise<number> {
    return Promise.resolve(bytes.length);
  }

  close(): void {
    this.#close();
  }
}

Deno.test("a flood of one-octet DATA frames lets timers run and keeps the answer in one array", async () => {
  const length = 200_000;
  const message = new Uint8Array(5 + length);
  new DataView(message.buffer).setUint32(1, length);
  const flood = new Uint8Array(message.length * 10);
  message.forEach((b, i) => flood.set(frame(T.DATA, 0, 1, [b]), i * 10));
  const conn = new InstantConn([
    settings(),
    headers(1, [[":status", "200"], ["content-type", "application/grpc"]]),
    flood,
    headers(1, [["grpc-status", "0"]], F.END_STREAM),
  ]);
  const session = await Http2Session.start(conn as unknown as Deno.Conn, () => {});
  try {
    let timerRan = false;
    const timer = setTimeout(() => timerRan = true, 0);
    const hint = {
      prefixLength: 5,
      total: (p: Uint8Array) => 5 + new DataView(p.buffer, p.byteOffset).getUint32(1),
    };
    const stream = session.request(REQUEST, new Uint8Array(0), 1 << 20, { sizeHint: hint });
    conn.open();
    const res = await stream.response;
    clearTimeout(timer);
    // 200 005 frames take far longer than one turn's budget: the loop gave timers their turn.
    assert.ok(timerRan, "a timer waited for the whole flood");
    assert.deepEqual(res.data, message);
    assert.equal(res.data.buffer.byteLength, message.length, "one array, sized by the prefix");
  } finally {
    session.close();
  }
});
