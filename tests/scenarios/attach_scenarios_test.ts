/**
 * Attach in the Go attacher's TestCSIHandler scenarios (external-attacher
 * `pkg/controller/csi_handler_test.go`), by their Go test names, plus
 * TestVolumeAttachmentWithErrorCode, TestCSIHandlerReadOnly and TestMarkAsMigrated:
 * ControllerPublishVolume and the writes around it, through the whole controller.
 *
 * Differences from the Go lists, all because our fakes are real where Go's were not:
 * - The fake CSI driver is a real gRPC server, so a driver error always has a gRPC code: the Go
 *   fake's plain `mock error` arrives as `rpc error: code = Unknown desc = mock error`, and a
 *   timeout as `rpc error: code = DeadlineExceeded desc = context deadline exceeded`.
 * - A 403 on a PV reads `persistentvolumes "pv1" is forbidden: Mock error` as the real server
 *   words it; the Go reactor built it with the singular `persistentvolume`.
 * - Removing the last finalizer of a VA being deleted deletes it, so the following status patch
 *   gets 404 (the handler counts that as success; the request is still recorded).
 * - `secrets` and `volumeContext` are proto3 maps: an empty map and no map are the same on the
 *   wire, so the "empty secrets" rows compare `{}`.
 */

import assert from "node:assert/strict";
import type { Scenario } from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";
import {
  ADD_FIN_ANN,
  ANN,
  ATT,
  ATT_CLR,
  attachError,
  csiNode,
  csiNodeEmpty,
  deleted,
  detachError,
  emptySecret,
  FIN,
  gcePdPv,
  getSecret,
  node,
  NODE_ID_ANN,
  pv,
  PV_ADD_FIN,
  secret,
  va,
  vaInline,
  vaMetaPatch,
  vaStatusPatch,
  with_,
  withSecretRef,
} from "../../testkit/harness/fixtures.ts";
import {
  csiEntries,
  CSINODE_NOT_FOUND,
  DEADLINE,
  GCE_HANDLE,
  inlineReadOnly,
  inlineWithAttributes,
  inlineWithSecretRef,
  MISSING_SECRET,
  MOCK_ERROR,
  MOUNT_SNW,
  publish,
  PV_NOT_FOUND,
  pvReadOnly,
  pvWithAttributes,
  TIMEOUT_DELAY_MS,
  UNKNOWN,
  unpublish,
  VA_FORBIDDEN,
  vaBothSources,
  vaEntries,
  vaNoSource,
  vaUnknownDriver,
} from "../../testkit/harness/handler_scenario_fixtures.ts";
import type { CsiNode, VolumeAttachment } from "../../lib/kube/types.ts";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";

const scenarios: Scenario[] = [
  {
    name: "VolumeAttachment added -> successful attachment",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish()],
    check: (result) => {
      // Not a migration driver: no `migrated` metrics label at all.
      const [call] = csiEntries(result, "ControllerPublishVolume");
      assert.ok(call && !("migrated" in call.options));
    },
  },
  {
    name: "VolumeAttachment with InlineVolumeSpec -> successful attachment",
    initialObjects: [csiNode()],
    addedVA: vaInline(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ volumeCapability: MOUNT_SNW })],
  },
  {
    name: "readOnly VolumeAttachment added -> successful attachment",
    initialObjects: [pvReadOnly(pv()), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ readonly: true })],
  },
  {
    name: "readOnly VolumeAttachment with InlineVolumeSpec -> successful attachment",
    initialObjects: [csiNode()],
    addedVA: inlineReadOnly(vaInline(false)),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ readonly: true, volumeCapability: MOUNT_SNW })],
  },
  {
    name: "VolumeAttachment updated -> successful attachment",
    initialObjects: [pv(), csiNode()],
    updatedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish()],
  },
  {
    name: "VolumeAttachment with InlineVolumeSpec updated -> successful attachment",
    initialObjects: [csiNode()],
    updatedVA: vaInline(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ volumeCapability: MOUNT_SNW })],
  },
  {
    name: "VolumeAttachment with attributes -> successful attachment",
    initialObjects: [pvWithAttributes(pv(), { foo: "bar" }), csiNode()],
    updatedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ volumeContext: { foo: "bar" } })],
  },
  {
    name: "VolumeAttachment with InlineVolumeSpec and attributes -> successful attachment",
    initialObjects: [csiNode()],
    updatedVA: inlineWithAttributes(vaInline(false), { foo: "bar" }),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ volumeContext: { foo: "bar" }, volumeCapability: MOUNT_SNW })],
  },
  {
    name: "VolumeAttachment with secrets -> successful attachment",
    initialObjects: [withSecretRef(pv(), "secret"), secret(), csiNode()],
    updatedVA: va(false),
    expectedActions: [getSecret("secret"), ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ secrets: { foo: "bar" } })],
  },
  {
    name: "VolumeAttachment with InlineVolumeSpec and secrets -> successful attachment",
    initialObjects: [secret(), csiNode()],
    updatedVA: inlineWithSecretRef(vaInline(false), "secret"),
    expectedActions: [getSecret("secret"), ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ secrets: { foo: "bar" }, volumeCapability: MOUNT_SNW })],
  },
  {
    name: "VolumeAttachment with empty secrets -> successful attachment",
    initialObjects: [withSecretRef(pv(), "emptySecret"), emptySecret(), csiNode()],
    updatedVA: va(false),
    expectedActions: [getSecret("emptySecret"), ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ secrets: {} })],
  },
  {
    name: "VolumeAttachment with InlineVolumeSpec and empty secrets -> successful attachment",
    initialObjects: [emptySecret(), csiNode()],
    updatedVA: inlineWithSecretRef(vaInline(false), "emptySecret"),
    expectedActions: [getSecret("emptySecret"), ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ secrets: {}, volumeCapability: MOUNT_SNW })],
  },
  {
    name: "VolumeAttachment with missing secrets -> error",
    initialObjects: [withSecretRef(pv(), "unknownSecret"), csiNode()],
    updatedVA: va(false),
    expectedActions: [getSecret("unknownSecret"), attachError(MISSING_SECRET)],
  },
  {
    name: "VolumeAttachment updated -> PV finalizer is added",
    initialObjects: [pv(null), csiNode()],
    updatedVA: va(false),
    expectedActions: [PV_ADD_FIN, ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish()],
  },
  {
    name: "error saving PV finalizer -> controller retries",
    initialObjects: [pv(null), csiNode()],
    updatedVA: va(false),
    faults: [{ verb: "patch", resource: "persistentvolumes", status: 403 }],
    expectedActions: [
      PV_ADD_FIN,
      // Our server says `persistentvolumes` (plural) like the real one; Go's reactor said
      // `persistentvolume`.
      attachError(
        'could not add PersistentVolume finalizer: persistentvolumes "pv1" is forbidden: Mock error',
      ),
      PV_ADD_FIN,
      ADD_FIN_ANN,
      ATT_CLR,
    ],
    expectedCsiCalls: [publish()],
  },
  {
    name: "already attached volume -> ignored",
    initialObjects: [pv(), csiNode()],
    updatedVA: va(true, FIN, ANN),
    expectedActions: [],
  },
  {
    name: "PV with deletion timestamp -> ignored with error",
    initialObjects: [deleted(pv(null)), csiNode()],
    updatedVA: va(false, FIN, ANN),
    expectedActions: [attachError('PersistentVolume "pv1" is marked for deletion')],
  },
  {
    name: "VolumeAttachment added -> successful attachment incl. metadata",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [
      ADD_FIN_ANN,
      vaStatusPatch({
        status: { attachError: null, attached: true, attachmentMetadata: { foo: "bar" } },
      }),
    ],
    expectedCsiCalls: [publish({}, { respond: { publishContext: { foo: "bar" } } })],
  },
  {
    name: "unknown driver -> ignored",
    initialObjects: [pv(), csiNode()],
    addedVA: vaUnknownDriver(),
    expectedActions: [],
  },
  {
    name: "unknown PV -> error",
    initialObjects: [csiNode()],
    addedVA: va(false, FIN, ANN),
    expectedActions: [attachError(PV_NOT_FOUND)],
  },
  {
    name: "unknown PV -> error + error saving the error",
    initialObjects: [csiNode()],
    addedVA: va(false, FIN, ANN),
    faults: [{ verb: "patch", resource: "volumeattachments", status: 403, times: 2 }],
    expectedActions: [
      attachError(PV_NOT_FOUND),
      attachError(PV_NOT_FOUND),
      attachError(PV_NOT_FOUND),
    ],
  },
  {
    name: "neither PV nor InlineVolumeSpec reference-> error",
    initialObjects: [pv(), csiNode()],
    addedVA: vaNoSource(va(false, FIN, ANN)),
    expectedActions: [
      attachError("neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source"),
    ],
  },
  {
    name: "both PV and InlineVolumeSpec reference-> error",
    initialObjects: [pv(), csiNode()],
    addedVA: vaBothSources(va(false, FIN, ANN)),
    expectedActions: [
      attachError("both InlineCSIVolumeSource and PersistentVolumeName specified in VA source"),
    ],
  },
  {
    name: "unknown node -> error",
    initialObjects: [pv()],
    addedVA: va(false, FIN, ANN),
    // The annotation is not used on attach.
    expectedActions: [attachError(CSINODE_NOT_FOUND)],
  },
  {
    name: "failed write with VA finializers -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    faults: [{ verb: "patch", resource: "volumeattachments", status: 403, times: 2 }],
    expectedActions: [
      ADD_FIN_ANN, // fails
      attachError(`could not save VolumeAttachment: ${VA_FORBIDDEN}: Mock error`), // fails too
      ADD_FIN_ANN,
      ATT,
    ],
    expectedCsiCalls: [publish()],
  },
  {
    name: "failed write with attached=true -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    // The second VA patch (the first status patch) fails.
    faults: [{
      verb: "patch",
      resource: "volumeattachments",
      subresource: "status",
      status: 403,
      message: "mock error",
    }],
    expectedActions: [ADD_FIN_ANN, ATT, ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish(), publish()],
  },
  {
    name: "CSI attach fails -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, attachError(MOCK_ERROR), ADD_FIN_ANN, ATT_CLR],
    expectedCsiCalls: [
      publish({}, { error: { code: UNKNOWN, message: "mock error" } }),
      publish(),
    ],
  },
  {
    name: "CSI attach times out -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, attachError(DEADLINE), ADD_FIN_ANN, ATT_CLR],
    expectedCsiCalls: [publish({}, { delayMs: TIMEOUT_DELAY_MS }), publish()],
    check: (result) => {
      // The timed-out publish may have attached the volume: the finalizer stays and the
      // controller retries until the driver confirms.
      const calls = csiEntries(result, "ControllerPublishVolume");
      assert.deepEqual(calls.map((c) => c.code), [4, undefined]);
      assert.deepEqual(calls.map((c) => c.vaFinalizers), [[[FIN]], [[FIN]]]);
      const states = vaEntries(result);
      assert.ok(states.length > 0 && states.every((s) => s.finalizers.includes(FIN)));
      const stored = result.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "pv1-node1");
      assert.deepEqual(stored.metadata.finalizers, [FIN]);
      assert.equal(stored.status?.attached, true);
    },
  },
  {
    name: "Node without CSINode -> error",
    initialObjects: [pv(), node()],
    addedVA: va(false, FIN, ANN),
    expectedActions: [attachError(CSINODE_NOT_FOUND)],
  },
  {
    name: "CSINode exists without the driver -> error",
    initialObjects: [pv(), csiNodeEmpty()],
    addedVA: va(false, FIN, ANN),
    expectedActions: [attachError("CSINode node1 does not contain driver csi/test")],
  },
  {
    name: "CSINode exists with the driver, Node without annotations -> success",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish()],
  },
  {
    name: "VolumeAttachment with GCEPersistentDiskVolumeSource -> successful attachment",
    initialObjects: [gcePdPv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [
      publish({
        volumeId: GCE_HANDLE,
        volumeContext: { partition: "" },
        volumeCapability: MOUNT_SNW,
      }),
    ],
  },
];

for (const s of scenarios) {
  Deno.test(`CSI handler: ${s.name}`, async () => {
    await runScenario(s);
  });
}

Deno.test("CSI handler error code: CSI attach fails with gRPC error -> controller saves ErrorCode and retries", async () => {
  const message = "rpc error: code = ResourceExhausted desc = mock rpc error";
  await runScenario({
    name: "CSI attach fails with gRPC error -> controller saves ErrorCode and retries",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    handlerOptions: { attachErrorCodes: true },
    expectedActions: [ADD_FIN_ANN, attachError(message, 8), ADD_FIN_ANN, ATT_CLR],
    expectedCsiCalls: [
      publish({}, { error: { code: 8, message: "mock rpc error" } }),
      publish(),
    ],
  });
});

// Not in the Go table: which errors carry a code once codes are on.
const errorCodeScenarios: Scenario[] = [
  {
    name: "driver answers DeadlineExceeded -> errorCode 4",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false, FIN, ANN),
    handlerOptions: { attachErrorCodes: true },
    expectedActions: [attachError("rpc error: code = DeadlineExceeded desc = still attaching", 4)],
    expectedCsiCalls: [publish({}, { error: { code: 4, message: "still attaching" } })],
  },
  {
    name: "error before the driver is called -> no errorCode",
    initialObjects: [withSecretRef(pv(), "unknownSecret"), csiNode()],
    addedVA: va(false, FIN, ANN),
    handlerOptions: { attachErrorCodes: true },
    expectedActions: [getSecret("unknownSecret"), attachError(MISSING_SECRET)],
  },
  {
    name: "detach error -> never an errorCode",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    handlerOptions: { attachErrorCodes: true },
    expectedActions: [
      detachError("rpc error: code = ResourceExhausted desc = mock rpc error"),
    ],
    expectedCsiCalls: [unpublish({}, { error: { code: 8, message: "mock rpc error" } })],
  },
];

for (const s of errorCodeScenarios) {
  Deno.test(`CSI handler error code: ${s.name}`, async () => {
    await runScenario(s);
  });
}

const readOnlyScenarios: Scenario[] = [
  {
    name: "read-write PV -> attached as read-write",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    handlerOptions: { supportsPublishReadOnly: false },
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ readonly: false })],
  },
  {
    name: "read-only PV -> attached as read-write",
    initialObjects: [pvReadOnly(pv()), csiNode()],
    addedVA: va(false),
    handlerOptions: { supportsPublishReadOnly: false },
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish({ readonly: false })],
  },
];

for (const s of readOnlyScenarios) {
  Deno.test(`CSI handler read-only: ${s.name}`, async () => {
    await runScenario(s);
  });
}

/** The objects of a GCE PD driver: its VA, CSINode and finalizer. */
const GCE_DRIVER = "pd.csi.storage.gke.io";
const GCE_FIN = "external-attacher/pd-csi-storage-gke-io";

function gceCsiNode(): CsiNode {
  return with_(csiNode(), (o) => o.spec.drivers = [{ name: GCE_DRIVER, nodeID: "nodeID1" }]);
}

function gceVa(): VolumeAttachment {
  return with_(va(false), (o) => o.spec.attacher = GCE_DRIVER);
}

const GCE_ADD_FIN_ANN = vaMetaPatch({
  metadata: { annotations: { [NODE_ID_ANN]: "nodeID1" }, finalizers: [GCE_FIN] },
});

Deno.test("CSI handler migrated: context has the migrated label for the migratable plugins", async () => {
  await runScenario({
    name: "context has the migrated label for the migratable plugins",
    driverName: GCE_DRIVER,
    initialObjects: [gcePdPv([GCE_FIN]), gceCsiNode()],
    addedVA: gceVa(),
    expectedActions: [GCE_ADD_FIN_ANN, ATT],
    expectedCsiCalls: [
      publish({
        volumeId: GCE_HANDLE,
        volumeContext: { partition: "" },
        volumeCapability: MOUNT_SNW,
      }),
    ],
    check: (result) => {
      const calls = csiEntries(result, "ControllerPublishVolume");
      assert.deepEqual(calls.map((c) => c.options.migrated), [true]);
    },
  });
});

Deno.test("CSI handler migrated: a CSI PV of a migration driver is labelled not migrated", async () => {
  await runScenario({
    name: "CSI PV of a migration driver",
    driverName: GCE_DRIVER,
    initialObjects: [with_(pv([GCE_FIN]), (o) => o.spec.csi!.driver = GCE_DRIVER), gceCsiNode()],
    addedVA: gceVa(),
    expectedActions: [GCE_ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish()],
    check: (result) => {
      const calls = csiEntries(result, "ControllerPublishVolume");
      assert.deepEqual(calls.map((c) => c.options.migrated), [false]);
    },
  });
});
