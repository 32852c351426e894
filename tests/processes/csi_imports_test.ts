/**
 * The attacher's CSI client is its own HTTP/2, HPACK, gRPC and protobuf code: its static module
 * graph (`deno info --json lib/csi/connection.ts`) holds no npm package, no `node:` module
 * and not the JSON descriptor; and the protocol platform in it (`lib/wire/`) imports nothing of
 * `lib/` but `lib/wire/` and the files directly in `lib/`.
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
  const lib = new URL("lib/", ROOT).href;
  const wire = new URL("lib/wire/", ROOT).href;
  const wireImports: string[] = [];
  for (const m of graph.modules) {
    specifiers.add(m.specifier);
    for (const d of m.dependencies ?? []) {
      if (!d.code) continue;
      specifiers.add(d.code.specifier);
      const target = d.code.specifier;
      const directlyInLib = target.startsWith(lib) && !target.slice(lib.length).includes("/");
      if (m.specifier.startsWith(wire) && !target.startsWith(wire) && !directlyInLib) {
        wireImports.push(`${m.specifier.slice(lib.length)} -> ${target.slice(lib.length)}`);
      }
    }
  }
  const foreign = [...specifiers].filter((s) =>
    s.startsWith("npm:") || s.startsWith("node:") || s.endsWith(".json") ||
    !s.startsWith(new URL("lib/", ROOT).href)
  );
  assert.deepEqual(foreign, []);
  assert.ok(specifiers.has(new URL("lib/wire/http2/session.ts", ROOT).href));
  assert.deepEqual(wireImports, [], "lib/wire/ imports a seam of the attacher");
});
