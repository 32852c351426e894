/**
 * The frame writer's fences: asked synchronously right before the write that would carry their
 * frames, not when the frames were queued.
 */

import assert from "node:assert/strict";
import { FrameWriter, type WriteFence } from "./writer.ts";

/** The part of a connection the writer uses; each write waits until released. */
class HeldConn {
  events: string[] = [];
  #release: (() => void)[] = [];

  write(bytes: Uint8Array): Promise<number> {
    this.events.push(`write ${[...bytes].join(",")}`);
    return new Promise((resolve) => this.#release.push(() => resolve(bytes.length)));
  }

  close(): void {
    this.events.push("close");
  }

  /** Lets the oldest write finish, then lets the writer run on. */
  async release(): Promise<void> {
    this.#release.shift()?.();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }

  get held(): number {
    return this.#release.length;
  }
}

function fence(conn: HeldConn, answer: { open: boolean }): WriteFence & { refusals: number } {
  const f = {
    refusals: 0,
    allowed: () => {
      conn.events.push(`fence ${answer.open}`);
      // Runs after the write call only if nothing asynchronous stands between the two.
      queueMicrotask(() => conn.events.push("microtask"));
      return answer.open;
    },
    refused: () => {
      f.refusals++;
      conn.events.push("refused");
    },
  };
  return f;
}

Deno.test("FrameWriter: a fence is asked right before the write that carries its frames", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, (err) => {
    throw err;
  });
  const answer = { open: true };
  const f = fence(conn, answer);
  writer.write(Uint8Array.of(1));
  await conn.release(); // nothing to release yet: the first write is now in progress
  assert.deepEqual(conn.events, ["write 1"]);
  // Queued behind a write in progress, while the fence is open...
  writer.write(Uint8Array.of(2), false, f);
  writer.write(Uint8Array.of(3));
  writer.write(Uint8Array.of(4), false, f);
  // ...which closes before that write ends (a pause, a lapsed lease).
  answer.open = false;
  await conn.release();
  assert.deepEqual(conn.events, ["write 1", "fence false", "write 3", "refused", "microtask"]);
  assert.equal(f.refusals, 1, "told once per write, however many of its frames were dropped");
  // An open fence: its frames go out with the others, the check right before the write call.
  const g = fence(conn, { open: true });
  conn.events = [];
  writer.write(Uint8Array.of(5), false, g);
  writer.write(Uint8Array.of(6));
  await conn.release();
  assert.deepEqual(conn.events, ["fence true", "write 5,6", "microtask"]);
  assert.equal(conn.held, 1);
  writer.close();
  await conn.release();
});

Deno.test("FrameWriter: a write whose frames were all refused writes nothing", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, (err) => {
    throw err;
  });
  const f = fence(conn, { open: false });
  writer.write(Uint8Array.of(7), false, f);
  await conn.release();
  assert.deepEqual(conn.events, ["fence false", "refused", "microtask"]);
  assert.equal(conn.held, 0);
  writer.write(Uint8Array.of(8));
  await conn.release();
  assert.deepEqual(conn.events.slice(3), ["write 8"]);
  writer.close();
});
