import assert from "node:assert/strict";
import { orderedFromValue, parseOrderedJson } from "./ordered_json.ts";

Deno.test("parseOrderedJson keeps duplicate members in document order", () => {
  const text = ' {"a": [1, -2.5e3, "x\\"]", {"b": null}], "a": true, "c": {"d": "\\u00e9", "d": ' +
    "false}} ";
  assert.deepEqual(parseOrderedJson(text), {
    type: "object",
    members: [
      ["a", {
        type: "array",
        items: [
          { type: "scalar", value: 1 },
          { type: "scalar", value: -2500 },
          { type: "scalar", value: 'x"]' },
          { type: "object", members: [["b", { type: "scalar", value: null }]] },
        ],
      }],
      ["a", { type: "scalar", value: true }],
      ["c", {
        type: "object",
        members: [["d", { type: "scalar", value: "é" }], ["d", { type: "scalar", value: false }]],
      }],
    ],
  });
  assert.throws(() => parseOrderedJson('{"a":'), SyntaxError);
});

Deno.test("orderedFromValue mirrors a plain value", () => {
  assert.deepEqual(orderedFromValue({ a: [true, "s"], b: {} }), {
    type: "object",
    members: [
      ["a", {
        type: "array",
        items: [{ type: "scalar", value: true }, { type: "scalar", value: "s" }],
      }],
      ["b", { type: "object", members: [] }],
    ],
  });
});
