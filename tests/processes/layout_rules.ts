/**
 * The folder rules of what ships, read from a module graph (`deno info --json main.ts`): every
 * local module under `lib/` that the entry reaches through static, dynamic or type imports is
 * placed in its folder (`lib/<folder>/…`, or `(root)` for a file directly in `lib/`), and the
 * imports between folders are checked against {@link FOLDER_IMPORTS}.
 *
 * The table is the architecture as ARCHITECTURE.md draws it; a change of layering is a change of
 * this table, made on purpose.
 *
 * @module
 */

/** A module of `deno info --json`'s answer, with the fields read here. */
export interface GraphModule {
  specifier: string;
  dependencies?: {
    specifier: string;
    code?: { specifier: string };
    type?: { specifier: string };
    isDynamic?: boolean;
  }[];
}

/** `deno info --json`'s answer, with the fields read here. */
export interface ModuleGraph {
  roots: string[];
  modules: GraphModule[];
}

/** The folder of the protocol platform: it imports nothing of `lib/` outside itself. */
export const PLATFORM_FOLDER = "wire";

/** The longest a shipped file may be, in lines. */
export const MAX_SHIPPED_LINES = 800;

/**
 * Which folders of `lib/` each folder may import (besides itself and files directly in `lib/`).
 * Files directly in `lib/` (the clock, abort helpers, `errorText`) import no folder, except
 * `run.ts`, the start-up wiring, which may import every folder.
 */
export const FOLDER_IMPORTS: Readonly<Record<string, readonly string[]>> = {
  wire: [],
  cli: [],
  workqueue: [],
  observe: ["wire", "workqueue"],
  kube: ["wire", "observe", "workqueue"],
  csi: ["wire", "observe"],
  events: ["kube", "observe", "workqueue"],
  leaderelection: ["kube", "observe", "events"],
  controller: ["kube", "csi", "events", "observe", "workqueue"],
};

/**
 * Folders private to their parent folder: only files under the parent import them. The request
 * plumbing of the API client (`lib/kube/request/`: transport, retries, bodies, error answers, the
 * watch stream) is reached from outside `lib/kube/` only through `KubeClient` and its factory.
 */
export const PRIVATE_FOLDERS: Readonly<Record<string, string>> = {
  "lib/kube/request/": "lib/kube/",
};

/** The root file allowed to import every folder. */
const WIRING_FILE = "lib/run.ts";

/** An import from one local file to another, as paths relative to the repository. */
export interface LocalImport {
  from: string;
  to: string;
}

/**
 * Every import between local files under `lib/`, static, dynamic and type-only alike; with
 * `fromEntry`, the entry's own imports of `lib/` files too (`main.ts -> lib/…`).
 */
export function libImports(graph: ModuleGraph, rootUrl: string, fromEntry = false): LocalImport[] {
  const rel = (specifier: string): string | undefined =>
    specifier.startsWith(rootUrl) ? specifier.slice(rootUrl.length) : undefined;
  const imports: LocalImport[] = [];
  for (const module of graph.modules) {
    const from = rel(module.specifier);
    if (from === undefined) continue;
    if (!from.startsWith("lib/") && !(fromEntry && graph.roots.includes(module.specifier))) {
      continue;
    }
    const targets = new Set<string>();
    for (const dep of module.dependencies ?? []) {
      for (const target of [dep.code?.specifier, dep.type?.specifier]) {
        const to = target === undefined ? undefined : rel(target);
        if (to !== undefined && to.startsWith("lib/")) targets.add(to);
      }
    }
    for (const to of targets) imports.push({ from, to });
  }
  return imports;
}

/** The folder of a path under `lib/`: `lib/kube/client.ts` → `kube`, `lib/clock.ts` → `(root)`. */
export function folderOf(path: string): string {
  const parts = path.split("/");
  return parts.length > 2 ? parts[1]! : "(root)";
}

/** The folder loops (strongly connected groups of two or more folders), each sorted. */
export function folderLoops(imports: readonly LocalImport[]): string[][] {
  const between = imports
    .map(({ from, to }) => ({ from: folderOf(from), to: folderOf(to) }))
    .filter(({ from, to }) => from !== to && from !== "(root)" && to !== "(root)");
  return importLoops(between);
}

/**
 * The file loops (strongly connected groups of two or more files, type-only imports included),
 * each sorted: two modules that import each other are one concept split in two, or a seam
 * missing between them.
 */
export function fileLoops(imports: readonly LocalImport[]): string[][] {
  return importLoops(imports.filter(({ from, to }) => from !== to));
}

/** The strongly connected groups of two or more nodes of `imports`, each sorted. */
function importLoops(imports: readonly LocalImport[]): string[][] {
  const edges = new Map<string, Set<string>>();
  for (const { from, to } of imports) {
    if (!edges.has(from)) edges.set(from, new Set());
    edges.get(from)!.add(to);
  }
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const loops: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) loops.push(group.sort());
    }
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  return loops;
}

/**
 * The imports that break {@link FOLDER_IMPORTS}, as `from -> to` lines. A folder missing from
 * the table may import nothing: a new folder is placed in the architecture on purpose.
 */
export function forbiddenImports(imports: readonly LocalImport[]): string[] {
  const broken: string[] = [];
  for (const { from, to } of imports) {
    const a = folderOf(from);
    const b = folderOf(to);
    if (a === b || b === "(root)") continue;
    if (a === "(root)") {
      if (from !== WIRING_FILE) broken.push(`${from} -> ${to}`);
      continue;
    }
    if (!(FOLDER_IMPORTS[a] ?? []).includes(b)) broken.push(`${from} -> ${to}`);
  }
  return broken.sort();
}

/**
 * The imports that reach into a folder of {@link PRIVATE_FOLDERS} from outside its parent, as
 * `from -> to` lines.
 */
export function privateImports(
  imports: readonly LocalImport[],
  folders: Readonly<Record<string, string>> = PRIVATE_FOLDERS,
): string[] {
  const broken: string[] = [];
  for (const { from, to } of imports) {
    for (const [folder, parent] of Object.entries(folders)) {
      if (to.startsWith(folder) && !from.startsWith(parent)) broken.push(`${from} -> ${to}`);
    }
  }
  return broken.sort();
}

/** Shipped files (not `*_test.ts`) longer than {@link MAX_SHIPPED_LINES}, as `path (lines)`. */
export async function longFiles(paths: readonly string[], rootUrl: string): Promise<string[]> {
  const long: string[] = [];
  for (const path of paths) {
    if (path.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(new URL(path, rootUrl));
    const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
    if (lines > MAX_SHIPPED_LINES) long.push(`${path} (${lines})`);
  }
  return long.sort();
}
