/**
 * The adversarial tables run in several test files each (`<table>_<k>_test.ts`, shard k of n), so
 * that `deno test --parallel` spreads their rows over its workers; a row measures the heap of its
 * own worker, so rows of one file still run one at a time. {@link assertShardFiles} makes sure no
 * shard, and so no row, is left out.
 *
 * @module
 */

import assert from "node:assert/strict";

/**
 * Fails unless the folder of `table` (a module URL) holds exactly the files
 * `<table>_<k>_test.ts` for k = 0 … `shards` - 1, each calling `testShard(k)`, and the table
 * registers its tests only there (a test declared at the top of the table would run once per
 * shard file).
 */
export async function assertShardFiles(table: URL, shards: number): Promise<void> {
  const declared = (await Deno.readTextFile(table)).match(/\bDeno\.test\(/g) ?? [];
  assert.equal(declared.length, 1, "the table declares its tests only in testShard()");
  const name = table.pathname.split("/").pop()!.replace(/\.ts$/, "");
  const dir = new URL(".", table);
  const pattern = new RegExp(`^${name}_(\\d+)_test\\.ts$`);
  const found: number[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const k = entry.name.match(pattern)?.[1];
    if (k === undefined) continue;
    found.push(Number(k));
    const text = await Deno.readTextFile(new URL(entry.name, dir));
    assert.match(text, new RegExp(`\\btestShard\\(${Number(k)}\\);`), entry.name);
  }
  found.sort((a, b) => a - b);
  assert.deepEqual(found, Array.from({ length: shards }, (_, k) => k), `shard files of ${name}`);
}
