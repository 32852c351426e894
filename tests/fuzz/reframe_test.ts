import assert from "node:assert/strict";
import { reframe } from "./reframe.ts";
import { F, frame, FrameParser, T } from "../../testkit/h2/frame_codec.ts";

/** Per stream: the DATA octets, the header block octets, END_STREAM seen; and other frames. */
function meaning(stream: Uint8Array) {
  const parser = new FrameParser();
  parser.push(stream);
  const data = new Map<number, number[]>();
  const blocks: number[][] = [];
  const others: string[] = [];
  let ends = 0;
  for (let f = parser.next(); f; f = parser.next()) {
    if (f.flags & F.END_STREAM && (f.type === T.DATA || f.type === T.HEADERS)) ends++;
    if (f.type === T.DATA) data.set(f.streamId, [...(data.get(f.streamId) ?? []), ...f.payload]);
    else if (f.type === T.HEADERS) blocks.push([...f.payload]);
    else if (f.type === T.CONTINUATION) blocks.at(-1)!.push(...f.payload);
    else others.push(`${f.type}/${f.flags}/${f.streamId}/${f.payload.join(",")}`);
  }
  return { data: [...data], blocks, others, ends, rest: parser.buffered };
}

Deno.test("reframe keeps the DATA, the header blocks and every other frame, in other frames", () => {
  const stream = Uint8Array.from([
    ...frame(T.HEADERS, F.END_HEADERS, 1, new Uint8Array(300).fill(0x88)),
    ...frame(T.DATA, 0, 1, Array.from({ length: 2000 }, (_, i) => i & 0xff)),
    ...frame(T.PING, 0, 0, new Uint8Array(8)),
    ...frame(T.DATA, F.PADDED, 1, [2, 7, 0, 0]),
    ...frame(T.DATA, F.END_STREAM, 1, [1, 2, 3, 4, 5]),
    ...frame(T.DATA, 0, 3, [9, 9]).subarray(0, 12), // a partial frame at the end
  ]);
  const cut = reframe(stream, 1);
  assert.ok(cut.length > stream.length + 9 * 20, "cut into more frames");
  const a = meaning(stream);
  const b = meaning(cut);
  assert.deepEqual(b.data, a.data);
  assert.deepEqual(b.blocks, a.blocks);
  assert.deepEqual(b.others, a.others);
  assert.equal(b.ends, a.ends);
  assert.equal(b.rest, a.rest);
  assert.deepEqual(reframe(stream, 1), cut, "the same cuts for the same input");
});
