/**
 * Fixtures of the CSI handler's scenarios in the Go attacher's table (external-attacher
 * `pkg/controller/csi_handler_test.go`): the driver calls A and D with their defaults, the
 * capabilities, the error texts as our real fakes word them, and the PV and VA variants.
 *
 * @module
 */

import type { ScriptedCall } from "../csi/fake_driver.ts";
import type { ScenarioResult, TimelineEntry } from "./scenario_harness.ts";
import { inlineSpec, va, with_ } from "./fixtures.ts";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";

/** Capability of `pv()` (RWX, no fsType: `--default-fstype` ext4). */
export const MOUNT_MNMW = {
  mount: { fsType: "ext4" },
  accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
};
/** Capability of the inline spec (RWO) and of the GCE PD PV (RWO, ext4). */
export const MOUNT_SNW = { mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } };
export const GCE_HANDLE = "projects/UNSPECIFIED/zones/testZone/disks/testpd";
export const DEADLINE = "rpc error: code = DeadlineExceeded desc = context deadline exceeded";
/** The Go fake's plain `mock error`, as a gRPC driver's plain error arrives (code Unknown). */
export const MOCK_ERROR = "rpc error: code = Unknown desc = mock error";
export const UNKNOWN = 2;
/** Longer than SCENARIO_TIMEOUT_MS: the call times out (Go: 500 ms against 10 ms). */
export const TIMEOUT_DELAY_MS = 2000;

/** A: ControllerPublishVolume(handle1, nodeID1), no attributes, no secrets, read-write. */
export function publish(expect: Record<string, unknown> = {}, answer: Partial<ScriptedCall> = {}) {
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
export function unpublish(
  expect: Record<string, unknown> = {},
  answer: Partial<ScriptedCall> = {},
) {
  return {
    method: "ControllerUnpublishVolume" as const,
    expect: { volumeId: "handle1", nodeId: "nodeID1", secrets: {}, ...expect },
    ...answer,
  };
}

export function pvReadOnly(obj: PersistentVolume): PersistentVolume {
  return with_(obj, (o) => o.spec.csi!.readOnly = true);
}

export function pvWithAttributes(
  obj: PersistentVolume,
  attrs: Record<string, string>,
): PersistentVolume {
  return with_(obj, (o) => o.spec.csi!.volumeAttributes = attrs);
}

export function inlineReadOnly(obj: VolumeAttachment): VolumeAttachment {
  return with_(obj, (o) => o.spec.source.inlineVolumeSpec!.csi!.readOnly = true);
}

export function inlineWithAttributes(
  obj: VolumeAttachment,
  attrs: Record<string, string>,
): VolumeAttachment {
  return with_(obj, (o) => o.spec.source.inlineVolumeSpec!.csi!.volumeAttributes = attrs);
}

export function inlineWithSecretRef(obj: VolumeAttachment, name: string): VolumeAttachment {
  return with_(obj, (o) => {
    o.spec.source.inlineVolumeSpec!.csi!.controllerPublishSecretRef = {
      name,
      namespace: "default",
    };
  });
}

/** `vaWithNoPVReferenceNorInlineVolumeSpec`. */
export function vaNoSource(obj: VolumeAttachment): VolumeAttachment {
  return with_(obj, (o) => o.spec.source = {});
}

/** `vaAddInlineSpec`: both a PV name and an inline spec. */
export function vaBothSources(obj: VolumeAttachment): VolumeAttachment {
  return with_(obj, (o) => o.spec.source.inlineVolumeSpec = inlineSpec());
}

/** `vaWithInvalidDriver`. */
export function vaUnknownDriver(): VolumeAttachment {
  return with_(va(false), (o) => o.spec.attacher = "unknownDriver");
}

export const MISSING_SECRET =
  'failed to load secret "default/unknownSecret": secrets "unknownSecret" not found';
export const PV_NOT_FOUND = 'persistentvolume "pv1" not found';
export const CSINODE_NOT_FOUND = 'csinode.storage.k8s.io "node1" not found';
export const VA_FORBIDDEN = 'volumeattachments.storage.k8s.io "pv1-node1" is forbidden';

export type CsiEntry = Extract<TimelineEntry, { kind: "csi" }>;
export type ApiEntry = Extract<TimelineEntry, { kind: "api" }>;

export function csiEntries(result: ScenarioResult, method: CsiEntry["method"]): CsiEntry[] {
  return result.timeline.filter((e): e is CsiEntry => e.kind === "csi" && e.method === method);
}

export function vaEntries(result: ScenarioResult): ApiEntry[] {
  return result.timeline.filter((e): e is ApiEntry =>
    e.kind === "api" && e.resource === "volumeattachments"
  );
}
