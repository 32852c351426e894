import assert from "node:assert/strict";
import { concatBytes } from "./bytes.ts";

Deno.test("concatBytes returns a single part as is and joins several in order", () => {
  const one = new Uint8Array([1, 2]);
  assert.equal(concatBytes([one]), one, "no copy of a single part");
  const parts = [new Uint8Array([1]), new Uint8Array(0), new Uint8Array([2, 3])];
  assert.deepEqual(concatBytes(parts), new Uint8Array([1, 2, 3]));
  assert.deepEqual(concatBytes(parts, 3), new Uint8Array([1, 2, 3]));
  assert.deepEqual(concatBytes([]), new Uint8Array(0));
});
