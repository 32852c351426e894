import assert from "node:assert/strict";
import { type CpuProfile, moduleOf, summarizeProfile } from "./cpu_profile.ts";

Deno.test("summarizeProfile() splits self and inclusive time and skips the start", () => {
  const frame = (functionName: string, url = "") => ({ functionName, url, lineNumber: 0 });
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: frame("(root)"), children: [2, 4] },
      {
        id: 2,
        callFrame: frame("sync", "file:///work/main/lib/controller/csi_handler.ts"),
        children: [3],
      },
      {
        id: 3,
        callFrame: frame(
          "request",
          "file:///root/.cache/deno/npm/registry.npmjs.org/@grpc/grpc-js/1.14.7/build/src/client.js",
        ),
      },
      { id: 4, callFrame: frame("(idle)") },
    ],
    // Each sample is followed by 1000 µs until the next one.
    samples: [3, 3, 2, 4, 3],
    timeDeltas: [0, 1000, 1000, 1000, 1000, 1000],
  };
  const s = summarizeProfile(profile);
  assert.equal(s.totalMs, 5);
  assert.equal(s.idleMs, 1);
  assert.deepEqual(s.selfByModule.slice(0, 2), [["npm:@grpc/grpc-js", 3], [
    "lib/controller/csi_handler.ts",
    1,
  ]]);
  const inclusive = new Map(s.inclusiveByFunction);
  assert.equal(inclusive.get("sync (lib/controller/csi_handler.ts:1)"), 4);
  assert.equal(inclusive.get("(root)"), 5);
  assert.equal(summarizeProfile(profile, 2.5).totalMs, 2); // samples at 0…4 ms: 3 and 4 remain
});

Deno.test("moduleOf() names npm packages, built-in modules and repository files", () => {
  assert.equal(
    moduleOf("file:///root/.cache/deno/npm/registry.npmjs.org/prom-client/15.1.3/lib/x.js"),
    "npm:prom-client",
  );
  assert.equal(moduleOf("ext:deno_node/internal/streams/writable.mjs"), "ext:deno_node/internal");
  assert.equal(moduleOf("node:_http_client"), "node:_http_client");
  assert.equal(moduleOf("file:///work/main/lib/kube/client.ts"), "lib/kube/client.ts");
  assert.equal(moduleOf(""), "(native)");
});
