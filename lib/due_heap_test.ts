import assert from "node:assert/strict";
import { type DueEntry, DueHeap } from "./due_heap.ts";

interface Entry extends DueEntry {
  id: number;
}

Deno.test("DueHeap yields entries by due time, ties in insertion order, under removes and moves", () => {
  const heap = new DueHeap<Entry>();
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const live: Entry[] = [];
  for (let id = 0; id < 5000; id++) {
    const entry: Entry = { id, due: Math.floor(random() * 500), seq: id, index: -1 };
    heap.push(entry);
    live.push(entry);
    const r = random();
    if (r < 0.2) {
      const victim = live.splice(Math.floor(random() * live.length), 1)[0]!;
      heap.remove(victim);
      heap.remove(victim); // a second remove changes nothing
      assert.equal(victim.index, -1);
    } else if (r < 0.4) {
      const moved = live[Math.floor(random() * live.length)]!;
      moved.due -= Math.floor(random() * 100);
      heap.movedEarlier(moved);
    }
  }
  assert.equal(heap.size, live.length);
  live.sort((a, b) => a.due - b.due || a.seq - b.seq);
  const out: number[] = [];
  for (let head = heap.peek(); head !== undefined; head = heap.peek()) {
    heap.remove(head);
    out.push(head.id);
  }
  assert.deepEqual(out, live.map((e) => e.id));
});
