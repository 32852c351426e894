/**
 * Mutations of byte strings for the fuzz runner: the usual operators of coverage-blind fuzzers
 * (flip a bit, set a byte to an interesting value, insert, delete, duplicate or splice a chunk,
 * overwrite with random bytes), applied a few at a time.
 *
 * @module
 */

import type { Rng } from "./target.ts";

/** Byte values that often sit on a boundary of a length, a flag or a prefix. */
const INTERESTING = [
  0x00,
  0x01,
  0x07,
  0x08,
  0x0f,
  0x10,
  0x1f,
  0x20,
  0x3f,
  0x40,
  0x7f,
  0x80,
  0xfe,
  0xff,
];

/** The longest input a mutation makes. */
export const MAX_MUTATED_LENGTH = 64 * 1024;

function mutateOnce(rng: Rng, input: Uint8Array, others: readonly Uint8Array[]): Uint8Array {
  const at = rng.int(input.length + 1);
  switch (rng.int(8)) {
    case 0: {
      if (input.length === 0) return rng.bytes(1 + rng.int(8));
      const out = input.slice();
      out[rng.int(out.length)]! ^= 1 << rng.int(8);
      return out;
    }
    case 1: {
      if (input.length === 0) return Uint8Array.of(INTERESTING[rng.int(INTERESTING.length)]!);
      const out = input.slice();
      out[rng.int(out.length)] = INTERESTING[rng.int(INTERESTING.length)]!;
      return out;
    }
    case 2: {
      const chunk = rng.bytes(1 + rng.int(16));
      return concat(input.subarray(0, at), chunk, input.subarray(at));
    }
    case 3: {
      const n = 1 + rng.int(Math.max(1, Math.min(32, input.length - at)));
      return concat(input.subarray(0, at), input.subarray(at + n));
    }
    case 4: {
      const start = rng.int(input.length + 1);
      const chunk = input.subarray(start, start + 1 + rng.int(64));
      const times = 1 + rng.int(rng.next() < 0.1 ? 200 : 4);
      const copies: Uint8Array[] = [];
      for (let i = 0; i < times; i++) copies.push(chunk);
      return concat(input.subarray(0, at), ...copies, input.subarray(at));
    }
    case 5: {
      const other = others[rng.int(others.length)] ?? new Uint8Array();
      const from = rng.int(other.length + 1);
      return concat(input.subarray(0, at), other.subarray(from, from + rng.int(256)));
    }
    case 6: {
      if (input.length === 0) return rng.bytes(4);
      const out = input.slice();
      const n = Math.min(out.length - (at % out.length), 1 + rng.int(8));
      out.set(rng.bytes(n), at % out.length);
      return out;
    }
    default:
      return input.subarray(0, at);
  }
}

/** `input` changed by one to eight mutations; `others` are spliced from. */
export function mutate(rng: Rng, input: Uint8Array, others: readonly Uint8Array[]): Uint8Array {
  let out = input;
  const rounds = 1 + rng.int(8);
  for (let i = 0; i < rounds; i++) {
    out = mutateOnce(rng, out, others);
    if (out.length > MAX_MUTATED_LENGTH) out = out.subarray(0, MAX_MUTATED_LENGTH);
  }
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  let size = 0;
  for (const p of parts) size += p.length;
  const out = new Uint8Array(size);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}
