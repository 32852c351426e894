import assert from "node:assert/strict";
import { findAll, parseXml } from "./xml_reader.ts";

Deno.test("parseXml() reads elements, attributes, entities and skips comments", () => {
  const root = parseXml(
    '<?xml version="1.0"?>\n<!-- c --><a x="1 &amp; 2" y=\'&lt;&#65;&#x42;\'>t&gt;<b/><b z="&quot;">u</b></a>\n',
  );
  assert.equal(root.name, "a");
  assert.deepEqual(root.attributes, { x: "1 & 2", y: "<AB" });
  assert.equal(root.text, "t>");
  assert.deepEqual(findAll(root, "b").map((b) => [b.attributes, b.text]), [
    [{}, ""],
    [{ z: '"' }, "u"],
  ]);
});

Deno.test("parseXml() rejects what is not well formed", () => {
  for (
    const bad of [
      "<a><b></a>",
      "<a>x & y</a>",
      '<a x="1" x="2"/>',
      "<a>&nbsp;</a>",
      "<a/><b/>",
      "<a>",
      "text",
    ]
  ) {
    assert.throws(() => parseXml(bad), SyntaxError, bad);
  }
});
