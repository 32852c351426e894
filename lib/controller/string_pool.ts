/**
 * One copy of each value that many cached objects repeat. `JSON.parse` gives every object its
 * own copy of `"storage.k8s.io/v1"`, the driver name, the finalizer, the node name and the access
 * mode, and its own array and object around them; with thousands of VolumeAttachments and
 * PersistentVolumes in the informer caches those copies are most of what the caches hold. The
 * pool hands out one instance per value: strings as they are, lists of strings and small records
 * frozen (they are shared, so nobody may change them). It is bounded: once full, new values are
 * returned as they are (lists and records frozen all the same), so a field that is unique after
 * all (a node name in a very large cluster) costs at most `capacity` entries.
 *
 * @module
 */

/** A bounded set of strings, string lists and small records handing out one instance of each. */
export class StringPool {
  readonly #values = new Map<string, string>();
  /** Lists of one string, by that string. */
  readonly #singles = new Map<string, readonly string[]>();
  /** Lists of any other length, by their JSON text. */
  readonly #lists = new Map<string, readonly string[]>();
  readonly #records = new Map<string, object>();
  readonly #capacity: number;

  /** @param capacity the most distinct values kept (all kinds together); later ones are not pooled. */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** The pooled instance of `value` (pooling it if there is room). */
  intern(value: string): string {
    const pooled = this.#values.get(value);
    if (pooled !== undefined) return pooled;
    if (this.size < this.#capacity) this.#values.set(value, value);
    return value;
  }

  /**
   * The pooled, frozen list equal to `values` (whose elements are interned); `values` itself,
   * frozen, when it is the first of its kind or the pool is full.
   */
  internList(values: string[]): string[] {
    const single = values.length === 1;
    const key = single ? values[0]! : JSON.stringify(values);
    const table = single ? this.#singles : this.#lists;
    const pooled = table.get(key);
    if (pooled !== undefined) return pooled as string[];
    for (let i = 0; i < values.length; i++) values[i] = this.intern(values[i]!);
    Object.freeze(values);
    if (this.size < this.#capacity) table.set(key, values);
    return values;
  }

  /**
   * The pooled record under `key`, else `make()` frozen (and pooled if there is room). `key`
   * must determine the record: equal keys give the same instance.
   */
  internRecord<T extends object>(key: string, make: () => T): T {
    const pooled = this.#records.get(key);
    if (pooled !== undefined) return pooled as T;
    const record = Object.freeze(make());
    if (this.size < this.#capacity) this.#records.set(key, record);
    return record;
  }

  /** Number of distinct values pooled, of every kind. */
  get size(): number {
    return this.#values.size + this.#singles.size + this.#lists.size + this.#records.size;
  }
}
