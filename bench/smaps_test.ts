import assert from "node:assert/strict";
import { classify, largestUnexplained, parseSmaps, totalsByClass } from "./smaps.ts";

/** One smaps entry: header line plus the two fields read. */
function entry(range: string, perms: string, path: string, rssKb: number, anonKb = rssKb): string {
  return [
    `${range} ${perms} 00000000 00:00 0 ${path}`.trimEnd(),
    `Size:               ${rssKb} kB`,
    `Rss:                ${rssKb} kB`,
    `Pss:                ${rssKb} kB`,
    `Anonymous:          ${anonKb} kB`,
    `VmFlags: rd wr mr mw me ac`,
  ].join("\n");
}

const SMAPS = [
  // V8: a regular page and a large-object page at V8's 256 KiB-aligned hint addresses.
  entry("1d6448c0000-1d644900000", "rw-p", "", 256),
  entry("1342b99c0000-1342b9b81000", "rw-p", "", 1796),
  // The executable.
  entry("5615ebb57000-5615ed6e5000", "r--p", "/usr/lib/node_modules/deno/deno", 2000, 0),
  entry("5616182e2000-56161850e000", "rw-p", "[heap]", 2224),
  // A glibc thread arena: 64 MiB at a 64 MiB boundary, used part then reserve.
  entry("7f41e0000000-7f41e0021000", "rw-p", "", 132),
  entry("7f41e0021000-7f41e4000000", "---p", "", 0),
  // A thread stack above its guard page.
  entry("7f4234aae000-7f4234aaf000", "---p", "", 0),
  entry("7f4234aaf000-7f4234caf000", "rw-p", "", 16),
  // V8's code space, and a large malloc chunk of 3844 KiB.
  entry("7f4214800000-7f4234580000", "rwxp", "", 600),
  entry("7fc5c8100000-7fc5c84c1000", "rw-p", "", 3844),
  entry("7ffd1b9d0000-7ffd1b9f1000", "rw-p", "[stack]", 132),
].join("\n");

Deno.test("parseSmaps reads each mapping's range, permissions, path and sizes", () => {
  const maps = parseSmaps(SMAPS);
  assert.equal(maps.length, 11);
  assert.deepEqual(maps[2], {
    start: 0x5615ebb57000,
    end: 0x5615ed6e5000,
    perms: "r--p",
    path: "/usr/lib/node_modules/deno/deno",
    rssBytes: 2000 * 1024,
    anonymousBytes: 0,
  });
  assert.equal(maps[0]!.path, "");
  assert.throws(() => parseSmaps("Rss: 4 kB\n"), SyntaxError);
});

Deno.test("classify tells V8's pages, arenas, stacks and code apart by their shape", () => {
  assert.deepEqual(classify(parseSmaps(SMAPS)), [
    "v8 pages",
    "v8 large objects",
    "file",
    "malloc main arena",
    "malloc thread arena",
    "malloc thread arena",
    "other anonymous",
    "thread stack",
    "v8 code",
    "other anonymous",
    "[stack]",
  ]);
});

Deno.test("totalsByClass sums resident bytes; largestUnexplained lists what no class owns", () => {
  const maps = parseSmaps(SMAPS);
  const totals = totalsByClass(maps);
  assert.equal(totals.get("v8 pages"), 256 * 1024);
  assert.equal(totals.get("malloc thread arena"), 132 * 1024);
  assert.equal(totals.get("file"), 2000 * 1024);
  const large = largestUnexplained(maps, 2);
  assert.deepEqual(large.map((m) => [m.class, m.rssBytes / 1024]), [
    ["other anonymous", 3844],
    ["malloc main arena", 2224],
  ]);
});
