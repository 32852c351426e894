import assert from "node:assert/strict";
import { createMergePatch, jsonEqual, sortedJson } from "./patches.ts";

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

Deno.test("jsonEqual() ignores member order and undefined members", () => {
  assert.equal(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }), true);
  assert.equal(jsonEqual({ a: 1, b: undefined }, { a: 1 }), true);
  assert.equal(jsonEqual({ a: 1 }, { a: 1, b: null }), false);
  assert.equal(jsonEqual([1, 2], [2, 1]), false);
});
