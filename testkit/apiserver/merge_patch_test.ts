import assert from "node:assert/strict";
import { applyMergePatch, createMergePatch, sortedJson } from "./merge_patch.ts";

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

Deno.test("createMergePatch() gives the attacher's patches byte for byte", () => {
  const fin = "external-attacher/csi-test";
  const va = { metadata: { name: "pv1-node1" }, status: { attached: false } };
  assert.equal(
    JSON.stringify(createMergePatch(va, {
      metadata: {
        name: "pv1-node1",
        finalizers: [fin],
        annotations: { "csi.alpha.kubernetes.io/node-id": "nodeID1" },
      },
      status: { attached: false },
    })),
    `{"metadata":{"annotations":{"csi.alpha.kubernetes.io/node-id":"nodeID1"},"finalizers":["${fin}"]}}`,
  );
  assert.equal(
    JSON.stringify(createMergePatch(
      { status: { attached: false, attachError: { time: "t", message: "m" } } },
      { status: { attached: true } },
    )),
    `{"status":{"attachError":null,"attached":true}}`,
  );
  assert.equal(
    JSON.stringify(createMergePatch({ metadata: { finalizers: [fin] } }, { metadata: {} })),
    `{"metadata":{"finalizers":null}}`,
  );
  assert.equal(
    JSON.stringify(createMergePatch(
      { status: { attached: false } },
      { status: { attached: false, attachError: { time: "t", message: "m", errorCode: 8 } } },
    )),
    `{"status":{"attachError":{"errorCode":8,"message":"m","time":"t"}}}`,
  );
});

Deno.test("createMergePatch() of equal objects is {}", () => {
  assert.deepEqual(createMergePatch({ a: { b: [1, 2] } }, { a: { b: [1, 2] } }), {});
});

Deno.test("createMergePatch() replaces arrays and changed types whole", () => {
  assert.deepEqual(createMergePatch({ a: [1, 2], b: { c: 1 } }, { a: [1], b: "x" }), {
    a: [1],
    b: "x",
  });
});

Deno.test("createMergePatch() rejects non-objects", () => {
  assert.throws(() => createMergePatch([], {}), TypeError);
});

Deno.test("sortedJson() sorts members at every level and keeps array order", () => {
  assert.equal(
    JSON.stringify(sortedJson({ b: 1, a: [{ d: 1, c: 2 }], c: undefined })),
    `{"a":[{"c":2,"d":1}],"b":1}`,
  );
});
