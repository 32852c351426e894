import assert from "node:assert/strict";
import {
  renderBreakdown,
  type SamplingHeapProfileNode,
  summarizeAllocations,
} from "./alloc_profile.ts";

function node(
  functionName: string,
  url: string,
  selfSize: number,
  children: SamplingHeapProfileNode[] = [],
): SamplingHeapProfileNode {
  return { callFrame: { functionName, url, lineNumber: 9 }, selfSize, children };
}

Deno.test("summarizeAllocations charges the runtime's allocations to our innermost caller", () => {
  const send = "file:///work/main/lib/kube/client.ts";
  const profile = {
    head: node("(root)", "", 0, [
      node("#send", send, 100, [
        node("setTimeout", "ext:deno_web/02_timers.js", 300),
        node("parse", "", 50),
      ]),
      node("(garbage collector)", "", 10),
    ]),
  };
  const s = summarizeAllocations(profile);
  assert.equal(s.totalBytes, 460);
  assert.deepEqual(s.selfByFunction[0], ["setTimeout (ext:deno_web/02_timers.js:10)", 300]);
  assert.deepEqual(s.byOwnCaller, [
    ["#send (lib/kube/client.ts:10)", 450],
    ["(garbage collector)", 10],
  ]);
  assert.deepEqual(s.selfByModule.map(([m]) => m), [
    "ext:deno_web/02_timers.js",
    "lib/kube/client.ts",
    "parse",
    "(garbage collector)",
  ]);
  const text = renderBreakdown("by function", s.selfByFunction, s.totalBytes, 2, 1);
  assert.equal(text, "by function\n      150 B  65.2 %  setTimeout (ext:deno_web/02_timers.js:10)");
});
