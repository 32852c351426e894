/**
 * What the attacher loads at start: `deno info --json main.ts`, following static imports only.
 * The test kit, the sandbox, the tests and the benchmark must never be among them; the sandbox
 * subcommand reaches its modules through a dynamic `import()`.
 */

import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);
const MAIN = new URL("main.ts", ROOT).href;

/** Folders whose modules the attacher must not load at start. */
const FORBIDDEN = ["testkit/", "sandbox/", "tests/", "bench/"];

interface InfoDependency {
  specifier: string;
  code?: { specifier: string };
  isDynamic?: boolean;
}

interface InfoModule {
  specifier: string;
  dependencies?: InfoDependency[];
}

interface ModuleGraph {
  roots: string[];
  modules: InfoModule[];
}

async function moduleGraph(entry: string): Promise<ModuleGraph> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** Local modules reachable from `root` through static imports, as paths relative to the repo. */
function staticLocalModules(graph: ModuleGraph, root: string): string[] {
  const bySpecifier = new Map(graph.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const stack = [root];
  while (stack.length > 0) {
    const specifier = stack.pop()!;
    if (seen.has(specifier)) continue;
    seen.add(specifier);
    for (const dep of bySpecifier.get(specifier)?.dependencies ?? []) {
      if (dep.isDynamic || dep.code === undefined) continue;
      stack.push(dep.code.specifier);
    }
  }
  return [...seen].filter((s) => s.startsWith(ROOT.href)).map((s) => s.slice(ROOT.href.length))
    .sort();
}

Deno.test("main.ts loads no module of the test kit, the sandbox, the tests or the benchmark at start", async () => {
  const graph = await moduleGraph(MAIN);
  const loaded = staticLocalModules(graph, MAIN);
  assert.ok(loaded.includes("lib/run.ts"), `the attacher itself is loaded: ${loaded}`);
  const forbidden = loaded.filter((path) => FORBIDDEN.some((folder) => path.startsWith(folder)));
  assert.deepEqual(forbidden, []);
});

Deno.test("the sandbox is still in main.ts's graph, behind a dynamic import", async () => {
  const graph = await moduleGraph(MAIN);
  const main = graph.modules.find((m) => m.specifier === MAIN);
  const sandbox = (main?.dependencies ?? []).find((d) => d.specifier === "./sandbox/main.ts");
  assert.equal(sandbox?.isDynamic, true, "main.ts imports ./sandbox/main.ts dynamically");
  // Following every import, the test kit is reachable: this is what `deno compile` embeds so
  // that `csi-attacher sandbox` works from the binary.
  const all = graph.modules.map((m) => m.specifier);
  assert.ok(all.some((s) => s.startsWith(new URL("testkit/", ROOT).href)));
});

Deno.test("main.ts loads no npm package and no node: module at start (they are behind dynamic imports: the node:https transport, client-node, js-yaml, the sandbox)", async () => {
  const graph = await moduleGraph(MAIN);
  const bySpecifier = new Map(graph.modules.map((m) => [m.specifier, m]));
  const offenders: string[] = [];
  for (const path of staticLocalModules(graph, MAIN)) {
    for (const dep of bySpecifier.get(new URL(path, ROOT).href)?.dependencies ?? []) {
      const target = dep.code?.specifier ?? "";
      if (!dep.isDynamic && (target.startsWith("npm:") || target.startsWith("node:"))) {
        offenders.push(`${path} imports ${target}`);
      }
    }
  }
  assert.deepEqual(offenders, []);
});
