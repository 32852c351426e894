import assert from "node:assert/strict";
import { parseSmapsRollup, summarizeHeapSnapshot } from "./memory_breakdown.ts";

Deno.test("parseSmapsRollup splits the RSS into anonymous and file-backed pages", () => {
  const text = `55d0c0000000-7ffd5a3f0000 ---p 00000000 00:00 0                          [rollup]
Rss:               98304 kB
Pss:               90000 kB
Pss_Anon:          60000 kB
Shared_Clean:       8000 kB
Private_Clean:     30000 kB
Private_Dirty:     60304 kB
Anonymous:         60304 kB
Swap:                  0 kB
`;
  assert.deepEqual(parseSmapsRollup(text), {
    rssBytes: 98304 * 1024,
    anonymousBytes: 60304 * 1024,
    fileBytes: 38000 * 1024,
    privateDirtyBytes: 60304 * 1024,
    swapBytes: 0,
  });
  assert.throws(() => parseSmapsRollup("nothing"), SyntaxError);
});

Deno.test("summarizeHeapSnapshot sums self sizes by constructor, other nodes by type", () => {
  const snapshot = {
    snapshot: {
      meta: {
        node_fields: ["type", "name", "id", "self_size", "edge_count"],
        node_types: [["hidden", "array", "string", "object", "code"]],
      },
    },
    strings: ["Map", "hello", "Object", "(code)"],
    nodes: [
      3,
      0,
      1,
      40,
      0, // object Map
      3,
      0,
      3,
      40,
      0, // object Map
      3,
      2,
      5,
      24,
      0, // object Object
      2,
      1,
      7,
      16,
      0, // string "hello"
      2,
      1,
      9,
      20,
      0, // string "hello"
      4,
      3,
      11,
      100,
      0, // code
    ],
  };
  const summary = summarizeHeapSnapshot(snapshot);
  assert.equal(summary.totalBytes, 240);
  assert.equal(summary.nodeCount, 6);
  assert.deepEqual(summary.groups, [
    { key: "code", count: 1, selfBytes: 100 },
    { key: "object:Map", count: 2, selfBytes: 80 },
    { key: "string", count: 2, selfBytes: 36 },
    { key: "object:Object", count: 1, selfBytes: 24 },
  ]);
  assert.throws(
    () =>
      summarizeHeapSnapshot({
        snapshot: { meta: { node_fields: ["type"], node_types: [[]] } },
        nodes: [],
        strings: [],
      }),
    SyntaxError,
  );
});
