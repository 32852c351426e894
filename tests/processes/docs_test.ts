/**
 * The documents say what the code does: README.md stays short enough to be read (at most 350
 * lines) and lists every flag `--help` prints, and ARCHITECTURE.md's table of the folders of
 * `lib/` names, for each folder, exactly the folders {@link FOLDER_IMPORTS} lets it import.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseOptions } from "../../lib/cli/options.ts";
import { FOLDER_IMPORTS } from "./layout_rules.ts";
import { SANDBOX_USAGE } from "../../sandbox/main.ts";

const ROOT = new URL("../../", import.meta.url);

/** The most lines README.md may have. */
const README_MAX_LINES = 350;

function read(path: string): string {
  return Deno.readTextFileSync(new URL(path, ROOT));
}

/** The flag names `--help` prints (`  -name type` lines of Go's `PrintDefaults`). */
export function usageFlags(usage: string): string[] {
  return [...usage.matchAll(/^ {2}-([a-z0-9-]+)/gm)].map((m) => m[1]!);
}

/**
 * The rows of the Markdown table under `heading` whose first cell is a `lib/<folder>/` code span:
 * folder → the `<folder>/` code spans of the last cell.
 */
export function layoutTable(markdown: string, heading: string): Map<string, string[]> {
  const start = markdown.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `no heading ${heading}`);
  const rows = new Map<string, string[]>();
  for (const line of markdown.slice(start + heading.length + 2).split("\n")) {
    if (line.startsWith("#")) break;
    if (!line.startsWith("|")) continue;
    const cells = line.split("|").slice(1, -1).map((c) => c.trim());
    const folder = /^`lib\/([a-z]+)\/`$/.exec(cells[0] ?? "");
    if (folder === null) continue;
    const imports = [...(cells.at(-1) ?? "").matchAll(/`([a-z]+)\/`/g)].map((m) => m[1]!);
    rows.set(folder[1]!, imports);
  }
  return rows;
}

Deno.test("docs: README.md has at most 350 lines", () => {
  const text = read("README.md");
  const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
  assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines`);
});

Deno.test("docs: README.md's flag table lists every flag --help prints", () => {
  const help = parseOptions(["--help"]);
  assert.ok("help" in help);
  const flags = usageFlags(help.usage);
  assert.ok(flags.length >= 30, `only ${flags.length} flags read from the usage`);
  const readme = read("README.md");
  const section = readme.slice(
    readme.indexOf("\n## Flags\n"),
    readme.indexOf("\n## What it does\n"),
  );
  // The first cell of each row of the section's table.
  const firstCells = section.split("\n").filter((l) => l.startsWith("| `-")).map((l) =>
    l.split("|")[1]!
  );
  const documented = new Set(
    firstCells.flatMap((cell) => [...cell.matchAll(/`--([a-z0-9-]+)`/g)].map((m) => m[1]!)),
  );
  // --help and --version are Go's built-in flags, described above the table.
  const missing = flags.filter((f) => !documented.has(f) && f !== "help" && f !== "version");
  assert.deepEqual(missing, []);
  const unknown = [...documented].filter((f) => !flags.includes(f) && f !== "help");
  assert.deepEqual(unknown, [], "flags in the table that --help does not print");
});

Deno.test("docs: `deno task demo` is given the sandbox's flags before any `--`", () => {
  // `deno task demo -- <args>` passes the `--` on, and `csi-attacher sandbox [flags] [--
  // attacher flags]` gives everything after it to the attacher: a sandbox flag there is refused
  // (`--fail`) or goes to the attacher instead (`--v`).
  const sandboxFlags = new Set(usageFlags(SANDBOX_USAGE));
  assert.ok(sandboxFlags.has("fail") && sandboxFlags.has("v"), SANDBOX_USAGE);
  let seen = 0;
  for (const doc of ["README.md", "CONTRIBUTING.md", "sandbox/README.md"]) {
    for (const [span, rest] of read(doc).matchAll(/`deno task demo( [^`]*)?`/g)) {
      seen++;
      const args = (rest ?? "").trim().split(/\s+/).filter((a) => a !== "");
      if (args[0] !== "--") continue;
      assert.ok(args.length > 1, `${doc}: ${span} gives the attacher no flag`);
      for (const arg of args.slice(1)) {
        const name = /^--?([a-z0-9-]+)/.exec(arg)?.[1];
        assert.ok(name === undefined || !sandboxFlags.has(name), `${doc}: ${span}: ${arg}`);
      }
    }
  }
  assert.ok(seen >= 3, `only ${seen} \`deno task demo\` spans read`);
});

Deno.test("docs: ARCHITECTURE.md's folder table is FOLDER_IMPORTS", () => {
  const table = layoutTable(read("ARCHITECTURE.md"), "### The folders of `lib/`");
  assert.deepEqual(
    Object.fromEntries([...table].map(([k, v]) => [k, [...v].sort()])),
    Object.fromEntries(Object.entries(FOLDER_IMPORTS).map(([k, v]) => [k, [...v].sort()])),
  );
});

Deno.test("usageFlags() and layoutTable() read what they are given", () => {
  assert.deepEqual(usageFlags("Usage:\n  -a-b int\n    \thelp\n  -c\n    \t-not-a-flag\n"), [
    "a-b",
    "c",
  ]);
  const md = [
    "### T",
    "",
    "| Folder | Holds | May import |",
    "| --- | --- | --- |",
    "| `lib/x/` | things (`lib/y/z.ts`) | `y/`, `z/` |",
    "| `lib/y/` | more | nothing |",
    "| `main.ts` | not a folder | `x/` |",
    "## Next",
    "| `lib/z/` | after the table's section | `x/` |",
  ].join("\n");
  assert.deepEqual([...layoutTable(`\n${md}`, "### T")], [["x", ["y", "z"]], ["y", []]]);
});
