/**
 * The adversarial tables run in several test files each (`<table>_<shard>_test.ts`), so that
 * `deno test --parallel` spreads their rows over its workers; a row measures the heap of its own
 * worker, so rows of one file still run one at a time. A shard is a run of neighbouring rows (the
 * table's sections, in order) and its file is named by what those rows are about.
 * {@link assertShardFiles} makes sure no shard, and so no row, is left out.
 *
 * @module
 */

import assert from "node:assert/strict";

/** A shard: its file's name part, and the name of the table row that begins it. */
export interface Shard {
  readonly name: string;
  readonly from: string;
}

/** The rows of shard `name`: from its first row up to the next shard's first row. */
export function shardRows<R extends { readonly name: string }>(
  rows: readonly R[],
  shards: readonly Shard[],
  name: string,
): R[] {
  const k = shards.findIndex((shard) => shard.name === name);
  if (k < 0) throw new Error(`no shard named ${name}`);
  const start = startOf(rows, shards[k]!);
  const next = shards[k + 1];
  return rows.slice(start, next === undefined ? rows.length : startOf(rows, next));
}

function startOf(rows: readonly { readonly name: string }[], shard: Shard): number {
  const index = rows.findIndex((row) => row.name === shard.from);
  if (index < 0) throw new Error(`shard ${shard.name}: no row named ${shard.from}`);
  return index;
}

/**
 * Fails unless the shards of `table` (a module URL) split `rows` from the first row on, in order,
 * each into its file `<table>_<shard>_test.ts` calling `testShard("<shard>")`, and the table
 * registers its tests only there (a test declared at the top of the table would run once per
 * shard file).
 */
export async function assertShardFiles(
  table: URL,
  rows: readonly { readonly name: string }[],
  shards: readonly Shard[],
): Promise<void> {
  const declared = (await Deno.readTextFile(table)).match(/\bDeno\.test\(/g) ?? [];
  assert.equal(declared.length, 1, "the table declares its tests only in testShard()");
  const starts = shards.map((shard) => startOf(rows, shard));
  assert.equal(starts[0], 0, "the first shard begins at the first row");
  starts.forEach((start, k) => {
    if (k > 0) {
      assert.ok(start > starts[k - 1]!, `shard ${shards[k]!.name} begins after the one before`);
    }
  });
  const name = table.pathname.split("/").pop()!.replace(/\.ts$/, "");
  for (const shard of shards) {
    const file = new URL(`${name}_${shard.name}_test.ts`, table);
    const text = await Deno.readTextFile(file);
    assert.ok(text.includes(`testShard("${shard.name}");`), `${file.pathname} runs its shard`);
  }
}
