import assert from "node:assert/strict";
import { SharedTransport } from "./shared_transport.ts";
import type { Transport } from "./transport.ts";

/** Transports that count how often they were built and closed. */
function counting(): { make: () => Transport; built: number; closed: number } {
  const counts = {
    built: 0,
    closed: 0,
    make: (): Transport => {
      counts.built++;
      return {
        generation: 0,
        send: () => Promise.reject(new Error("not sent")),
        renew: () => {},
        close: () => void counts.closed++,
      };
    },
  };
  return counts;
}

Deno.test("SharedTransport builds one transport on first use, for every user", () => {
  const counts = counting();
  const shared = new SharedTransport(counts.make);
  const a = shared.use();
  const b = shared.use();
  assert.equal(counts.built, 0, "nothing is built before a request");
  assert.equal(a.transport(), b.transport());
  assert.equal(counts.built, 1);
  assert.equal(shared.users, 2);
});

Deno.test("SharedTransport closes the transport when the last user lets go, once", () => {
  const counts = counting();
  const shared = new SharedTransport(counts.make);
  const a = shared.use();
  const b = shared.use();
  a.transport();
  a.release();
  a.release();
  assert.equal(shared.users, 1, "a second release of the same user counts once");
  assert.equal(counts.closed, 0);
  assert.throws(() => a.transport(), /after release/);
  b.transport();
  b.release();
  assert.equal(counts.closed, 1);
  const c = shared.use();
  c.transport();
  assert.equal(counts.built, 2, "a user after the last release gets a new transport");
  c.release();
  assert.equal(counts.closed, 2);
});

Deno.test("SharedTransport closes nothing it never built", () => {
  const counts = counting();
  const shared = new SharedTransport(counts.make);
  shared.use().release();
  assert.deepEqual([counts.built, counts.closed], [0, 0]);
});
