import assert from "node:assert/strict";
import { FrameError, LengthFrameSplitter, MAX_FRAME_BYTES, OBJECT_TOO_LARGE } from "./framing.ts";
import { lengthFrame } from "../../../testkit/kube_protobuf_writer.ts";

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

Deno.test("LengthFrameSplitter: frames split at every byte boundary come out whole", () => {
  const frames = [Uint8Array.of(1, 2, 3), new Uint8Array(0), new Uint8Array(300).fill(7)];
  const stream = concat(frames.map(lengthFrame));
  for (let cut = 0; cut <= stream.length; cut++) {
    const s = new LengthFrameSplitter();
    const got = [...s.push(stream.subarray(0, cut)), ...s.push(stream.subarray(cut))];
    assert.deepStrictEqual(got, frames, `cut at ${cut}`);
    s.end();
    assert.equal(s.pendingBytes, 0);
  }
  // One byte at a time.
  const s = new LengthFrameSplitter();
  const got: Uint8Array[] = [];
  for (const b of stream) got.push(...s.push(Uint8Array.of(b)));
  assert.deepStrictEqual(got, frames);
});

Deno.test("LengthFrameSplitter: a length over 16 MiB is refused when read, before buffering", () => {
  assert.equal(MAX_FRAME_BYTES, 16 * 1024 * 1024);
  for (const length of [MAX_FRAME_BYTES + 1, 0xffffffff]) {
    const s = new LengthFrameSplitter();
    const header = new Uint8Array(4);
    new DataView(header.buffer).setUint32(0, length);
    assert.deepStrictEqual(s.push(header.subarray(0, 3)), []);
    assert.throws(() => s.push(header.subarray(3)), (err: unknown) => {
      assert.ok(err instanceof FrameError);
      assert.ok(err.message.startsWith(OBJECT_TOO_LARGE), err.message);
      return true;
    });
    assert.equal(s.pendingBytes, 0);
  }
  // Exactly the limit is accepted (and kept only as it arrives).
  const s = new LengthFrameSplitter();
  const header = new Uint8Array(4);
  new DataView(header.buffer).setUint32(0, MAX_FRAME_BYTES);
  s.push(header);
  s.push(new Uint8Array(1000));
  assert.equal(s.pendingBytes, 1000);
});

Deno.test("LengthFrameSplitter: a stream ending inside a frame or its length is an error", () => {
  const s = new LengthFrameSplitter();
  s.push(Uint8Array.of(0, 0));
  assert.throws(() => s.end(), /2 of the 4 bytes of a frame length/);
  const t = new LengthFrameSplitter();
  t.push(Uint8Array.of(0, 0, 0, 9, 1));
  assert.throws(() => t.end(), /1 of the 9 bytes of a frame/);
});

Deno.test("LengthFrameSplitter: a frame inside one chunk is a view, one across chunks a copy", () => {
  const stream = lengthFrame(Uint8Array.of(5, 6));
  const [frame] = new LengthFrameSplitter().push(stream);
  assert.equal(frame!.buffer, stream.buffer);
  const s = new LengthFrameSplitter();
  s.push(stream.subarray(0, 5));
  const [joined] = s.push(stream.subarray(5));
  assert.notEqual(joined!.buffer, stream.buffer);
  assert.deepStrictEqual(joined, Uint8Array.of(5, 6));
});
