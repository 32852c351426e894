import assert from "node:assert/strict";
import { ABORTED, linkSignal, raceAbort } from "./abort.ts";

Deno.test("raceAbort() resolves the promise's value and removes its abort listener", async () => {
  const ac = new AbortController();
  const added: unknown[] = [];
  const removed: unknown[] = [];
  const signal = ac.signal;
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = (type: string, fn: unknown, opts?: unknown) => {
    added.push(fn);
    add(type, fn as EventListener, opts as AddEventListenerOptions);
  };
  signal.removeEventListener = (type: string, fn: unknown) => {
    removed.push(fn);
    remove(type, fn as EventListener);
  };
  for (let i = 0; i < 3; i++) assert.equal(await raceAbort(Promise.resolve(i), signal), i);
  await assert.rejects(raceAbort(Promise.reject(new Error("boom")), signal), /boom/);
  assert.equal(added.length, 4);
  assert.deepEqual(removed, added);
});

Deno.test("raceAbort() resolves ABORTED when the signal aborts first, or already has", async () => {
  const ac = new AbortController();
  const pending = new Promise<number>(() => {});
  const raced = raceAbort(pending, ac.signal);
  ac.abort();
  assert.equal(await raced, ABORTED);
  // A promise rejecting after the abort is not left unhandled.
  assert.equal(await raceAbort(Promise.reject(new Error("late")), ac.signal), ABORTED);
});

Deno.test("linkSignal() follows its parents until disposed", () => {
  const a = new AbortController();
  const b = new AbortController();
  const link = linkSignal(a.signal, b.signal);
  assert.equal(link.signal.aborted, false);
  b.abort("b went");
  assert.equal(link.signal.aborted, true);
  assert.equal(link.signal.reason, "b went");

  const c = new AbortController();
  const disposed = linkSignal(c.signal);
  disposed.dispose();
  c.abort();
  assert.equal(disposed.signal.aborted, false, "a disposed link no longer follows");

  const d = new AbortController();
  d.abort("early");
  const early = linkSignal(new AbortController().signal, d.signal);
  assert.equal(early.signal.reason, "early");
});
