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
  assert.equal(pool.size, 2);
});

Deno.test("StringPool hands out one frozen instance of each list, by value", () => {
  const pool = new StringPool(10);
  const first = pool.internList(["x"]);
  assert.equal(Object.isFrozen(first), true);
  assert.equal(pool.internList(["x"]), first, "same single");
  const pair = pool.internList(["x", "y"]);
  assert.equal(pool.internList(["x", "y"]), pair, "same pair");
  assert.notEqual(pool.internList(["y", "x"]), pair, "order matters");
  assert.notEqual(pool.internList(["x\ny"]), pair, "no separator can be faked");
  const empty = pool.internList([]);
  assert.equal(pool.internList([]), empty);
  assert.deepEqual(empty, []);
  assert.throws(() => (first as string[]).push("z"), TypeError);
});

Deno.test("StringPool hands out one frozen record per key", () => {
  const pool = new StringPool(10);
  let made = 0;
  const make = () => ({ k: `v${++made}` });
  const record = pool.internRecord("k=v", make);
  assert.equal(pool.internRecord("k=v", make), record);
  assert.equal(made, 1);
  assert.equal(Object.isFrozen(record), true);
});

Deno.test("StringPool: once full, lists and records are returned frozen but not pooled", () => {
  const pool = new StringPool(1);
  pool.intern("a");
  const list = pool.internList(["b"]);
  assert.equal(Object.isFrozen(list), true);
  assert.notEqual(pool.internList(["b"]), list);
  const record = pool.internRecord("r", () => ({}));
  assert.equal(Object.isFrozen(record), true);
  assert.notEqual(pool.internRecord("r", () => ({})), record);
  assert.equal(pool.size, 1);
});
