import assert from "node:assert/strict";
import { StringPool } from "./string_pool.ts";

Deno.test("StringPool keeps each distinct value once and stops pooling at its capacity", () => {
  const pool = new StringPool(2);
  assert.equal(pool.intern("a"), "a");
  assert.equal(pool.intern("a"), "a");
  assert.equal(pool.size, 1);
  pool.intern("b");
  pool.intern("c");
  assert.equal(pool.size, 2, "c is returned but not pooled");
  assert.equal(pool.intern("c"), "c");
  assert.deepEqual(pool.internAll(["b", "c", "a"]), ["b", "c", "a"]);
  assert.equal(pool.size, 2);
});
