import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { ItemExponentialFailureRateLimiter } from "./rate_limiters.ts";
import { RateLimitingWorkQueue } from "./rate_limiting_queue.ts";
import { DelayingWorkQueue } from "./delaying_queue.ts";
import { WorkQueue } from "./queue.ts";
import type { DelayingQueue } from "./types.ts";
import { takeReady } from "../../testkit/harness/ready_work.ts";

const SECOND = 1000;

function newQueue(): { clock: FakeClock; q: RateLimitingWorkQueue } {
  const clock = new FakeClock(0);
  const q = new RateLimitingWorkQueue({
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: SECOND, maxMs: 5 * 60 * SECOND }),
  }, { name: "csi-attacher-va" });
  return { clock, q };
}

Deno.test("RateLimitingWorkQueue retries a failing key after 1s, 2s, 4s of clock time", async () => {
  const { clock, q } = newQueue();
  q.add("va-1");
  const expectedDelays = [1, 2, 4, 8].map((s) => s * SECOND);
  for (const [i, delay] of expectedDelays.entries()) {
    const key = await takeReady(q);
    assert.equal(key, "va-1", `attempt ${i + 1} handed out`);
    q.addRateLimited("va-1");
    q.done("va-1");
    assert.equal(q.numRequeues("va-1"), i + 1, `requeues after attempt ${i + 1}`);
    clock.advance(delay - 1);
    assert.equal(q.len(), 0, `retry ${i + 1} not ready 1 ms before ${delay} ms`);
    clock.advance(1);
    assert.equal(q.len(), 1, `retry ${i + 1} ready after ${delay} ms`);
  }
  q.shutDown();
});

Deno.test("RateLimitingWorkQueue.forget resets the backoff but leaves done to the worker", async () => {
  const { clock, q } = newQueue();
  q.addRateLimited("va-1");
  q.addRateLimited("va-1");
  assert.equal(q.numRequeues("va-1"), 2);
  clock.advance(SECOND);
  assert.equal(await takeReady(q), "va-1", "the earliest of the two delays wins");
  q.forget("va-1");
  assert.equal(q.numRequeues("va-1"), 0);
  q.add("va-1");
  assert.equal(await takeReady(q), undefined, "forget does not end processing");
  q.done("va-1");
  assert.equal(await takeReady(q), "va-1");
  q.addRateLimited("va-1");
  q.done("va-1");
  clock.advance(SECOND);
  assert.equal(
    await takeReady(q),
    "va-1",
    "after forget the next retry waits the base delay again",
  );
  q.done("va-1");
  q.shutDown();
});

Deno.test("RateLimitingWorkQueue workers receive retried keys through get() as the clock advances", async () => {
  const { clock, q } = newQueue();
  const attempts: Array<[string, number]> = [];
  let failuresLeft = 3;
  const worker = (async () => {
    for (;;) {
      const key = await q.get();
      if (key === undefined) return;
      attempts.push([key, clock.now()]);
      if (failuresLeft-- > 0) {
        q.addRateLimited(key);
      } else {
        q.forget(key);
      }
      q.done(key);
    }
  })();
  q.add("va-1");
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    clock.advance(500);
  }
  q.shutDown();
  await worker;
  assert.deepEqual(attempts, [["va-1", 0], ["va-1", 1000], ["va-1", 3000], ["va-1", 7000]]);
  assert.equal(q.numRequeues("va-1"), 0);
  assert.equal(clock.pendingTimers(), 0);
});

Deno.test("RateLimitingWorkQueue on its own: asks the limiter, hands the delay to the queue below", () => {
  const calls: string[] = [];
  const below: DelayingQueue = {
    add: (key) => calls.push(`add ${key}`),
    addAfter: (key, ms) => calls.push(`addAfter ${key} ${ms}`),
    get: () => Promise.resolve(undefined),
    done: (key) => calls.push(`done ${key}`),
    len: () => 7,
    shutDown: () => calls.push("shutDown"),
    shutDownWithDrain: () => Promise.resolve(),
    shuttingDown: () => false,
  };
  const limiter = new ItemExponentialFailureRateLimiter({ baseMs: 5, maxMs: 1000 });
  const q = new RateLimitingWorkQueue({ rateLimiter: limiter, queue: below }, { name: "x" });
  q.add("k");
  q.addRateLimited("k");
  q.addRateLimited("k");
  q.forget("k");
  q.addRateLimited("k");
  q.done("k");
  q.shutDown();
  assert.equal(q.len(), 7);
  assert.deepEqual(calls, [
    "add k",
    "addAfter k 5",
    "addAfter k 10",
    "addAfter k 5",
    "done k",
    "shutDown",
  ]);
});

Deno.test("RateLimitingWorkQueue around DelayingWorkQueue around WorkQueue: a retry reaches the plain queue when due", async () => {
  const clock = new FakeClock(0);
  const plain = new WorkQueue({ clock }, { name: "" });
  const delaying = new DelayingWorkQueue({ clock, queue: plain }, { name: "" });
  const q = new RateLimitingWorkQueue({
    clock,
    queue: delaying,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: SECOND, maxMs: 60 * SECOND }),
  }, { name: "" });
  q.add("va-1");
  assert.equal(plain.len(), 1, "add goes straight to the plain queue");
  assert.equal(await takeReady(plain), "va-1");
  q.addRateLimited("va-1");
  q.done("va-1");
  assert.equal(plain.has("va-1"), false, "waiting in the delaying layer, not in the plain queue");
  clock.advance(SECOND);
  assert.equal(plain.len(), 1);
  assert.equal(await takeReady(q), "va-1");
  q.done("va-1");
  q.addRateLimited("va-1");
  const drained = q.shutDownWithDrain();
  assert.equal(plain.shuttingDown(), true, "shutting down reaches the bottom layer");
  assert.equal(clock.pendingTimers(), 0, "the waiting retry is dropped");
  await drained;
});
