/**
 * Which input a fuzz run feeds at each index: the target's seeds first, then, in turn, a
 * structured input from the target's generator, a mutated seed, a mutated structured input and
 * plain random bytes. Everything follows from the run's seed and the index, so an input that
 * made a finding can be rebuilt without having been stored.
 *
 * @module
 */

import { mutate } from "./mutate.ts";
import { inputRng } from "./rng.ts";
import type { FuzzTarget } from "./target.ts";

/** Input `index` of `target` in a run seeded with `seed`. */
export function inputFor(
  target: FuzzTarget,
  seeds: readonly Uint8Array[],
  seed: number,
  index: number,
): Uint8Array {
  if (index < seeds.length) return seeds[index]!;
  const rng = inputRng(seed, index);
  switch (index % 4) {
    case 0:
      return target.generate(rng);
    case 1:
      return mutate(rng, seeds[rng.int(seeds.length)] ?? new Uint8Array(), seeds);
    case 2:
      return mutate(rng, target.generate(rng), seeds);
    default:
      return rng.bytes(rng.int(rng.next() < 0.1 ? 4096 : 256));
  }
}

/** Bytes as lower-case hex. */
export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
