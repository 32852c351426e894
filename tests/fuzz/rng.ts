/**
 * The seeded random source of the fuzz runner: sfc32 (Chris Doty-Humphrey's small fast counter
 * generator, public domain), seeded through splitmix32. Input `index` of a run with seed `seed`
 * comes from its own generator, {@link inputRng}, so any input can be rebuilt from the two
 * numbers alone.
 *
 * @module
 */

import type { Rng } from "./target.ts";

/** splitmix32: a 32-bit mixer, used to spread a seed over the generator's state. */
function splitmix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** A generator from a 32-bit seed. */
export function createRng(seed: number): Rng {
  const mix = { s: seed | 0 };
  let a = splitmix32(mix);
  let b = splitmix32(mix);
  let c = splitmix32(mix);
  let d = splitmix32(mix);
  const u32 = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return t >>> 0;
  };
  for (let i = 0; i < 12; i++) u32();
  return {
    next: () => u32() / 4294967296,
    int: (n: number) => n <= 0 ? 0 : Math.floor((u32() / 4294967296) * n),
    bytes(n: number): Uint8Array {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = u32() & 0xff;
      return out;
    },
  };
}

/** The generator of input `index` of a run seeded with `seed`. */
export function inputRng(seed: number, index: number): Rng {
  const mix = { s: (seed ^ Math.imul(index + 1, 0x27d4eb2d)) | 0 };
  return createRng(splitmix32(mix) ^ index);
}

/**
 * `input` cut at points chosen from its own bytes (about one piece in ten empty, the others 1 to
 * 64 bytes): the same input, the same pieces, so a finding replays with its input alone. `salt`
 * gives each target its own cuts.
 */
export function randomPieces(input: Uint8Array, salt: number): Uint8Array[] {
  let seed = salt | 0;
  for (const byte of input) seed = Math.imul(seed ^ byte, 0x85ebca6b);
  const random = createRng(seed);
  const pieces: Uint8Array[] = [];
  let at = 0;
  while (at < input.length) {
    const size = random.next() < 0.1 ? 0 : 1 + random.int(64);
    pieces.push(input.subarray(at, at + size));
    at += size;
  }
  return pieces;
}
