import assert from "node:assert/strict";
import { compareResourceVersions } from "./resource_version.ts";

Deno.test("compareResourceVersions orders well-formed resourceVersions by length, then text", () => {
  assert.equal(compareResourceVersions("9", "10"), -1);
  assert.equal(compareResourceVersions("1000", "999"), 1);
  assert.equal(compareResourceVersions("12345", "12345"), 0);
  assert.equal(compareResourceVersions("12345", "12346"), -1);
  // Beyond 2^53 the digits still order (a Number would round both to the same value).
  assert.equal(compareResourceVersions("9007199254740993", "9007199254740992"), 1);
});

Deno.test("compareResourceVersions gives no order for missing or malformed resourceVersions", () => {
  for (
    const [a, b] of [
      [undefined, "1"],
      ["1", undefined],
      ["", "1"],
      ["01", "1"],
      ["0", "1"],
      ["1a", "2"],
      ["-1", "2"],
      ["1", " 2"],
      ["1.5", "2"],
    ] as const
  ) {
    assert.equal(compareResourceVersions(a, b), undefined, `${a} vs ${b}`);
  }
});
