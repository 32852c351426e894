/**
 * The Go attacher's TestCSIHandler scenarios (external-attacher `pkg/controller/csi_handler_test.go`), by their Go test names, plus
 * TestVolumeAttachmentWithErrorCode, TestCSIHandlerReadOnly and TestMarkAsMigrated (§3.4).
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
import type { ScriptedCall } from "../../testkit/csi/fake_driver.ts";
import type {
  Scenario,
  ScenarioResult,
  TimelineEntry,
} from "../../testkit/harness/scenario_harness.ts";
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
  DET,
  DET_CLR,
  detachError,
  emptySecret,
  FIN,
  gcePdPv,
  getSecret,
  inlineSpec,
  node,
  NODE_ID_ANN,
  pv,
  PV_ADD_FIN,
  pvRemoveFin,
  REMOVE_FIN,
  secret,
  va,
  vaInline,
  vaMetaPatch,
  vaStatusPatch,
  with_,
  withSecretRef,
} from "../../testkit/harness/fixtures.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";

/** Capability of `pv()` (RWX, no fsType: `--default-fstype` ext4). */
const MOUNT_MNMW = { mount: { fsType: "ext4" }, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } };
/** Capability of the inline spec (RWO) and of the GCE PD PV (RWO, ext4). */
const MOUNT_SNW = { mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } };
const GCE_HANDLE = "projects/UNSPECIFIED/zones/testZone/disks/testpd";
const DEADLINE = "rpc error: code = DeadlineExceeded desc = context deadline exceeded";
/** The Go fake's plain `mock error`, as a gRPC driver's plain error arrives (code Unknown). */
const MOCK_ERROR = "rpc error: code = Unknown desc = mock error";
const UNKNOWN = 2;
/** Longer than SCENARIO_TIMEOUT_MS: the call times out (Go: 500 ms against 10 ms). */
const TIMEOUT_DELAY_MS = 2000;

/** A: ControllerPublishVolume(handle1, nodeID1), no attributes, no secrets, read-write. */
function publish(expect: Record<string, unknown> = {}, answer: Partial<ScriptedCall> = {}) {
  return {
    method: "ControllerPublishVolume" as const,
    expect: {
      volumeId: "handle1",
      nodeId: "nodeID1",
      readonly: false,
      secrets: {},
      volumeContext: {},
      volumeCapability: MOUNT_MNMW,
      ...expect,
    },
    ...answer,
  };
}

/** D: ControllerUnpublishVolume(handle1, nodeID1), no secrets. */
function unpublish(expect: Record<string, unknown> = {}, answer: Partial<ScriptedCall> = {}) {
  return {
    method: "ControllerUnpublishVolume" as const,
    expect: { volumeId: "handle1", nodeId: "nodeID1", secrets: {}, ...expect },
    ...answer,
  };
}

function pvReadOnly(obj: PersistentVolume): PersistentVolume {
  return with_(obj, (o) => o.spec.csi!.readOnly = true);
}

function pvWithAttributes(obj: PersistentVolume, attrs: Record<string, string>): PersistentVolume {
  return with_(obj, (o) => o.spec.csi!.volumeAttributes = attrs);
}

function inlineReadOnly(obj: VolumeAttachment): VolumeAttachment {
  return with_(obj, (o) => o.spec.source.inlineVolumeSpec!.csi!.readOnly = true);
}

function inlineWithAttributes(
  obj: VolumeAttachment,
  attrs: Record<string, string>,
): VolumeAttachment {
  return with_(obj, (o) => o.spec.source.inlineVolumeSpec!.csi!.volumeAttributes = attrs);
}

function inlineWithSecretRef(obj: VolumeAttachment, name: string): VolumeAttachment {
  return with_(obj, (o) => {
    o.spec.source.inlineVolumeSpec!.csi!.controllerPublishSecretRef = {
      name,
      namespace: "default",
    };
  });
}

/** `vaWithNoPVReferenceNorInlineVolumeSpec`. */
function vaNoSource(obj: VolumeAttachment): VolumeAttachment {
  return with_(obj, (o) => o.spec.source = {});
}

/** `vaAddInlineSpec`: both a PV name and an inline spec. */
function vaBothSources(obj: VolumeAttachment): VolumeAttachment {
  return with_(obj, (o) => o.spec.source.inlineVolumeSpec = inlineSpec());
}

/** `vaWithInvalidDriver`. */
function vaUnknownDriver(): VolumeAttachment {
  return with_(va(false), (o) => o.spec.attacher = "unknownDriver");
}

const MISSING_SECRET =
  'failed to load secret "default/unknownSecret": secrets "unknownSecret" not found';
const PV_NOT_FOUND = 'persistentvolume "pv1" not found';
const CSINODE_NOT_FOUND = 'csinode.storage.k8s.io "node1" not found';
const VA_FORBIDDEN = 'volumeattachments.storage.k8s.io "pv1-node1" is forbidden';

type CsiEntry = Extract<TimelineEntry, { kind: "csi" }>;
type ApiEntry = Extract<TimelineEntry, { kind: "api" }>;

function csiEntries(result: ScenarioResult, method: CsiEntry["method"]): CsiEntry[] {
  return result.timeline.filter((e): e is CsiEntry => e.kind === "csi" && e.method === method);
}

function vaEntries(result: ScenarioResult): ApiEntry[] {
  return result.timeline.filter((e): e is ApiEntry =>
    e.kind === "api" && e.resource === "volumeattachments"
  );
}

const scenarios: Scenario[] = [
  //
  // ATTACH
  //
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
  //
  // DETACH
  //
  {
    name: "VolumeAttachment marked for deletion -> successful detach",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [REMOVE_FIN, DET],
    expectedCsiCalls: [unpublish()],
  },
  {
    name: "VolumeAttachment with InlineVolumeSpec marked for deletion -> successful detach",
    initialObjects: [csiNode()],
    addedVA: deleted(vaInline(true, FIN, ANN)),
    expectedActions: [REMOVE_FIN, DET],
    expectedCsiCalls: [unpublish()],
  },
  {
    name: "volume with secrets -> successful detach",
    // No CSINode: the node ID comes from the annotation.
    initialObjects: [withSecretRef(pv(), "secret"), secret()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [getSecret("secret"), REMOVE_FIN, DET],
    expectedCsiCalls: [unpublish({ secrets: { foo: "bar" } })],
  },
  {
    name: "volume attachment with InlineVolumeSpec and secrets -> successful detach",
    initialObjects: [secret()],
    addedVA: deleted(inlineWithSecretRef(vaInline(true, FIN, ANN), "secret")),
    expectedActions: [getSecret("secret"), REMOVE_FIN, DET],
    expectedCsiCalls: [unpublish({ secrets: { foo: "bar" } })],
  },
  {
    name: "volume with empty secrets -> successful detach",
    initialObjects: [withSecretRef(pv(), "emptySecret"), emptySecret()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [getSecret("emptySecret"), REMOVE_FIN, DET],
    expectedCsiCalls: [unpublish({ secrets: {} })],
  },
  {
    name: "volume attachment with InlineVolumeSpec and empty secrets -> successful detach",
    initialObjects: [emptySecret()],
    addedVA: deleted(inlineWithSecretRef(vaInline(true, FIN, ANN), "emptySecret")),
    expectedActions: [getSecret("emptySecret"), REMOVE_FIN, DET],
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
    expectedActions: [detachError(MOCK_ERROR), REMOVE_FIN, DET_CLR],
    expectedCsiCalls: [
      unpublish({}, { error: { code: UNKNOWN, message: "mock error" } }),
      unpublish(),
    ],
  },
  {
    name: "CSI detach times out -> controller retries",
    initialObjects: [pv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [detachError(DEADLINE), REMOVE_FIN, DET_CLR],
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
    expectedActions: [REMOVE_FIN, DET],
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
      DET_CLR,
    ],
    expectedCsiCalls: [unpublish(), unpublish()],
  },
  {
    name:
      "VolumeAttachment with GCEPersistentDiskVolumeSource marked for deletion -> successful detach",
    initialObjects: [gcePdPv(), csiNode()],
    addedVA: deleted(va(true, FIN, ANN)),
    expectedActions: [REMOVE_FIN, DET],
    expectedCsiCalls: [unpublish({ volumeId: GCE_HANDLE })],
  },
  //
  // PV finalizers
  //
  {
    name: "VA deleted -> PV finalizer removed",
    initialObjects: [deleted(pv())],
    deletedVA: va(false),
    expectedActions: [pvRemoveFin(0)],
  },
  {
    name: "VA deleted -> PV finalizer removed (GCE PD PV)",
    initialObjects: [deleted(gcePdPv())],
    deletedVA: va(false),
    expectedActions: [pvRemoveFin(0)],
  },
  {
    name: "VA deleted -> PV finalizer not removed",
    initialObjects: [deleted(pv(null))],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "VA deleted -> PV finalizer not removed (GCE PD PV)",
    initialObjects: [deleted(gcePdPv(null))],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "PV updated -> PV finalizer removed",
    updatedPV: deleted(pv()),
    expectedActions: [pvRemoveFin(0)],
  },
  {
    name: "PV finalizer removed -> other finalizers preserved",
    initialObjects: [deleted(pv([FIN, "foo/bar", "bar/baz"]))],
    deletedVA: va(false),
    expectedActions: [pvRemoveFin(0)],
    check: ({ server }) => {
      const stored = server.get<PersistentVolume>("persistentvolumes", "pv1");
      assert.deepEqual(stored.metadata.finalizers, ["foo/bar", "bar/baz"]);
    },
  },
  {
    name: "finalizer removal fails -> controller retries",
    initialObjects: [deleted(pv())],
    deletedVA: va(false),
    faults: [{
      verb: "patch",
      resource: "persistentvolumes",
      status: 403,
      message: "mock error",
      times: 2,
    }],
    expectedActions: [pvRemoveFin(0), pvRemoveFin(0), pvRemoveFin(0)],
  },
  {
    name: "no PV finalizer -> ignored",
    initialObjects: [deleted(pv(null))],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "no deletion timestamp -> ignored",
    initialObjects: [pv(null)],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "VA exists -> ignored",
    initialObjects: [deleted(pv()), va(false)],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "PV created by other CSI drivers or in-tree provisioners -> ignored",
    updatedPV: with_(pv(null), (o) => o.spec.csi!.driver = "dummy"),
    expectedActions: [],
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
