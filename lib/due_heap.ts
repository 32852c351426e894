/**
 * A binary min-heap of entries by due time, ties in insertion order: what
 * {@link import("./timers.ts").TimerQueue} and the work queue's delayed adds
 * (`workqueue/delaying_queue.ts`) keep their waiting entries in. Each entry carries its place
 * in the heap, so one can be removed or moved earlier in O(log n) without a search.
 *
 * @module
 */

/** What {@link DueHeap} orders: by {@link DueEntry.due}, then {@link DueEntry.seq}. */
export interface DueEntry {
  /** When the entry is due (ms of the owner's clock). */
  due: number;
  /** Insertion order: of two entries due at the same time, the lower runs first. */
  readonly seq: number;
  /** Its place in the heap; -1 while it is in none. Kept by the heap. */
  index: number;
}

/** True when `a` comes before `b`. */
function before(a: DueEntry, b: DueEntry): boolean {
  return a.due < b.due || (a.due === b.due && a.seq < b.seq);
}

/** A min-heap of {@link DueEntry}s; see the module doc. */
export class DueHeap<T extends DueEntry> {
  #items: T[] = [];

  /** How many entries it holds. */
  get size(): number {
    return this.#items.length;
  }

  /** The earliest entry, left in place; undefined when empty. */
  peek(): T | undefined {
    return this.#items[0];
  }

  /** Adds `entry`, which must be in no heap. */
  push(entry: T): void {
    entry.index = this.#items.length;
    this.#items.push(entry);
    this.#up(entry.index);
  }

  /** Takes `entry` out; nothing happens when it is not in the heap (`index` -1). */
  remove(entry: T): void {
    const at = entry.index;
    if (at < 0) return;
    entry.index = -1;
    const items = this.#items;
    const last = items.pop()!;
    if (last === entry) return;
    items[at] = last;
    last.index = at;
    this.#down(at);
    this.#up(last.index);
  }

  /** Restores the order after `entry.due` was lowered. */
  movedEarlier(entry: T): void {
    if (entry.index >= 0) this.#up(entry.index);
  }

  /** Drops every entry (each keeps a stale `index`: the heap is not used with them again). */
  clear(): void {
    this.#items = [];
  }

  #up(at: number): void {
    const items = this.#items;
    const entry = items[at]!;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      const p = items[parent]!;
      if (!before(entry, p)) break;
      items[at] = p;
      p.index = at;
      at = parent;
    }
    items[at] = entry;
    entry.index = at;
  }

  #down(at: number): void {
    const items = this.#items;
    const n = items.length;
    const entry = items[at]!;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && before(items[right]!, items[left]!) ? right : left;
      const c = items[child]!;
      if (!before(c, entry)) break;
      items[at] = c;
      c.index = at;
      at = child;
    }
    items[at] = entry;
    entry.index = at;
  }
}
