import assert from "node:assert/strict";
import { applyMergePatch } from "./merge_patch.ts";

Deno.test("applyMergePatch() follows the RFC 7386 examples", () => {
  const cases: [unknown, unknown, unknown][] = [
    [{ a: "b" }, { a: "c" }, { a: "c" }],
    [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
    [{ a: "b" }, { a: null }, {}],
    [{ a: "b", b: "c" }, { a: null }, { b: "c" }],
    [{ a: ["b"] }, { a: "c" }, { a: "c" }],
    [{ a: "c" }, { a: ["b"] }, { a: ["b"] }],
    [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
    [{ a: [{ b: "c" }] }, { a: [1] }, { a: [1] }],
    [["a", "b"], ["c", "d"], ["c", "d"]],
    [{ a: "b" }, ["c"], ["c"]],
    [{ a: "foo" }, null, null],
    [{ a: "foo" }, "bar", "bar"],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: "b", c: null }, { a: "b" }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];
  for (const [target, patch, want] of cases) {
    assert.deepEqual(applyMergePatch(target, patch), want, JSON.stringify([target, patch]));
  }
});

Deno.test("applyMergePatch() does not modify its arguments", () => {
  const target = { a: { b: 1 } };
  const patch = { a: { c: 2 } };
  applyMergePatch(target, patch);
  assert.deepEqual(target, { a: { b: 1 } });
  assert.deepEqual(patch, { a: { c: 2 } });
});
