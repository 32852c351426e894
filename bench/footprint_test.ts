import assert from "node:assert/strict";
import {
  type FootprintPoint,
  renderMappings,
  renderPoints,
  runFootprint,
  withInspector,
} from "./footprint.ts";

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
  assert.equal(
    withInspector("env MALLOC_ARENA_MAX=1 X=2 /usr/bin/deno run main.js", 7),
    "env MALLOC_ARENA_MAX=1 X=2 /usr/bin/deno run --inspect=127.0.0.1:7 main.js",
  );
  assert.equal(withInspector("env X=1 /root/bin/csi-attacher", 9229), undefined);
  assert.equal(withInspector("nice deno run main.ts", 9229), undefined);
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

Deno.test("renderMappings shows resident MiB by kind of mapping and what no class explains", () => {
  const mib = 1024 * 1024;
  const point = (name: string, v8Pages: number): FootprintPoint => ({
    point: name,
    cpuSeconds: 0,
    rssBytes: 0,
    peakRssBytes: 0,
    smaps: { rssBytes: 0, anonymousBytes: 0, fileBytes: 0, privateDirtyBytes: 0, swapBytes: 0 },
    maps: [
      {
        start: 0x1d6448c0000,
        end: 0x1d6448c0000 + v8Pages * mib,
        perms: "rw-p",
        path: "",
        rssBytes: v8Pages * mib,
        anonymousBytes: v8Pages * mib,
      },
      {
        start: 0x7fc5c8100000,
        end: 0x7fc5c84c1000,
        perms: "rw-p",
        path: "",
        rssBytes: 3844 * 1024,
        anonymousBytes: 3844 * 1024,
      },
    ],
  });
  const text = renderMappings([point("rest", 30), point("attach peak", 112)]);
  const row = (name: string) => text.split("\n").find((l) => l.startsWith(`| ${name} `));
  assert.match(row("v8 pages") ?? "", /\|\s+30\.0 \|\s+112\.0 \|$/);
  assert.match(row("other anonymous") ?? "", /\|\s+3\.8 \|\s+3\.8 \|$/);
  assert.match(text, /largest mappings of no class at "attach peak"/);
  assert.match(text, /\| 7fc5c8100000 \|\s+3,?844 \|/);
  assert.equal(renderMappings([{ ...point("rest", 1), maps: undefined }]), "");
});

Deno.test("--footprint takes --cluster and still refuses a bad size with exit code 2", async () => {
  const errors: unknown[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => errors.push(...args);
  try {
    assert.equal(await runFootprint(["--footprint", "--cluster", "--sizes=many"], "."), 2);
    assert.equal(await runFootprint(["--footprint", "--fake", "--sizes=0"], "."), 2);
  } finally {
    console.error = original;
  }
  assert.equal(errors.length, 2);
  assert.ok(String(errors[0]).includes("--cluster"));
});
