import assert from "node:assert/strict";
import { ReceiveBuffer } from "./receive_buffer.ts";

const PREFIX = {
  prefixLength: 5,
  total: (p: Uint8Array) => 5 + new DataView(p.buffer, p.byteOffset, 5).getUint32(1),
};

function message(length: number): Uint8Array {
  const out = new Uint8Array(5 + length);
  new DataView(out.buffer).setUint32(1, length);
  for (let i = 5; i < out.length; i++) out[i] = i & 0xff;
  return out;
}

Deno.test("ReceiveBuffer: one-octet appends keep one array sized from the length prefix", () => {
  const bytes = message(300_000);
  const buffer = new ReceiveBuffer(4 * 1024 * 1024 + 5, PREFIX);
  const capacities = new Set<number>();
  for (const b of bytes) {
    buffer.append(Uint8Array.of(b));
    capacities.add(buffer.capacity);
  }
  assert.deepEqual(buffer.bytes(), bytes);
  // 1 KiB until the prefix is read, then exactly the message.
  assert.deepEqual([...capacities], [1024, bytes.length]);
});

Deno.test("ReceiveBuffer: without a hint it doubles, never past the limit", () => {
  const limit = 100_000;
  const buffer = new ReceiveBuffer(limit);
  const chunk = new Uint8Array(7).fill(3);
  while (buffer.length + chunk.length <= limit) {
    buffer.append(chunk);
    assert.ok(buffer.capacity <= Math.max(1024, 2 * buffer.length), `${buffer.capacity}`);
    assert.ok(buffer.capacity <= limit);
  }
  assert.ok(buffer.bytes().every((b) => b === 3));
});

Deno.test("ReceiveBuffer: a prefix that promises more than the limit is capped by it", () => {
  const buffer = new ReceiveBuffer(2048, PREFIX);
  const head = message(0);
  new DataView(head.buffer).setUint32(1, 2 ** 32 - 1);
  buffer.append(head);
  buffer.append(new Uint8Array(1500));
  assert.equal(buffer.capacity, 2048);
  assert.equal(buffer.length, 1505);
});

Deno.test("ReceiveBuffer: a prefix that promises less than arrives grows on", () => {
  const buffer = new ReceiveBuffer(1 << 20, PREFIX);
  buffer.append(message(10));
  buffer.append(new Uint8Array(5000).fill(1));
  assert.equal(buffer.length, 5015);
  assert.ok(buffer.capacity >= 5015 && buffer.capacity <= 2 * 5015);
});
