/**
 * The HTTP/1.1 response and watch splitter fuzz targets, run briefly in the suite: every seed,
 * then a few hundred generated inputs from a fixed seed, each input within a time box. The long
 * runs are `deno task fuzz`'s.
 */

import assert from "node:assert/strict";
import type { FuzzTarget, Rng } from "./target.ts";
import { target as http1Response } from "./targets/http1_response.ts";
import { target as watchSplitter } from "./targets/watch_splitter.ts";

/** Generated inputs per target. */
const GENERATED = 300;
/** The longest one input may take. */
const TIME_BOX_MS = 2_000;

/** mulberry32 from `seed`: a small PRNG whose whole state is one number. */
function seededRng(seed: number): Rng {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    bytes: (n) => Uint8Array.from({ length: n }, () => Math.floor(next() * 256)),
  };
}

/** Runs `input` through `target`, failing with the input's bytes on a finding or a hang. */
async function runOne(target: FuzzTarget, input: Uint8Array, what: string): Promise<void> {
  const started = performance.now();
  try {
    await target.run(input);
  } catch (err) {
    const shown = new TextDecoder("latin1").decode(input.subarray(0, 300));
    assert.fail(
      `${target.name} ${what}: ${err}\ninput (${input.length} bytes): ${JSON.stringify(shown)}`,
    );
  }
  const ms = performance.now() - started;
  assert.ok(ms < TIME_BOX_MS, `${target.name} ${what}: ${ms} ms for ${input.length} bytes`);
}

for (const target of [http1Response, watchSplitter]) {
  Deno.test(`fuzz target ${target.name}: its seeds and ${GENERATED} generated inputs`, async () => {
    const seeds = target.seeds();
    assert.ok(seeds.length > 0);
    for (const [i, seed] of seeds.entries()) await runOne(target, seed, `seed ${i}`);
    const rng = seededRng(0xc0ffee);
    for (let i = 0; i < GENERATED; i++) {
      await runOne(target, target.generate(rng), `generated input ${i}`);
    }
  });
}
