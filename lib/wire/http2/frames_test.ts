import assert from "node:assert/strict";
import {
  ConnectionError,
  encodeFrame,
  ErrorCode,
  errorCodeName,
  Flag,
  FrameReader,
  FrameType,
  goAwayFrame,
  parseSettings,
  readUint31,
  readUint32,
  settingsFrame,
  unpad,
  windowUpdateFrame,
} from "./frames.ts";

Deno.test("encodeFrame() writes the 9-byte header of RFC 9113 §4.1", () => {
  const frame = encodeFrame(FrameType.HEADERS, Flag.END_HEADERS, 0x7fffffff, Uint8Array.of(1, 2));
  assert.deepEqual([...frame], [0, 0, 2, 1, 4, 0x7f, 0xff, 0xff, 0xff, 1, 2]);
  assert.deepEqual([...windowUpdateFrame(3, 65_536)], [0, 0, 4, 8, 0, 0, 0, 0, 3, 0, 1, 0, 0]);
  assert.deepEqual(parseSettings(settingsFrame([[4, 1 << 22], [2, 0]]).subarray(9)), [
    [4, 1 << 22],
    [2, 0],
  ]);
  const goAway = goAwayFrame(5, ErrorCode.PROTOCOL_ERROR, "bad");
  assert.equal(readUint31(goAway, 9), 5);
  assert.equal(readUint32(goAway, 13), 1);
  assert.equal(new TextDecoder().decode(goAway.subarray(17)), "bad");
  assert.equal(errorCodeName(ErrorCode.CANCEL), "CANCEL");
  assert.equal(errorCodeName(0x2a), "unknown error code 0x2a");
});

Deno.test("FrameReader gives whole frames whatever the read boundaries", () => {
  const frames = [
    encodeFrame(FrameType.SETTINGS, 0, 0, new Uint8Array(12).fill(1)),
    encodeFrame(FrameType.DATA, Flag.END_STREAM, 1, new Uint8Array(40_000).fill(7)),
    encodeFrame(FrameType.PING, 0, 0, new Uint8Array(8)),
  ];
  const stream = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
  let offset = 0;
  for (const f of frames) {
    stream.set(f, offset);
    offset += f.length;
  }
  for (const chunkSize of [1, 7, 9, 1000, stream.length]) {
    const reader = new FrameReader(1 << 16);
    const got = [];
    for (let i = 0; i < stream.length; i += chunkSize) {
      reader.push(stream.subarray(i, i + chunkSize));
      // A frame is valid until the next call: read it now.
      for (let f = reader.next(); f; f = reader.next()) {
        got.push([f.type, f.flags, f.streamId, f.payload.length, f.payload.every((b) => b === 7)]);
      }
    }
    assert.deepEqual(got, [
      [FrameType.SETTINGS, 0, 0, 12, false],
      [FrameType.DATA, Flag.END_STREAM, 1, 40_000, true],
      [FrameType.PING, 0, 0, 8, false],
    ], `chunks of ${chunkSize}`);
  }
});

Deno.test("FrameReader copies no payload: a flood of tiny frames keeps one buffer", () => {
  const reader = new FrameReader();
  const unit = encodeFrame(FrameType.DATA, 0, 1, Uint8Array.of(42));
  const stream = new Uint8Array(50 * 64 * 1024 - 7); // reads end inside frames
  for (let i = 0; i < stream.length; i++) stream[i] = unit[i % unit.length]!;
  let first: object | undefined;
  let frames = 0;
  for (let pos = 0; pos < stream.length; pos += 64 * 1024) {
    reader.push(stream.subarray(pos, pos + 64 * 1024));
    for (let f = reader.next(); f; f = reader.next()) {
      first ??= f;
      assert.equal(f, first, "the same frame object every time");
      frames++;
    }
    assert.ok(reader.capacity <= 128 * 1024, `buffer of ${reader.capacity} octets`);
  }
  assert.ok(frames > 300_000);
});

Deno.test("FrameReader rejects a frame above its maximum size with FRAME_SIZE_ERROR", () => {
  const reader = new FrameReader();
  reader.push(encodeFrame(FrameType.DATA, 0, 1, new Uint8Array(16_385)).subarray(0, 9));
  assert.throws(() => reader.next(), (err: unknown) => {
    assert.ok(err instanceof ConnectionError);
    assert.equal(err.code, ErrorCode.FRAME_SIZE_ERROR);
    return true;
  });
});

Deno.test("unpad() strips padding and the priority block, and rejects padding beyond the payload", () => {
  const data = { type: FrameType.DATA, flags: Flag.PADDED, streamId: 1 };
  assert.deepEqual([...unpad({ ...data, payload: Uint8Array.of(2, 9, 8, 0, 0) })], [9, 8]);
  assert.deepEqual([...unpad({ ...data, flags: 0, payload: Uint8Array.of(2, 9) })], [2, 9]);
  const headers = { type: FrameType.HEADERS, flags: Flag.PADDED | Flag.PRIORITY, streamId: 1 };
  assert.deepEqual([...unpad({ ...headers, payload: Uint8Array.of(1, 0, 0, 0, 3, 16, 0x82, 0) })], [
    0x82,
  ]);
  assert.throws(
    () => unpad({ ...data, payload: Uint8Array.of(5, 1) }),
    (err: unknown) => err instanceof ConnectionError && err.code === ErrorCode.PROTOCOL_ERROR,
  );
  assert.throws(() => parseSettings(new Uint8Array(5)), ConnectionError);
});
