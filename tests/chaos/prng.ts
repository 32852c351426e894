/**
 * The one source of randomness of a chaos schedule: a seeded mulberry32 generator, so that a seed
 * replays the same schedule step for step.
 *
 * @module
 */

/**
 * A small seeded pseudo-random generator (mulberry32: 32 bits of state, period 2^32). Not for
 * cryptography; its only job is to make every choice of a schedule a function of the seed.
 *
 * @example
 * ```ts
 * const a = new Prng(42);
 * const b = new Prng(42);
 * a.int(10) === b.int(10); // true
 * ```
 */
export class Prng {
  #state: number;

  /** @throws {RangeError} when `seed` is not a safe integer. */
  constructor(seed: number) {
    if (!Number.isSafeInteger(seed)) {
      throw new RangeError(`Cannot seed the generator: not a safe integer: ${seed}`);
    }
    this.#state = seed >>> 0;
  }

  /** A 32-bit unsigned integer. */
  nextUint32(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** A number in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /**
   * An integer in [0, n).
   * @throws {RangeError} when `n` is not a positive integer.
   */
  int(n: number): number {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`Cannot pick below ${n}`);
    return Math.floor(this.next() * n);
  }

  /** An integer in [min, max]. */
  between(min: number, max: number): number {
    return min + this.int(max - min + 1);
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /**
   * One element of `items`.
   * @throws {RangeError} when `items` is empty.
   */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /**
   * One value, with probability proportional to its weight; entries of weight 0 are never picked.
   * @throws {RangeError} when no weight is positive.
   */
  weighted<T>(entries: readonly (readonly [T, number])[]): T {
    let total = 0;
    for (const [, w] of entries) if (w > 0) total += w;
    if (!(total > 0)) throw new RangeError("Cannot pick: no positive weight");
    let r = this.next() * total;
    for (const [value, w] of entries) {
      if (w <= 0) continue;
      if (r < w) return value;
      r -= w;
    }
    // Rounding can leave r a hair above the last weight: take the last positive entry.
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i]![1] > 0) return entries[i]![0];
    }
    throw new RangeError("Cannot pick: no positive weight");
  }

  /** An independent generator seeded from this one. */
  fork(): Prng {
    return new Prng(this.nextUint32());
  }
}
