/**
 * `--reconcile-timeout` and `--timeout` bound different things (beyond the Go attacher, where
 * `--timeout` bounds both: https://github.com/kubernetes-csi/external-attacher/issues/356): the
 * reconcile timeout bounds one whole ListVolumes pass, every page included, while each publish
 * keeps the `--timeout` of its own.
 *
 * The reconciler's deadline is on the injected clock: the scenarios move the fake clock while a
 * page is answered, as if the driver had taken that long, so nothing here sleeps to spend the
 * budget. Only the cut page waits in real time, far beyond what is left of the pass.
 */

import assert from "node:assert/strict";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import {
  type CsiCallPoint,
  DEFAULT_DRIVER_CAPABILITIES,
  runScenario,
  type StepContext,
} from "../../testkit/harness/scenario_harness.ts";
import { ADD_FIN_ANN, ATT, csiNode, pv, va } from "../../testkit/harness/fixtures.ts";

/** `--timeout` of the scenarios: each ControllerPublish/Unpublish call. */
const TIMEOUT_MS = 1000;
/** `--reconcile-timeout` of the scenarios: one whole ListVolumes pass. */
const RECONCILE_TIMEOUT_MS = 3000;

function listVolumesPage(
  page: { startingToken?: string; nextToken?: string; delayMs?: number },
): ScriptedCall {
  return {
    method: "ListVolumes",
    expect: { startingToken: page.startingToken ?? "", maxEntries: 1 },
    respond: {
      // The VA stays unattached in the cache (no watch here): so must the driver show it.
      entries: [{ volume: { volumeId: "other" }, status: { publishedNodeIds: ["nodeID1"] } }],
      nextToken: page.nextToken ?? "",
    },
    delayMs: page.delayMs,
  };
}

const publish: ScriptedCall = {
  method: "ControllerPublishVolume",
  expect: { volumeId: "handle1", nodeId: "nodeID1" },
};

/**
 * Records the timeout each publish and ListVolumes page was given, and moves the fake clock by
 * `pageMs` after each ListVolumes page is answered (the time the page took).
 */
function timeouts(pageMs: number) {
  const seen: string[] = [];
  return {
    seen,
    duringCsiCall(call: CsiCallPoint, ctx: StepContext): void {
      if (call.phase === "before") seen.push(`${call.method} ${call.options.timeoutMs}`);
      if (call.phase === "after" && call.method === "ListVolumes") ctx.clock.advance(pageMs);
    },
  };
}

Deno.test("reconcile timeout: a pass whose pages outlast it is cut, while a publish keeps --timeout", async () => {
  const record = timeouts(2950);
  const result = await runScenario({
    name: "ListVolumes pass cut by --reconcile-timeout",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    driverCapabilities: [
      ...DEFAULT_DRIVER_CAPABILITIES,
      "LIST_VOLUMES",
      "LIST_VOLUMES_PUBLISHED_NODES",
    ],
    handlerOptions: { timeoutMs: TIMEOUT_MS },
    reconcilerOptions: { timeoutMs: RECONCILE_TIMEOUT_MS, maxEntries: 1 },
    reconcile: true,
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [
      publish,
      listVolumesPage({ nextToken: "1" }),
      // 50 ms of the pass are left for this page, which takes 1 s: the pass is cut.
      listVolumesPage({ startingToken: "1", delayMs: 1000 }),
    ],
    duringCsiCall: (call, ctx) => record.duringCsiCall(call, ctx),
  });
  assert.deepEqual(record.seen, [
    `ControllerPublishVolume ${TIMEOUT_MS}`,
    `ListVolumes ${RECONCILE_TIMEOUT_MS}`,
    "ListVolumes 50",
  ]);
  assert.match(
    String(result.reconcileError),
    /^Error: failed to ListVolumes: failed to list volumes: rpc error: code = DeadlineExceeded/,
  );
});

Deno.test("reconcile timeout: a pass longer than --timeout finishes within the reconcile timeout", async () => {
  const record = timeouts(800);
  const result = await runScenario({
    name: "ListVolumes pass longer than --timeout",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    driverCapabilities: [
      ...DEFAULT_DRIVER_CAPABILITIES,
      "LIST_VOLUMES",
      "LIST_VOLUMES_PUBLISHED_NODES",
    ],
    handlerOptions: { timeoutMs: TIMEOUT_MS },
    reconcilerOptions: { timeoutMs: RECONCILE_TIMEOUT_MS, maxEntries: 1 },
    reconcile: true,
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [
      publish,
      listVolumesPage({ nextToken: "1" }),
      listVolumesPage({ startingToken: "1", nextToken: "2" }),
      listVolumesPage({ startingToken: "2" }),
    ],
    duringCsiCall: (call, ctx) => record.duringCsiCall(call, ctx),
  });
  // Three pages of 800 ms: 2.4 s, more than --timeout, within the reconcile timeout.
  assert.deepEqual(record.seen, [
    `ControllerPublishVolume ${TIMEOUT_MS}`,
    `ListVolumes ${RECONCILE_TIMEOUT_MS}`,
    `ListVolumes ${RECONCILE_TIMEOUT_MS - 800}`,
    `ListVolumes ${RECONCILE_TIMEOUT_MS - 1600}`,
  ]);
  assert.equal(result.reconcileError, undefined);
});
