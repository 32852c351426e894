import assert from "node:assert/strict";
import { applyJsonPatch, JsonPatchError, parseJsonPatch } from "./json_patch.ts";

/** Asserts that `fn` throws a JsonPatchError of `kind`. */
function assertPatchError(fn: () => unknown, kind: "invalid" | "failed"): void {
  assert.throws(fn, (err: unknown) => err instanceof JsonPatchError && err.kind === kind);
}

Deno.test("applyJsonPatch() applies add, remove, replace, move, copy and test in order", () => {
  const doc = { a: { b: 1 }, list: ["x", "y"] };
  const out = applyJsonPatch(doc, [
    { op: "add", path: "/a/c", value: 2 },
    { op: "remove", path: "/a/b" },
    { op: "replace", path: "/list/0", value: "z" },
    { op: "add", path: "/list/-", value: "w" },
    { op: "add", path: "/list/1", value: "i" },
    { op: "copy", from: "/a", path: "/copied" },
    { op: "move", from: "/copied/c", path: "/moved" },
    { op: "test", path: "/moved", value: 2 },
  ]);
  assert.deepEqual(out, { a: { c: 2 }, list: ["z", "i", "y", "w"], copied: {}, moved: 2 });
  assert.deepEqual(doc, { a: { b: 1 }, list: ["x", "y"] }, "the input is not modified");
});

Deno.test("applyJsonPatch() adds a PV finalizer the way the attacher does", () => {
  const fin = "external-attacher/csi-test";
  const missing = applyJsonPatch({ metadata: { name: "pv1" } }, [
    { op: "test", path: "/metadata/finalizers", value: null },
    { op: "add", path: "/metadata/finalizers", value: [fin] },
  ]);
  assert.deepEqual(missing, { metadata: { name: "pv1", finalizers: [fin] } });
  const appended = applyJsonPatch({ metadata: { finalizers: ["other"] } }, [
    { op: "add", path: "/metadata/finalizers/-", value: fin },
  ]);
  assert.deepEqual(appended, { metadata: { finalizers: ["other", fin] } });
  const removed = applyJsonPatch({ metadata: { finalizers: ["other", fin] } }, [
    { op: "test", path: "/metadata/finalizers/1", value: fin },
    { op: "remove", path: "/metadata/finalizers/1" },
  ]);
  assert.deepEqual(removed, { metadata: { finalizers: ["other"] } });
});

Deno.test("applyJsonPatch() test: null matches a missing or null member, nothing else does", () => {
  applyJsonPatch({ a: null }, [{ op: "test", path: "/a", value: null }]);
  applyJsonPatch({}, [{ op: "test", path: "/a", value: null }]);
  assertPatchError(() => applyJsonPatch({}, [{ op: "test", path: "/a", value: [] }]), "failed");
  assertPatchError(
    () => applyJsonPatch({ a: [] }, [{ op: "test", path: "/a", value: null }]),
    "failed",
  );
  assertPatchError(
    () => applyJsonPatch({ a: 1 }, [{ op: "test", path: "/a", value: "1" }]),
    "failed",
  );
  applyJsonPatch({ a: { x: 1, y: [1, 2] } }, [{
    op: "test",
    path: "/a",
    value: { y: [1, 2], x: 1 },
  }]);
});

Deno.test("applyJsonPatch() fails on paths that do not exist", () => {
  const doc = { a: { b: [1] } };
  assertPatchError(() => applyJsonPatch(doc, [{ op: "remove", path: "/a/missing" }]), "failed");
  assertPatchError(() => applyJsonPatch(doc, [{ op: "add", path: "/x/y", value: 1 }]), "failed");
  assertPatchError(() => applyJsonPatch(doc, [{ op: "add", path: "/a/b/2", value: 1 }]), "failed");
  assertPatchError(
    () => applyJsonPatch(doc, [{ op: "replace", path: "/a/b/1", value: 1 }]),
    "failed",
  );
  assertPatchError(
    () => applyJsonPatch(doc, [{ op: "test", path: "/x/y", value: null }]),
    "failed",
  );
  assertPatchError(
    () => applyJsonPatch(doc, [{ op: "move", from: "/nope", path: "/z" }]),
    "failed",
  );
  assertPatchError(() => applyJsonPatch(doc, [{ op: "add", path: "", value: 1 }]), "failed");
});

Deno.test("applyJsonPatch() replace of a missing object member adds it, as the API server does", () => {
  assert.deepEqual(applyJsonPatch({ a: {} }, [{ op: "replace", path: "/a/b", value: 1 }]), {
    a: { b: 1 },
  });
});

Deno.test("applyJsonPatch() fails the whole patch when one operation fails", () => {
  assertPatchError(
    () =>
      applyJsonPatch({ a: 1 }, [
        { op: "replace", path: "/a", value: 2 },
        { op: "test", path: "/a", value: 1 },
      ]),
    "failed",
  );
});

Deno.test("applyJsonPatch() decodes ~1 and ~0 in reference tokens", () => {
  const out = applyJsonPatch({ annotations: { "a/b": "1", "c~d": "2" } }, [
    { op: "remove", path: "/annotations/a~1b" },
    { op: "replace", path: "/annotations/c~0d", value: "3" },
  ]);
  assert.deepEqual(out, { annotations: { "c~d": "3" } });
});

Deno.test("applyJsonPatch() rejects unknown operations and operations without a path", () => {
  assertPatchError(() => applyJsonPatch({}, [{ op: "frobnicate", path: "/a" }]), "failed");
  assertPatchError(() => applyJsonPatch({}, [{ op: "add", value: 1 }]), "failed");
});

Deno.test("parseJsonPatch() accepts only an array of objects", () => {
  assert.deepEqual(parseJsonPatch([{ op: "add", path: "/a", value: 1 }]), [
    { op: "add", path: "/a", value: 1 },
  ]);
  assertPatchError(() => parseJsonPatch({ op: "add" }), "invalid");
  assertPatchError(() => parseJsonPatch([1]), "invalid");
});
