import assert from "node:assert/strict";
import { concatBytes, readAllChunks } from "./bytes.ts";

Deno.test("concatBytes returns a single part as is and joins several in order", () => {
  const one = new Uint8Array([1, 2]);
  assert.equal(concatBytes([one]), one, "no copy of a single part");
  const parts = [new Uint8Array([1]), new Uint8Array(0), new Uint8Array([2, 3])];
  assert.deepEqual(concatBytes(parts), new Uint8Array([1, 2, 3]));
  assert.deepEqual(concatBytes(parts, 3), new Uint8Array([1, 2, 3]));
  assert.deepEqual(concatBytes([]), new Uint8Array(0));
});

Deno.test("readAllChunks() joins every piece until the end, and none is an empty array", async () => {
  const pieces = [[Uint8Array.of(1, 2)], [Uint8Array.of(3), Uint8Array.of(4, 5)], null];
  let i = 0;
  const all = await readAllChunks(() => Promise.resolve(pieces[i++] ?? null));
  assert.deepEqual([...all], [1, 2, 3, 4, 5]);
  assert.equal(i, 3, "read up to and including the end");
  assert.equal((await readAllChunks(() => Promise.resolve(null))).length, 0);
});
