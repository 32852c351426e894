import assert from "node:assert/strict";
import { createMergePatch, jsonEqual } from "./merge_diff.ts";

Deno.test("createMergePatch() keeps only changed fields", () => {
  assert.deepEqual(
    createMergePatch(
      { status: { attached: false, attachError: { message: "x" } } },
      { status: { attached: true } },
    ),
    { status: { attachError: null, attached: true } },
  );
});

Deno.test("createMergePatch() gives {} for equal documents", () => {
  assert.deepEqual(createMergePatch({ a: { b: [1, 2] } }, { a: { b: [1, 2] } }), {});
});

Deno.test("createMergePatch() replaces arrays whole and nulls removed keys", () => {
  assert.deepEqual(
    createMergePatch({ metadata: { finalizers: ["a", "b"] } }, { metadata: { finalizers: ["b"] } }),
    { metadata: { finalizers: ["b"] } },
  );
  assert.deepEqual(
    createMergePatch({ metadata: { finalizers: ["a"] } }, { metadata: {} }),
    { metadata: { finalizers: null } },
  );
});

Deno.test("jsonEqual() ignores key order and undefined values", () => {
  assert.ok(jsonEqual({ a: 1, b: { c: 2 } }, { b: { c: 2 }, a: 1, d: undefined }));
  assert.ok(!jsonEqual({ a: [1] }, { a: [1, 2] }));
});
