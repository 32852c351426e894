/**
 * Scenario 16: the CSI driver stops gracefully after the attacher's connection has been idle for
 * more than two minutes.
 *
 * grpc-js and connect-node under Deno 2.9.6 crash the whole process (an nghttp2 assertion or a
 * segfault in Deno's `node:http2`, https://github.com/denoland/deno/issues/36788) when a grpc-go
 * server's `GracefulStop` (GOAWAY, then the close) reaches a session idle for about two minutes or
 * more. Our HTTP/2 client (`lib/wire/http2`) must not: the attacher treats the GOAWAY as the
 * connection loss it is and exits with status 1, "Lost connection to CSI driver, exiting", as the
 * Go sidecar does (csi-lib-utils `connection.ExitOnConnectionLoss`); it does not reconnect. The
 * scenario asserts that exit (status 1, no signal, no uncaught error), then starts the driver and
 * a new attacher, as a Pod's restart would, and the next attach works.
 *
 * Nothing calls the driver during the idle time: the attacher runs with `--reconcile-sync=1h` (its
 * ListVolumes reconciler runs at start, then after that period) and the suite makes no call of its
 * own; the driver's call log shows that.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ScenarioContext } from "../context.ts";
import { countByVolume, PUBLISH } from "../driver_log.ts";
import { sleep, waitForLog, waitUntil } from "../kit.ts";
import { READY_LINE } from "./round_trip.ts";

/** How long the connection stays without a call before the driver stops (issue: > 2 min). */
export const IDLE_MS = 125_000;

/** Graceful driver stop after a long idle connection. */
export async function idleDriverStop(ctx: ScenarioContext, idleMs = IDLE_MS): Promise<void> {
  const { kit } = ctx;
  const node = ctx.nodes[0]!;
  const first = ctx.startAttacher("a", { args: ["--reconcile-sync=1h"] });
  await waitForLog(first, READY_LINE);
  const before = await kit.makeVolume("vol0");
  const va0 = await kit.createVa("va0", node, before.pv);
  await kit.waitAttached(va0);

  // Idle from the driver's last call on (the publish, or a later status-driven call, if any).
  const lastCall = async () => Math.max(...(await ctx.cluster.driverCalls()).map((c) => c.time));
  const idleFrom = await lastCall();
  const until = idleFrom + idleMs;
  while (Date.now() < until) {
    if (first.exitStatus !== undefined) {
      assert.fail(`the attacher exited while idle:\n${await first.tail()}`);
    }
    await sleep(Math.min(5000, until - Date.now()));
  }
  assert.equal(await lastCall(), idleFrom, "a CSI call during the idle time");
  assert.equal(first.exitStatus, undefined, "the attacher still runs after the idle time");

  const stoppedAt = Date.now();
  await ctx.cluster.stopDriver();
  const status = await first.status;
  const exitedAfter = (Date.now() - stoppedAt) / 1000;
  const log = await first.output();
  assert.equal(status.signal, null, `the attacher was killed by a signal:\n${await first.tail()}`);
  assert.equal(status.code, 1, `exit status after the driver's GOAWAY:\n${await first.tail()}`);
  assert.match(log, /Lost connection to CSI driver, exiting/);
  assert.doesNotMatch(log, /Uncaught|panicked|Assertion|Segmentation fault/);
  const driverLog = await Deno.readTextFile(ctx.cluster.info.driverLog);
  assert.match(driverLog, /graceful stop complete/, "the driver's GracefulStop completed");

  await ctx.cluster.startDriver();
  const second = ctx.startAttacher("b", { args: ["--reconcile-sync=1h"] });
  await waitForLog(second, READY_LINE);
  const after = await kit.makeVolume("vol1");
  const va1 = await kit.createVa("va1", node, after.pv);
  await kit.waitAttached(va1);
  await waitUntil("both volumes published on the driver", async () => {
    const published = await kit.publishedVolumes(ctx.nodeId);
    return published.has(before.volumeId) && published.has(after.volumeId);
  }, 30_000);
  await ctx.checkRepublishes([], "repeated ControllerPublishVolume calls");
  const publishes = countByVolume(await ctx.cluster.driverCalls(), PUBLISH);
  assert.equal(publishes.get(before.volumeId), 1, "publishes of the volume attached before");
  assert.equal(publishes.get(after.volumeId), 1, "publishes of the volume attached after");
  console.log(
    `    idle ${((stoppedAt - idleFrom) / 1000).toFixed(0)} s, then GracefulStop: the attacher ` +
      `exited 1 after ${exitedAfter.toFixed(1)} s ("Lost connection to CSI driver, exiting")`,
  );
}
