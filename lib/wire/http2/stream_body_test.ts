import assert from "node:assert/strict";
import { Http2Session } from "./session.ts";
import { StreamError } from "./stream_error.ts";
import { frame, ping, T } from "../../../testkit/h2/frame_codec.ts";
import { headers, type PeerConn, startRawPeer } from "../../../testkit/h2/raw_peer.ts";
import { FakeClock } from "../../../testkit/fakes/fake_clock.ts";
import type { Http2SessionOptions } from "./session_types.ts";
import { StreamBody } from "./stream_body.ts";

const REQUEST: [string, string][] = [
  [":method", "GET"],
  [":scheme", "https"],
  [":path", "/api/v1/persistentvolumes?watch=true"],
  [":authority", "localhost"],
];

async function withSession(
  script: (peer: PeerConn) => Promise<void>,
  fn: (session: Http2Session, gone: Promise<string>) => Promise<void>,
  options: Http2SessionOptions = {},
): Promise<void> {
  let scriptDone!: () => void;
  const done = new Promise<void>((resolve) => scriptDone = resolve);
  const server = await startRawPeer((peer) => script(peer).finally(scriptDone));
  const conn = await Deno.connect({ transport: "unix", path: server.address });
  let onGone!: (reason: string) => void;
  const gone = new Promise<string>((resolve) => onGone = resolve);
  const session = await Http2Session.start(conn, onGone, options);
  try {
    await fn(session, gone);
    await done;
  } finally {
    session.close();
    await server.close();
  }
}

function data(streamId: number, bytes: Uint8Array, flags = 0): Uint8Array {
  return frame(T.DATA, flags, streamId, bytes);
}

async function readAll(body: { next(): Promise<Uint8Array[] | null> }): Promise<Uint8Array> {
  const parts: number[] = [];
  for (let d = await body.next(); d !== null; d = await body.next()) {
    for (const p of d) parts.push(...p);
  }
  return Uint8Array.from(parts);
}

Deno.test("open: the body arrives piece by piece and ends with END_STREAM", async () => {
  await withSession(async (peer) => {
    await peer.handshake();
    const req = await peer.readRequest();
    assert.ok(req);
    await peer.send(headers(req.streamId, [[":status", "200"], ["content-type", "x/y"]]));
    await peer.send(data(req.streamId, new Uint8Array([1, 2, 3])));
    await peer.send(data(req.streamId, new Uint8Array([4]), 1 /* END_STREAM */));
  }, async (session) => {
    const stream = session.open(REQUEST, new Uint8Array(0), 1 << 20);
    const head = await stream.head;
    assert.deepEqual(head.find(([n]) => n === ":status"), [":status", "200"]);
    assert.deepEqual(await readAll(stream.body), new Uint8Array([1, 2, 3, 4]));
  });
});

Deno.test("open: the stream window comes back only as the reader consumes", async () => {
  const window = 32 * 1024;
  let consumedByReader!: () => void;
  const readerDone = new Promise<void>((r) => consumedByReader = r);
  let filled!: () => void;
  const windowFilled = new Promise<void>((r) => filled = r);
  await withSession(async (peer) => {
    await peer.handshake();
    const req = await peer.readRequest();
    assert.ok(req);
    const id = req.streamId;
    await peer.send(headers(id, [[":status", "200"]]));
    await peer.send(data(id, new Uint8Array(16 * 1024)), data(id, new Uint8Array(16 * 1024)));
    // A PING answered after the whole window arrived: nothing gave the window back before it.
    await peer.send(ping(7));
    const before = await peer.expect((f) =>
      (f.type === T.PING && (f.flags & 1) !== 0) ||
      (f.type === T.WINDOW_UPDATE && f.streamId === id)
    );
    assert.equal(before?.type, T.PING, "no WINDOW_UPDATE of the stream before it was read");
    filled();
    await readerDone;
    const update = await peer.expect((f) => f.type === T.WINDOW_UPDATE && f.streamId === id);
    assert.ok(update);
    const increment = new DataView(update.payload.buffer, update.payload.byteOffset).getUint32(0);
    assert.equal(increment, window);
    await peer.send(data(id, new Uint8Array(5), 1));
  }, async (session) => {
    const stream = session.open(REQUEST, new Uint8Array(0), 1 << 20);
    await stream.head;
    await windowFilled;
    const first = await stream.body.next();
    assert.equal(first?.reduce((n, p) => n + p.length, 0), window);
    consumedByReader();
    assert.equal((await readAll(stream.body)).length, 5);
  }, { initialWindowSize: window });
});

Deno.test("open: DATA beyond maxDataBytes fails the body's read too-large", async () => {
  await withSession(async (peer) => {
    await peer.handshake();
    const req = await peer.readRequest();
    assert.ok(req);
    await peer.send(headers(req.streamId, [[":status", "200"]]));
    await peer.send(data(req.streamId, new Uint8Array(100)));
    await peer.expect((f) => f.type === T.RST_STREAM);
  }, async (session) => {
    const stream = session.open(REQUEST, new Uint8Array(0), 50);
    await stream.head;
    const err = await stream.body.next().then(() => undefined, (e) => e);
    assert.ok(err instanceof StreamError);
    assert.equal(err.failure.kind, "too-large");
  });
});

Deno.test("health check: a PING after the read idle timeout; no ACK closes the connection", async () => {
  const clock = new FakeClock();
  let pinged!: () => void;
  const sawPing = new Promise<void>((r) => pinged = r);
  await withSession(async (peer) => {
    await peer.handshake();
    const f = await peer.expect((f) => f.type === T.PING && (f.flags & 1) === 0);
    assert.ok(f, "the client sent a PING");
    pinged();
    assert.equal(await peer.untilEof(5000), true);
  }, async (session, gone) => {
    const stream = session.open(REQUEST, new Uint8Array(0), 1 << 20);
    clock.advance(29_000);
    clock.advance(1_000);
    await sawPing;
    clock.advance(15_000);
    assert.equal(await gone, "http2: client connection lost");
    const err = await stream.head.then(() => undefined, (e) => e);
    assert.ok(err instanceof StreamError && err.failure.kind === "connection");
  }, { clock, readIdleTimeoutMs: 30_000, pingTimeoutMs: 15_000 });
});

Deno.test("health check: an answered PING keeps the connection", async () => {
  const clock = new FakeClock();
  let acked!: () => void;
  const ackSent = new Promise<void>((r) => acked = r);
  let finish!: () => void;
  const finished = new Promise<void>((r) => finish = r);
  await withSession(async (peer) => {
    await peer.handshake();
    const f = await peer.expect((f) => f.type === T.PING && (f.flags & 1) === 0);
    assert.ok(f);
    await peer.send(frame(T.PING, 1, 0, f.payload));
    // Our own PING, answered after the client's ACK: the client has read the first ACK.
    await peer.send(ping(9));
    await peer.expect((f) => f.type === T.PING && (f.flags & 1) !== 0);
    acked();
    await finished;
  }, async (session) => {
    clock.advance(30_000);
    await ackSent;
    clock.advance(15_000);
    assert.equal(session.usable, true);
    finish();
  }, { clock, readIdleTimeoutMs: 30_000, pingTimeoutMs: 15_000 });
});

Deno.test("StreamBody: one-octet DATA fills shared blocks, never one view per frame", async () => {
  let consumed = 0;
  const body = new StreamBody({ consumed: (n) => consumed += n });
  const octet = new Uint8Array(1);
  for (let i = 0; i < 100_000; i++) {
    octet[0] = i & 0xff;
    body.append(octet); // the same view each time, as the frame reader's buffer is reused
  }
  assert.equal(body.queued, 100_000);
  assert.equal(consumed, 0, "nothing given back before the reader takes it");
  const views = await body.next();
  assert.ok(
    views !== null && views.length <= Math.ceil(100_000 / (16 * 1024)) + 5,
    `${views?.length}`,
  );
  const all = new Uint8Array(100_000);
  let at = 0;
  for (const v of views!) {
    all.set(v, at);
    at += v.length;
  }
  assert.equal(at, 100_000);
  assert.ok(all.every((b, i) => b === (i & 0xff)));
  assert.equal(consumed, 100_000);
  body.end();
  assert.equal(await body.next(), null);
});
