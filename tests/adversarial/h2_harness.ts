/**
 * The runner of the adversarial HTTP/2 table (`h2_peer.ts`): one gRPC call from our channel
 * to a scripted peer that misbehaves on its first connection, then the checks every row shares.
 *
 * For each row it asserts that
 * - the call settles within its deadline (plus a small margin), with the row's gRPC code and a
 *   message matching the row's (a named error: `GrpcStatusError`, never anything else);
 * - the live heap after a forced collection, taken before the call, at the script's checkpoints
 *   and after the call, grows by less than {@link MAX_GROWTH_MIB};
 * - once the misbehaving connection is gone, a next call, on a new connection, succeeds.
 *
 * With `H2_ROW_FIGURES` set, each row prints its code, time and heap growth as a JSON line.
 *
 * @module
 */

import assert from "node:assert/strict";
import { GrpcChannel } from "../../lib/wire/grpc/channel.ts";
import { GrpcStatusError } from "../../lib/wire/grpc/status.ts";
import type { Http2SessionOptions } from "../../lib/wire/http2/session.ts";
import { answerOk, type PeerConn, startRawPeer } from "../../testkit/h2/raw_peer.ts";

/** The largest growth of the live heap a row may cause, in MiB. */
export const MAX_GROWTH_MIB = 12;

/** The method called (any path does: the peers do not look). */
const PATH = "/csi.v1.Identity/Probe";

/** What a script can ask of the runner. */
export interface RowContext {
  /** Takes a heap measurement now (at the peak of a flood). */
  checkpoint(): void;
  /**
   * Says the misbehaviour is over and waits until the runner has taken its measurements; the
   * connection is closed when the script returns.
   */
  hold(): Promise<void>;
  /** Whether the client's call has settled: a script that misbehaves without end may stop. */
  callSettled(): boolean;
}

/** One row of the table. */
export interface Row {
  name: string;
  /** What the peer does on the first connection; later connections answer OK. */
  script: (peer: PeerConn, ctx: RowContext) => Promise<void>;
  /** The expected gRPC code (0: the call succeeds). */
  code: number;
  /** What the error's details must match. */
  details?: RegExp;
  /** The call's deadline. Default 2000 ms. */
  timeoutMs?: number;
  /** Octets of the request message. Default 1. */
  body?: number;
  /** HTTP/2 windows of the client. */
  session?: Http2SessionOptions;
}

declare const gc: (() => void) | undefined;

function liveHeapMiB(): number {
  if (typeof gc === "function") {
    gc();
    gc();
  }
  return Deno.memoryUsage().heapUsed / 2 ** 20;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Runs one row; see the module documentation. */
export async function runRow(row: Row): Promise<void> {
  const heaps: number[] = [];
  let held!: () => void;
  const misbehaved = new Promise<void>((resolve) => held = resolve);
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  let settled = false;
  const ctx: RowContext = {
    checkpoint: () => heaps.push(liveHeapMiB()),
    hold: () => {
      held();
      return released;
    },
    callSettled: () => settled,
  };
  const server = await startRawPeer(async (peer, index) => {
    if (index > 0) return answerOk(peer);
    try {
      await row.script(peer, ctx);
    } finally {
      held();
    }
  });
  const channel = new GrpcChannel(server.address, {
    backoffMs: 10,
    ...(row.session === undefined ? {} : { session: row.session }),
  });
  try {
    const before = liveHeapMiB();
    const timeoutMs = row.timeoutMs ?? 2000;
    const started = performance.now();
    const result = await channel.unary(PATH, new Uint8Array(row.body ?? 1), timeoutMs).then(
      () => ({ code: 0, details: "" }),
      (err: unknown) => {
        assert.ok(err instanceof GrpcStatusError, `not a GrpcStatusError: ${err}`);
        return { code: err.code, details: err.details };
      },
    );
    const elapsed = performance.now() - started;
    settled = true;
    assert.ok(elapsed < timeoutMs + 500, `settled after ${elapsed.toFixed(0)} ms`);
    assert.equal(result.code, row.code, `code ${result.code}: ${result.details}`);
    if (row.details !== undefined) assert.match(result.details, row.details);
    // The script's misbehaviour is over (or it gave up) before the last measurement.
    await Promise.race([misbehaved, sleep(5000)]);
    heaps.push(liveHeapMiB());
    const growth = Math.max(...heaps) - before;
    if (Deno.env.get("H2_ROW_FIGURES") !== undefined) {
      console.log(JSON.stringify({
        row: row.name,
        code: result.code,
        ms: Math.round(elapsed),
        heapGrowthMiB: +growth.toFixed(1),
      }));
    }
    assert.ok(growth < MAX_GROWTH_MIB, `the heap grew ${growth.toFixed(1)} MiB`);
    release();
    // The next call, once the bad connection is gone, goes to a new one and succeeds.
    let last: unknown;
    for (let attempt = 0; attempt < 100; attempt++) {
      try {
        await channel.unary(PATH, new Uint8Array(1), 2000);
        last = undefined;
        break;
      } catch (err) {
        last = err;
        await sleep(20);
      }
    }
    assert.equal(last, undefined, `the next call failed: ${last}`);
    assert.ok(server.connections >= 2, "the next call used a new connection");
  } finally {
    release();
    channel.close();
    await server.close();
  }
}
