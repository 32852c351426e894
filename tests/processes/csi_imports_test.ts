/**
 * The attacher's CSI client is its own HTTP/2, HPACK, gRPC and protobuf code: its static module
 * graph (`deno info --json lib/csi/connection.ts`) holds no npm package, no `node:` module
 * and not the JSON descriptor.
 */

import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

Deno.test("lib/csi loads no npm package, no node: module and no descriptor", async () => {
  const entry = new URL("lib/csi/connection.ts", ROOT).href;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: { specifier: string; dependencies?: { code?: { specifier: string } }[] }[];
  };
  const specifiers = new Set<string>();
  for (const m of graph.modules) {
    specifiers.add(m.specifier);
    for (const d of m.dependencies ?? []) if (d.code) specifiers.add(d.code.specifier);
  }
  const foreign = [...specifiers].filter((s) =>
    s.startsWith("npm:") || s.startsWith("node:") || s.endsWith(".json") ||
    !s.startsWith(new URL("lib/", ROOT).href)
  );
  assert.deepEqual(foreign, []);
  assert.ok(specifiers.has(new URL("lib/wire/http2/session.ts", ROOT).href));
});
