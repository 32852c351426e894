import assert from "node:assert/strict";
import { renderPoints, withInspector } from "./footprint.ts";

Deno.test("withInspector adds --inspect to a deno run command line only", () => {
  assert.equal(
    withInspector("/usr/bin/deno run --allow-net --v8-flags=--no-maglev dist/bundle/main.js", 9229),
    "/usr/bin/deno run --inspect=127.0.0.1:9229 --allow-net --v8-flags=--no-maglev dist/bundle/main.js",
  );
  assert.equal(
    withInspector("deno run -A main.ts", 1),
    "deno run --inspect=127.0.0.1:1 -A main.ts",
  );
  assert.equal(withInspector("/root/bin/csi-attacher-v4.13.0", 9229), undefined);
  assert.equal(withInspector("env X=1 deno run main.ts", 9229), undefined);
});

Deno.test("renderPoints shows one column per point, MiB with one decimal", () => {
  const mib = 1024 * 1024;
  const table = renderPoints([{
    point: "started",
    cpuSeconds: 0.25,
    rssBytes: 50 * mib,
    peakRssBytes: 60 * mib,
    smaps: {
      rssBytes: 50 * mib,
      anonymousBytes: 20 * mib,
      fileBytes: 30 * mib,
      privateDirtyBytes: 20 * mib,
      swapBytes: 0,
    },
    heap: { usedBytes: 8 * mib, totalBytes: 12 * mib },
  }]);
  const row = (name: string) => table.split("\n").find((l) => l.startsWith(`| ${name}`));
  assert.match(row("VmRSS") ?? "", /\|\s+50\.0 \|$/);
  assert.match(row("anonymous − V8") ?? "", /\|\s+8\.0 \|$/);
  assert.match(row("V8 heap used after full GC") ?? "", /\|\s+– \|$/);
  assert.match(row("CPU s") ?? "", /\|\s+0\.25 \|$/);
});
