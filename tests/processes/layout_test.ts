/**
 * The house as a test: the folders of `lib/` import each other only as ARCHITECTURE.md draws it,
 * without loops between folders or between files; the protocol platform (`lib/wire/`) imports nothing of the attacher; no shipped
 * file grows past 800 lines. Read from `deno info --json main.ts` (every import, dynamic and
 * type-only included).
 */

import assert from "node:assert/strict";
import {
  fileLoops,
  folderLoops,
  folderOf,
  forbiddenImports,
  libImports,
  type LocalImport,
  longFiles,
  type ModuleGraph,
  PLATFORM_FOLDER,
  privateImports,
} from "./layout_rules.ts";

const ROOT = new URL("../../", import.meta.url);
const MAIN = new URL("main.ts", ROOT).href;

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

const graph = moduleGraph(MAIN);

Deno.test("lib/ has no import loop between its folders", async () => {
  assert.deepEqual(folderLoops(libImports(await graph, ROOT.href)), []);
});

Deno.test("lib/ has no import loop between its files", async () => {
  assert.deepEqual(fileLoops(libImports(await graph, ROOT.href)), []);
});

Deno.test("lib/ folders import only the folders the architecture allows", async () => {
  assert.deepEqual(forbiddenImports(libImports(await graph, ROOT.href)), []);
});

Deno.test("only lib/kube/ imports its request plumbing lib/kube/request/, main.ts included", async () => {
  const imports = libImports(await graph, ROOT.href, true);
  assert.ok(imports.some((i) => i.to.startsWith("lib/kube/request/")), "the folder is reached");
  assert.ok(imports.some((i) => i.from === "main.ts"), "main.ts's imports are read");
  assert.deepEqual(privateImports(imports), []);
});

Deno.test("the protocol platform lib/wire/ imports nothing of lib/ outside itself but files directly in lib/", async () => {
  const imports = libImports(await graph, ROOT.href);
  const platform = imports.filter((i) => folderOf(i.from) === PLATFORM_FOLDER);
  assert.ok(platform.length > 0, "main.ts reaches the platform");
  const outward = platform.filter((i) => ![PLATFORM_FOLDER, "(root)"].includes(folderOf(i.to)));
  assert.deepEqual(outward.map((i) => `${i.from} -> ${i.to}`), []);
});

Deno.test("the HTTP/2, HPACK, gRPC, protobuf, HTTP/1.1 and Prometheus modules all live in lib/wire/", async () => {
  const paths = new Set(libImports(await graph, ROOT.href).flatMap((i) => [i.from, i.to]));
  const protocol = /(hpack|frames|protowire|grpc_channel|http1|http2|prometheus)/;
  const stray = [...paths].filter((p) =>
    folderOf(p) !== PLATFORM_FOLDER && !p.endsWith("_test.ts") &&
    protocol.test(p.split("/").at(-1)!)
  );
  assert.deepEqual(stray, []);
  for (const part of ["http2/hpack.ts", "http2/frames.ts", "grpc/protowire.ts", "http1/"]) {
    assert.ok(
      [...paths].some((p) => p.startsWith(`lib/${PLATFORM_FOLDER}/${part}`)),
      `lib/${PLATFORM_FOLDER}/${part} is part of the platform`,
    );
  }
});

Deno.test("no shipped file under lib/ is longer than 800 lines", async () => {
  const paths = new Set(libImports(await graph, ROOT.href).flatMap((i) => [i.from, i.to]));
  assert.deepEqual(await longFiles([...paths, "main.ts"], ROOT.href), []);
});

Deno.test("folderLoops() finds a loop through three folders and only that one", () => {
  const imports: LocalImport[] = [
    { from: "lib/controller/a.ts", to: "lib/events/b.ts" },
    { from: "lib/events/b.ts", to: "lib/leaderelection/c.ts" },
    { from: "lib/leaderelection/c.ts", to: "lib/controller/d.ts" },
    { from: "lib/controller/a.ts", to: "lib/kube/e.ts" },
    { from: "lib/kube/e.ts", to: "lib/clock.ts" },
    { from: "lib/clock.ts", to: "lib/kube/e.ts" },
  ];
  assert.deepEqual(folderLoops(imports), [["controller", "events", "leaderelection"]]);
});

Deno.test("fileLoops() finds a loop of files in one folder, type imports too, and only that one", () => {
  const imports: LocalImport[] = [
    { from: "lib/kube/transport.ts", to: "lib/kube/fetch_transport.ts" },
    { from: "lib/kube/fetch_transport.ts", to: "lib/kube/transport.ts" },
    { from: "lib/kube/client.ts", to: "lib/kube/transport.ts" },
    { from: "lib/kube/client.ts", to: "lib/clock.ts" },
  ];
  assert.deepEqual(fileLoops(imports), [["lib/kube/fetch_transport.ts", "lib/kube/transport.ts"]]);
});

Deno.test("privateImports() names an import of a private folder from outside its parent only", () => {
  const imports: LocalImport[] = [
    { from: "lib/kube/client.ts", to: "lib/kube/request/retry.ts" },
    { from: "lib/kube/request/body.ts", to: "lib/kube/request/transport.ts" },
    { from: "lib/kube/request/body.ts", to: "lib/kube/api.ts" },
    { from: "lib/run.ts", to: "lib/kube/request/throttle_log.ts" },
    { from: "lib/kubelet/x.ts", to: "lib/kube/request/body.ts" },
    { from: "main.ts", to: "lib/kube/request/transport.ts" },
    { from: "lib/controller/x.ts", to: "lib/kube/client.ts" },
  ];
  assert.deepEqual(privateImports(imports), [
    "lib/kubelet/x.ts -> lib/kube/request/body.ts",
    "lib/run.ts -> lib/kube/request/throttle_log.ts",
    "main.ts -> lib/kube/request/transport.ts",
  ]);
});

Deno.test("forbiddenImports() names the platform importing a seam and a root file importing a folder", () => {
  const imports: LocalImport[] = [
    { from: "lib/wire/grpc/channel.ts", to: "lib/csi/api.ts" },
    { from: "lib/wire/grpc/channel.ts", to: "lib/clock.ts" },
    { from: "lib/clock.ts", to: "lib/observe/log.ts" },
    { from: "lib/run.ts", to: "lib/controller/controller.ts" },
    { from: "lib/controller/x.ts", to: "lib/csi/api.ts" },
    { from: "lib/newfolder/x.ts", to: "lib/kube/api.ts" },
  ];
  assert.deepEqual(forbiddenImports(imports), [
    "lib/clock.ts -> lib/observe/log.ts",
    "lib/newfolder/x.ts -> lib/kube/api.ts",
    "lib/wire/grpc/channel.ts -> lib/csi/api.ts",
  ]);
});
