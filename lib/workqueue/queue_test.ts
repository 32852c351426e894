import assert from "node:assert/strict";
import { FifoList, type QueuedKey, WorkQueue } from "./queue.ts";
import { takeAllReady, takeReady } from "../../testkit/harness/ready_work.ts";

/** Takes every ready key without waiting. */
function drain(q: WorkQueue): Promise<string[]> {
  return takeAllReady(q);
}

/** Lets pending promise callbacks run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

Deno.test("WorkQueue hands keys out in the order they were added", async () => {
  const q = new WorkQueue({}, { name: "" });
  for (const key of ["c", "a", "b"]) q.add(key);
  assert.equal(q.len(), 3);
  assert.deepEqual(await drain(q), ["c", "a", "b"]);
  assert.equal(q.len(), 0);
});

Deno.test("WorkQueue folds duplicate adds of a waiting key and keeps its place", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  q.add("b");
  q.add("a");
  q.add("b");
  q.add("c");
  assert.equal(q.len(), 3);
  assert.deepEqual(await drain(q), ["a", "b", "c"]);
});

Deno.test("WorkQueue is stingy: a key in processing is handed out again only after done", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  assert.equal(await takeReady(q), "a");
  q.add("a");
  assert.equal(q.len(), 0, "a key re-added while processing must not be ready");
  assert.equal(await takeReady(q), undefined);
  q.add("a");
  q.add("b");
  assert.deepEqual(await drain(q), ["b"]);
  q.done("a");
  assert.equal(q.len(), 1, "done re-queues a key that was added while processing");
  assert.equal(await takeReady(q), "a");
  q.done("a");
  q.done("b");
  assert.equal(await takeReady(q), undefined, "a key not re-added is not re-queued");
});

Deno.test("WorkQueue.done re-queues a dirty key at the back", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  assert.equal(await takeReady(q), "a");
  q.add("a");
  q.add("b");
  q.done("a");
  assert.deepEqual(await drain(q), ["b", "a"]);
});

Deno.test("WorkQueue.has is true from add until done, also when re-added meanwhile", async () => {
  const q = new WorkQueue({}, { name: "" });
  assert.equal(q.has("a"), false);
  q.add("a");
  assert.equal(q.has("a"), true, "ready");
  assert.equal(await takeReady(q), "a");
  assert.equal(q.has("a"), true, "processing");
  q.add("a");
  q.done("a");
  assert.equal(q.has("a"), true, "re-added while processing: ready again");
  assert.equal(await takeReady(q), "a");
  q.done("a");
  assert.equal(q.has("a"), false, "done and not re-added");
  assert.equal(q.has("b"), false);
});

Deno.test("WorkQueue.done of a key not being processed changes nothing", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  q.done("a");
  assert.equal(q.len(), 1);
  assert.deepEqual(await drain(q), ["a"]);
  q.done("zzz");
  assert.equal(q.len(), 0);
});

Deno.test("WorkQueue.get waits for a key", async () => {
  const q = new WorkQueue({}, { name: "" });
  let got: string | undefined = "nothing yet";
  const pending = q.get().then((key) => got = key);
  await settle();
  assert.equal(got, "nothing yet");
  q.add("a");
  await pending;
  assert.equal(got, "a");
  q.add("a");
  assert.equal(q.len(), 0, "the key handed to the waiter is being processed");
});

Deno.test("WorkQueue concurrent get() waiters each receive a distinct key, oldest waiter first", async () => {
  const q = new WorkQueue({}, { name: "" });
  const waiters = [q.get(), q.get(), q.get()];
  q.add("a");
  q.add("a");
  q.add("b");
  q.add("c");
  q.add("d");
  assert.deepEqual(await Promise.all(waiters), ["a", "b", "c"]);
  assert.deepEqual(await drain(q), ["d"]);
});

Deno.test("WorkQueue N workers never process the same key at once", async () => {
  const q = new WorkQueue({}, { name: "" });
  const inFlight = new Set<string>();
  const processed: string[] = [];
  async function worker(): Promise<void> {
    for (;;) {
      const key = await q.get();
      if (key === undefined) return;
      assert.ok(!inFlight.has(key), `key ${key} handed to two workers`);
      inFlight.add(key);
      await settle();
      processed.push(key);
      inFlight.delete(key);
      q.done(key);
    }
  }
  const workers = [worker(), worker(), worker(), worker()];
  for (let round = 0; round < 5; round++) {
    for (const key of ["a", "b", "c"]) q.add(key);
    await settle();
  }
  q.shutDown();
  await Promise.all(workers);
  assert.ok(processed.length >= 3, `processed ${processed.length} keys`);
  assert.deepEqual(new Set(processed), new Set(["a", "b", "c"]));
});

Deno.test("WorkQueue.shutDown releases waiting get() calls with undefined", async () => {
  const q = new WorkQueue({}, { name: "" });
  const waiters = [q.get(), q.get()];
  q.shutDown();
  assert.deepEqual(await Promise.all(waiters), [undefined, undefined]);
  assert.equal(await q.get(), undefined);
  assert.equal(q.shuttingDown(), true);
});

Deno.test("WorkQueue after shutDown ignores adds but hands out the keys still ready", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  q.add("b");
  q.shutDown();
  q.add("c");
  assert.equal(q.len(), 2);
  assert.equal(await q.get(), "a");
  assert.equal(await q.get(), "b");
  assert.equal(await q.get(), undefined);
});

Deno.test("WorkQueue after shutDown still re-queues a key added before it while processing", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  assert.equal(await takeReady(q), "a");
  q.add("a");
  q.shutDown();
  q.done("a");
  assert.equal(await takeReady(q), "a");
  q.done("a");
  assert.equal(await takeReady(q), undefined);
});

Deno.test("WorkQueue rejects a non-positive unfinished-work period", () => {
  assert.throws(
    () => new WorkQueue({}, { name: "q", unfinishedWorkUpdatePeriodMs: 0 }),
    RangeError,
  );
});

Deno.test("WorkQueue keeps FIFO order across many keys (internal compaction)", async () => {
  const q = new WorkQueue({}, { name: "" });
  const expected: string[] = [];
  const got: string[] = [];
  for (let i = 0; i < 5000; i++) {
    q.add(`k${i}`);
    expected.push(`k${i}`);
    if (i % 3 === 0) {
      const key = (await takeReady(q))!;
      got.push(key);
      q.done(key);
    }
  }
  got.push(...await drain(q));
  assert.deepEqual(got, expected);
});

Deno.test("WorkQueue.get() takes a ready key at once; a get() with none ready waits for the next", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  const first = q.get();
  assert.equal(q.len(), 0, "the ready key is taken synchronously");
  assert.equal(q.has("a"), true);
  const second = q.get();
  q.add("a");
  assert.equal(q.len(), 0, "a key being processed is not handed out again");
  q.add("b");
  assert.equal(await first, "a");
  assert.equal(await second, "b");
  q.done("a");
  assert.equal(await q.get(), "a", "re-added while processing: ready again after done");
  q.shutDown();
});

Deno.test("WorkQueue.shutDownWithDrain resolves once every key handed out is done", async () => {
  const q = new WorkQueue({}, { name: "" });
  q.add("a");
  q.add("b");
  const a = await q.get();
  let drained = false;
  const drain = q.shutDownWithDrain().then(() => drained = true);
  assert.equal(q.shuttingDown(), true);
  q.add("c");
  assert.equal(q.len(), 1, "adds ignored, b still ready");
  const b = await q.get();
  q.done(a!);
  await Promise.resolve();
  assert.equal(drained, false, "b is still processed");
  q.done(b!);
  await drain;
  assert.equal(drained, true);
  assert.equal(await q.get(), undefined);
  await new WorkQueue({}, { name: "" }).shutDownWithDrain(); // nothing processed: at once
});

Deno.test("WorkQueue hands its ready keys out in the order its ready list gives", async () => {
  /** A ready list that hands out the most recent key first (a LIFO). */
  class Lifo extends FifoList {
    #stack: QueuedKey[] = [];
    override push(item: QueuedKey): void {
      this.#stack.push(item);
    }
    override len(): number {
      return this.#stack.length;
    }
    override pop(): QueuedKey | undefined {
      return this.#stack.pop();
    }
  }
  const q = new WorkQueue({}, { name: "", ready: new Lifo() });
  for (const key of ["a", "b", "c", "b"]) q.add(key);
  assert.deepEqual(await takeAllReady(q), ["c", "b", "a"], "the folded add left b in place");
});
