import assert from "node:assert/strict";
import { addFinalizerPatch, removeFinalizerPatch } from "./finalizer_patch.ts";

const FIN = "external-attacher/csi-test";

Deno.test("addFinalizerPatch() gives the Go attacher's exact bytes", () => {
  assert.equal(
    JSON.stringify(addFinalizerPatch(undefined, FIN)),
    `[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["${FIN}"]}]`,
  );
  assert.equal(
    JSON.stringify(addFinalizerPatch([], FIN)),
    `[{"op":"test","path":"/metadata/finalizers","value":[]},{"op":"replace","path":"/metadata/finalizers","value":["${FIN}"]}]`,
  );
  assert.equal(
    JSON.stringify(addFinalizerPatch(["foo/bar"], FIN)),
    `[{"op":"add","path":"/metadata/finalizers/-","value":"${FIN}"}]`,
  );
});

Deno.test("removeFinalizerPatch() tests and removes the first matching index", () => {
  const cases: [string, string[], number][] = [
    ["remove sole finalizer", [FIN], 0],
    ["remove first of many", [FIN, "a", "b"], 0],
    ["remove middle of many", ["a", FIN, "b"], 1],
    ["remove last finalizer", ["a", FIN], 1],
  ];
  for (const [name, current, index] of cases) {
    assert.equal(
      JSON.stringify(removeFinalizerPatch(current, FIN)),
      `[{"op":"test","path":"/metadata/finalizers/${index}","value":"${FIN}"},{"op":"remove","path":"/metadata/finalizers/${index}"}]`,
      name,
    );
  }
});

Deno.test("removeFinalizerPatch() throws when the finalizer is absent", () => {
  assert.throws(() => removeFinalizerPatch(["a"], FIN), RangeError);
  assert.throws(() => removeFinalizerPatch(null, FIN), RangeError);
});
