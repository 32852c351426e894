/**
 * Detach in the Go attacher's TestCSIHandler scenarios (external-attacher
 * `pkg/controller/csi_handler_test.go`), by their Go test names: ControllerUnpublishVolume, the
 * VA finalizer's removal and `attached: false`, through the whole controller.
 *
 * Differences from the Go lists, all because our fakes are real where Go's were not:
 * - The fake CSI driver is a real gRPC server, so a driver error always has a gRPC code: the Go
 *   fake's plain `mock error` arrives as `rpc error: code = Unknown desc = mock error`, and a
 *   timeout as `rpc error: code = DeadlineExceeded desc = context deadline exceeded`.
 * - A 403 on a PV reads `persistentvolumes "pv1" is forbidden: Mock error` as the real server
 *   words it; the Go reactor built it with the singular `persistentvolume`.
 * - Removing the last finalizer of a VA being deleted deletes it; the removal's answer shows that
 *   (being deleted, no finalizer left), and ours sends no status patch after it. Go's lists have
 *   the status patch: its fake tracker keeps the object, and against a real server the patch
 *   gets the 404 that the Go handler counts as success.
 * - `secrets` and `volumeContext` are proto3 maps: an empty map and no map are the same on the
 *   wire, so the "empty secrets" rows compare `{}`.
 */

import assert from "node:assert/strict";
import type { Scenario } from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";
import {
  ANN,
  csiNode,
  csiNodeEmpty,
  deleted,
  DET,
  detachError,
  emptySecret,
  FIN,
  gcePdPv,
  getSecret,
  NODE_ID_ANN,
  pv,
  REMOVE_FIN,
  secret,
  va,
  vaInline,
  vaMetaPatch,
  with_,
  withSecretRef,
} from "../../testkit/harness/fixtures.ts";
import type { VolumeAttachment } from "../../lib/kube/types.ts";
import {
  csiEntries,
  CSINODE_NOT_FOUND,
  DEADLINE,
  GCE_HANDLE,
  inlineWithSecretRef,
  MISSING_SECRET,
  MOCK_ERROR,
  PV_NOT_FOUND,
  TIMEOUT_DELAY_MS,
  UNKNOWN,
  unpublish,
  VA_FORBIDDEN,
  vaBothSources,
  vaEntries,
  vaNoSource,
} from "../../testkit/harness/handler_scenario_fixtures.ts";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";

const scenarios: Scenario[] = [
  {
    name: "VolumeAttachment marked for deletion -> successful detach",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish()],
  },
  {
    name: "VolumeAttachment with InlineVolumeSpec marked for deletion -> successful detach",
    initialObjects: [csiNode()],
    addedVA: deleted(vaInline(true, FIN, ANN)),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish()],
  },
  {
    name: "volume with secrets -> successful detach",
    // No CSINode: the node ID comes from the annotation.
    initialObjects: [withSecretRef(pv(), "secret"), secret()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [getSecret("secret"), REMOVE_FIN],
    expectedCsiCalls: [unpublish({ secrets: { foo: "bar" } })],
  },
  {
    name: "volume attachment with InlineVolumeSpec and secrets -> successful detach",
    initialObjects: [secret()],
    addedVA: deleted(inlineWithSecretRef(vaInline(true, FIN, ANN), "secret")),
    expectedActions: [getSecret("secret"), REMOVE_FIN],
    expectedCsiCalls: [unpublish({ secrets: { foo: "bar" } })],
  },
  {
    name: "volume with empty secrets -> successful detach",
    initialObjects: [withSecretRef(pv(), "emptySecret"), emptySecret()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [getSecret("emptySecret"), REMOVE_FIN],
    expectedCsiCalls: [unpublish({ secrets: {} })],
  },
  {
    name: "volume attachment with InlineVolumeSpec and empty secrets -> successful detach",
    initialObjects: [emptySecret()],
    addedVA: deleted(inlineWithSecretRef(vaInline(true, FIN, ANN), "emptySecret")),
    expectedActions: [getSecret("emptySecret"), REMOVE_FIN],
    expectedCsiCalls: [unpublish({ secrets: {} })],
  },
  {
    name: "volume with missing secrets -> error",
    initialObjects: [withSecretRef(pv(), "unknownSecret"), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [getSecret("unknownSecret"), detachError(MISSING_SECRET)],
  },
  {
    name: "CSI detach fails with an error -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [detachError(MOCK_ERROR), REMOVE_FIN],
    expectedCsiCalls: [
      unpublish({}, { error: { code: UNKNOWN, message: "mock error" } }),
      unpublish(),
    ],
  },
  {
    name: "CSI detach times out -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [detachError(DEADLINE), REMOVE_FIN],
    expectedCsiCalls: [unpublish({}, { delayMs: TIMEOUT_DELAY_MS }), unpublish()],
    check: (result) => {
      // The finalizer stays on the VA until an unpublish succeeded; the VA then goes away.
      const calls = csiEntries(result, "ControllerUnpublishVolume");
      assert.deepEqual(calls.map((c) => c.code), [4, undefined]);
      const succeeded = result.timeline.indexOf(calls[1]!);
      const states = vaEntries(result);
      const gone = result.timeline.findIndex((e) => e.kind === "api" && e.type === "DELETED");
      assert.ok(gone > succeeded, "VA deleted only after the successful unpublish");
      for (const s of states.filter((s) => s.type !== "DELETED")) {
        assert.deepEqual(s.finalizers, [FIN]);
      }
      assert.equal(result.server.find(VOLUME_ATTACHMENTS, "pv1-node1"), undefined);
    },
  },
  {
    name: "already detached volume -> ignored",
    initialObjects: [pv(), csiNode()],
    updatedVA: deleted(va(false)),
    expectedActions: [],
  },
  {
    name: "detach unknown PV -> error",
    initialObjects: [csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [detachError(PV_NOT_FOUND), detachError(PV_NOT_FOUND)],
  },
  {
    name: "detach unknown PV -> error + error saving the error",
    initialObjects: [csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    faults: [{ verb: "patch", resource: "volumeattachments", status: 403, times: 2 }],
    expectedActions: [
      detachError(PV_NOT_FOUND),
      detachError(PV_NOT_FOUND),
      detachError(PV_NOT_FOUND),
      detachError(PV_NOT_FOUND),
    ],
  },
  {
    name: "detach VA with neither PV nor InlineCSIVolumeSource reference-> error",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(vaNoSource(va(true, FIN, ANN))),
    expectedActions: [
      detachError("neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source"),
    ],
  },
  {
    name: "detach VA with both PV and InlineCSIVolumeSource reference-> error",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(vaBothSources(va(true, FIN, ANN))),
    expectedActions: [
      detachError("both InlineCSIVolumeSource and PersistentVolumeName specified in VA source"),
    ],
  },
  {
    name: "detach unknown node -> error",
    initialObjects: [pv()],
    addedVA: deleted(va(true, FIN)),
    expectedActions: [detachError(CSINODE_NOT_FOUND)],
  },
  {
    name: "detach unknown node -> use annotation",
    initialObjects: [pv()],
    addedVA: deleted(va(true, FIN, { [NODE_ID_ANN]: "annotatedNodeID" })),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish({ nodeId: "annotatedNodeID" })],
  },
  {
    name: "failed write with finalizer removal -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    faults: [{ verb: "patch", resource: "volumeattachments", status: 403, message: "mock error" }],
    expectedActions: [
      REMOVE_FIN, // fails
      detachError(`could not mark as detached: ${VA_FORBIDDEN}: mock error`),
      REMOVE_FIN,
    ],
    expectedCsiCalls: [unpublish(), unpublish()],
  },
  {
    name:
      "VolumeAttachment with GCEPersistentDiskVolumeSource marked for deletion -> successful detach",
    initialObjects: [gcePdPv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [REMOVE_FIN],
    expectedCsiCalls: [unpublish({ volumeId: GCE_HANDLE })],
  },
];

for (const s of scenarios) {
  Deno.test(`CSI handler: ${s.name}`, async () => {
    await runScenario(s);
  });
}

// Not in the Go table: other finalizers, a CSINode without the driver, an uncertain attach.
const beyondGoTable: Scenario[] = [
  {
    name: "detach of a VA with another finalizer -> only ours removed, status patched",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(with_(va(true, FIN, ANN), (o) => o.metadata.finalizers!.push("other/fin"))),
    expectedActions: [vaMetaPatch({ metadata: { finalizers: ["other/fin"] } }), DET],
    expectedCsiCalls: [unpublish()],
    check: ({ server }) => {
      const stored = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "pv1-node1");
      assert.deepEqual(stored.metadata.finalizers, ["other/fin"]);
      assert.equal(stored.status?.attached, false);
    },
  },
  {
    name: "detach when the CSINode lost the driver -> node ID from the annotation",
    initialObjects: [pv(), csiNodeEmpty()],
    addedVA: deleted(va(true, FIN, { [NODE_ID_ANN]: "annotatedNodeID" })),
    expectedActions: [vaMetaPatch({ metadata: { finalizers: null } })],
    expectedCsiCalls: [unpublish({ nodeId: "annotatedNodeID" })],
  },
  {
    name: "uncertain attach (finalizer, attached=false) deleted -> unpublished before release",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(false, FIN, ANN)),
    // The removal's answer shows the VA gone: no status patch follows.
    expectedActions: [vaMetaPatch({ metadata: { finalizers: null } })],
    expectedCsiCalls: [unpublish()],
  },
];

for (const s of beyondGoTable) {
  Deno.test(`detach: ${s.name}`, async () => {
    await runScenario(s);
  });
}
