/**
 * The Events the CSI handler records on VolumeAttachments (beyond the Go attacher, which records
 * none): a Warning with the `attachError`/`detachError` text on each failure, a Normal on the
 * success that follows a failure, nothing for an attach or detach that simply works. The handler
 * runs against the scenario harness with a sink that keeps what it is given; posting and
 * aggregation are `lib/events/recorder_test.ts`'s.
 */

import assert from "node:assert/strict";
import { CsiHandler } from "../../lib/controller/csi_handler.ts";
import type { EventSink } from "../../lib/events/recorder.ts";
import type { ObjectReference } from "../../lib/kube/types.ts";
import type { Scenario } from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import {
  ADD_FIN_ANN,
  addFinAnnFor,
  ANN,
  ATT,
  ATT_CLR,
  attachError,
  csiNode,
  deleted,
  detachError,
  FIN,
  forUid,
  getSecret,
  pv,
  REMOVE_FIN,
  secret,
  va,
  vaStatusPatch,
  with_,
  withSecretRef,
} from "../../testkit/harness/fixtures.ts";

interface Recorded {
  object: ObjectReference;
  type: string;
  reason: string;
  message: string;
}

class RecordingSink implements EventSink {
  events: Recorded[] = [];
  record(object: ObjectReference, type: string, reason: string, message: string): void {
    this.events.push({ object, type, reason, message });
  }
  /** `type reason: message` of each Event. */
  summary(): string[] {
    return this.events.map((e) => `${e.type} ${e.reason}: ${e.message}`);
  }
}

const MOCK_ERROR = "rpc error: code = Unknown desc = mock error";
const FAIL = { error: { code: 2, message: "mock error" } };

function publish(answer: Partial<ScriptedCall> = {}): ScriptedCall {
  return {
    method: "ControllerPublishVolume",
    expect: { volumeId: "handle1", nodeId: "nodeID1" },
    ...answer,
  };
}

function unpublish(answer: Partial<ScriptedCall> = {}): ScriptedCall {
  return {
    method: "ControllerUnpublishVolume",
    expect: { volumeId: "handle1", nodeId: "nodeID1" },
    ...answer,
  };
}

/** Runs `scenario` with a CSI handler that records its Events into the returned sink. */
async function runWithEvents(scenario: Scenario): Promise<RecordingSink> {
  const sink = new RecordingSink();
  await runScenario({
    ...scenario,
    handlerFactory: ({ kube, csi, log, clock, stores, memory, options, fence }) =>
      new CsiHandler({ kube, csi, log, clock, stores, memory, events: sink, fence }, options),
  });
  return sink;
}

Deno.test("events: attach fails twice, then succeeds -> two Warnings with the attachError text, then a Normal", async () => {
  const sink = await runWithEvents({
    name: "attach fails twice",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [
      ADD_FIN_ANN,
      attachError(MOCK_ERROR),
      ADD_FIN_ANN,
      // The same error at the same second: the status patch has nothing to change.
      vaStatusPatch({}),
      ADD_FIN_ANN,
      ATT_CLR,
    ],
    expectedCsiCalls: [publish(FAIL), publish(FAIL), publish()],
  });
  assert.deepEqual(sink.summary(), [
    `Warning AttachFailed: ${MOCK_ERROR}`,
    `Warning AttachFailed: ${MOCK_ERROR}`,
    "Normal Attached: Volume attached to node node1",
  ]);
  const { kind, apiVersion, name, uid } = sink.events[0]!.object;
  assert.deepEqual({ kind, apiVersion, name }, {
    kind: "VolumeAttachment",
    apiVersion: "storage.k8s.io/v1",
    name: "pv1-node1",
  });
  // The VA as the server returned it: the uid keeps Events of a re-created VA apart.
  assert.match(uid ?? "", /^[0-9a-f-]{36}$/);
});

Deno.test("events: attach and detach that work at once -> no Events", async () => {
  const attach = await runWithEvents({
    name: "attach works",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish()],
  });
  assert.deepEqual(attach.summary(), []);
  const detach = await runWithEvents({
    name: "detach works",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish()],
  });
  assert.deepEqual(detach.summary(), []);
});

Deno.test("events: detach fails, then succeeds -> a Warning with the detachError text, then a Normal", async () => {
  const sink = await runWithEvents({
    name: "detach fails once",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [detachError(MOCK_ERROR), REMOVE_FIN],
    expectedCsiCalls: [unpublish(FAIL), unpublish()],
  });
  assert.deepEqual(sink.summary(), [
    `Warning DetachFailed: ${MOCK_ERROR}`,
    "Normal Detached: Volume detached from node node1",
  ]);
});

Deno.test("events: an attachError left by an earlier run -> a Normal Event when the attach works", async () => {
  const failedBefore = with_(va(false), (o) => {
    o.status!.attachError = { message: MOCK_ERROR, time: "2026-01-01T00:00:00Z" };
  });
  const sink = await runWithEvents({
    name: "attach works after an earlier run's failure",
    initialObjects: [pv(), csiNode()],
    addedVA: failedBefore,
    expectedActions: [ADD_FIN_ANN, ATT_CLR],
    expectedCsiCalls: [publish()],
  });
  assert.deepEqual(sink.summary(), ["Normal Attached: Volume attached to node node1"]);
});

Deno.test("events: a failing attach of a volume with publish secrets -> no secret value in the Event", async () => {
  const sink = await runWithEvents({
    name: "attach with secrets fails",
    initialObjects: [withSecretRef(pv(), "secret"), csiNode(), secret()],
    addedVA: va(false),
    expectedActions: [getSecret("secret"), ADD_FIN_ANN, attachError(MOCK_ERROR)],
    expectedCsiCalls: [publish({ ...FAIL, expect: { secrets: { foo: "bar" } } })],
  });
  assert.deepEqual(sink.summary(), [`Warning AttachFailed: ${MOCK_ERROR}`]);
  assert.ok(!JSON.stringify(sink.events).includes("bar"));
});

Deno.test("events: a VA re-created under the name of one that failed and went away -> no Normal Event", async () => {
  let stage = 0;
  const recreated = with_(va(false), (o) => o.metadata.uid = "uid-2");
  const sink = await runWithEvents({
    name: "failed VA deleted, re-created, attached at once",
    initialObjects: [csiNode()],
    addedVA: with_(va(false), (o) => o.metadata.uid = "uid-1"),
    between: ({ actions, server, vaInformer, pvInformer }) => {
      if (stage === 0 && actions().length === 1) {
        // The failed VA is deleted before it got our finalizer: no detach to do.
        stage = 1;
        const gone = deleted(with_(va(false), (o) => o.metadata.uid = "uid-1"));
        vaInformer.emitUpdate(vaInformer.get("pv1-node1")!, gone);
      } else if (stage === 1) {
        stage = 2;
        server.create("persistentvolumes", pv());
        pvInformer.set(pv());
        // Re-created on the server too: the attacher's patches carry the uid they were made for.
        server.delete("volumeattachments", "pv1-node1");
        server.create("volumeattachments", recreated);
        vaInformer.emitUpdate(vaInformer.get("pv1-node1")!, recreated);
      }
    },
    expectedActions: [
      forUid(attachError('persistentvolume "pv1" not found'), "uid-1"),
      addFinAnnFor("uid-2"),
      forUid(ATT, "uid-2"),
    ],
    expectedCsiCalls: [publish()],
  });
  assert.equal(stage, 2);
  assert.deepEqual(sink.summary(), [
    'Warning AttachFailed: persistentvolume "pv1" not found',
  ]);
});

Deno.test("events: a driver error with control characters -> escaped in attachError and the Event, UTF-8 kept", async () => {
  const escaped =
    "rpc error: code = Internal desc = ディスク \\x1b[31mkaputt\\x00\\x0aforged: line";
  const sink = await runWithEvents({
    name: "driver error text with control characters",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, attachError(escaped), ADD_FIN_ANN, ATT_CLR],
    expectedCsiCalls: [
      publish({ error: { code: 13, message: "ディスク \x1b[31mkaputt\x00\nforged: line" } }),
      publish(),
    ],
  });
  assert.deepEqual(sink.summary(), [
    `Warning AttachFailed: ${escaped}`,
    "Normal Attached: Volume attached to node node1",
  ]);
});
