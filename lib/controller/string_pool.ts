/**
 * One copy of each string that many cached objects repeat. `JSON.parse` gives every object its
 * own copy of `"storage.k8s.io/v1"`, the driver name, the finalizer, the node name and the access
 * mode; with thousands of VolumeAttachments and PersistentVolumes in the informer caches those
 * copies are most of the cached strings. The pool is bounded: once full, new values are returned
 * as they are, so a field that is unique after all (a node name in a very large cluster) costs at
 * most `capacity` entries.
 *
 * @module
 */

/** A bounded set of strings that hands out its first-seen instance of each value. */
export class StringPool {
  readonly #values = new Map<string, string>();
  readonly #capacity: number;

  /** @param capacity the most distinct values kept; later values are not pooled. */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** The pooled instance of `value` (pooling it if there is room). */
  intern(value: string): string {
    const pooled = this.#values.get(value);
    if (pooled !== undefined) return pooled;
    if (this.#values.size < this.#capacity) this.#values.set(value, value);
    return value;
  }

  /** `intern` of each element, in place. */
  internAll(values: string[]): string[] {
    for (let i = 0; i < values.length; i++) values[i] = this.intern(values[i]!);
    return values;
  }

  /** Number of distinct values pooled. */
  get size(): number {
    return this.#values.size;
  }
}
