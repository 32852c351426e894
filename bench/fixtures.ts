/**
 * The objects of a benchmark run: N PersistentVolumes (one per VolumeAttachment), N
 * VolumeAttachments spread round-robin over a fixed set of nodes, one CSINode per node, and one
 * canary (PV + VolumeAttachment) that is attached before the measured phase to time the
 * attacher's start. Every name is derived from an index, so the API server process, the driver
 * process and the benchmark agree on them without exchanging lists.
 *
 * @module
 */

import type { KubeObject, PersistentVolume, VolumeAttachment } from "../lib/kube/types.ts";

/** What the objects of a run are made from. */
export interface FixtureSpec {
  /** Driver name (`spec.attacher` of the VAs, `spec.csi.driver` of the PVs, CSINode entries). */
  driver: string;
  /** Number of measured VolumeAttachments (and PVs). */
  count: number;
  /** Number of nodes (and CSINodes) the VAs are spread over. */
  nodes: number;
  /** Prefix of every object name, so runs against a shared cluster do not collide. */
  prefix: string;
  /**
   * The CSI node ID of every node, for drivers that accept only their own node ID (the CSI mock
   * driver). Default: one ID per node ({@link nodeId}).
   */
  sharedNodeId?: string;
  /**
   * Detach flood: the driver's ControllerUnpublishVolume takes this long (ms), and the
   * {@link FLOOD_PROBE} PV and volume exist for a VA created during the detaches.
   */
  unpublishDelayMs?: number;
  /**
   * `--takeover`: the {@link FLOOD_PROBE} PV and volume exist, for a VA created when the leader
   * is killed.
   */
  takeover?: boolean;
  /**
   * `--pods`: each object is a PV, a PVC bound to it and a Pod on its node, and the attach/detach
   * controller makes the VolumeAttachments (cluster environment only).
   */
  pods?: boolean;
}

/** Whether the {@link FLOOD_PROBE} PV and volume exist in a run of `spec`. */
export function hasProbe(spec: FixtureSpec): boolean {
  return spec.unpublishDelayMs !== undefined || spec.takeover === true;
}

/** The driver's count of ControllerPublishVolume calls for the probe volume (`--takeover`). */
export const PROBE_PUBLISHES = "ControllerPublishVolume of the probe";

/** Index of the canary: it is not one of the `count` measured objects. */
export const CANARY = -1;

/**
 * Index of the detach flood's probe: a VA created once all measured VAs are being deleted, whose
 * attach latency is the figure of the flood scenario. Not one of the `count` measured objects.
 */
export const FLOOD_PROBE = -2;

/** `storage.k8s.io/v1` CSINode, as far as the benchmark fills it. */
export interface CsiNodeObject extends KubeObject {
  spec: { drivers: { name: string; nodeID: string; topologyKeys?: string[] | null }[] };
}

function suffix(index: number): string {
  if (index === CANARY) return "canary";
  if (index === FLOOD_PROBE) return "flood";
  return String(index).padStart(5, "0");
}

/** Name of the volume (CSI volume ID) of object `index`. */
export function volumeId(spec: FixtureSpec, index: number): string {
  return `${spec.prefix}vol-${suffix(index)}`;
}

/** Name of the PersistentVolume of object `index`. */
export function pvName(spec: FixtureSpec, index: number): string {
  return `${spec.prefix}pv-${suffix(index)}`;
}

/** Name of the VolumeAttachment of object `index`. */
export function vaName(spec: FixtureSpec, index: number): string {
  return `${spec.prefix}va-${suffix(index)}`;
}

/** Name of the PersistentVolumeClaim of object `index` (`--pods`). */
export function pvcName(spec: FixtureSpec, index: number): string {
  return `${spec.prefix}pvc-${suffix(index)}`;
}

/** Name of the Pod of object `index` (`--pods`). */
export function podName(spec: FixtureSpec, index: number): string {
  return `${spec.prefix}pod-${suffix(index)}`;
}

/** Name of node `node` (0-based). */
export function nodeName(spec: FixtureSpec, node: number): string {
  return `${spec.prefix}node-${String(node).padStart(3, "0")}`;
}

/** The CSI node ID the CSINode of node `node` reports for the driver. */
export function nodeId(spec: FixtureSpec, node: number): string {
  return spec.sharedNodeId ?? `${spec.prefix}node-id-${String(node).padStart(3, "0")}`;
}

/** The node object `index` is attached to (the canary and the flood probe go to node 0). */
export function nodeOf(spec: FixtureSpec, index: number): number {
  return index < 0 ? 0 : index % spec.nodes;
}

/** The CSINode of node `node`, with the driver registered under {@link nodeId}. */
export function csiNode(spec: FixtureSpec, node: number): CsiNodeObject {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: nodeName(spec, node) },
    spec: { drivers: [{ name: spec.driver, nodeID: nodeId(spec, node), topologyKeys: null }] },
  };
}

/** The PersistentVolume of object `index`: CSI, ReadWriteOnce, no secrets. */
export function persistentVolume(spec: FixtureSpec, index: number): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: pvName(spec, index) },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      persistentVolumeReclaimPolicy: "Retain",
      csi: { driver: spec.driver, volumeHandle: volumeId(spec, index), fsType: "ext4" },
    },
  };
}

/** The VolumeAttachment of object `index`, not yet attached. */
export function volumeAttachment(spec: FixtureSpec, index: number): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: vaName(spec, index) },
    spec: {
      attacher: spec.driver,
      nodeName: nodeName(spec, nodeOf(spec, index)),
      source: { persistentVolumeName: pvName(spec, index) },
    },
    status: { attached: false },
  };
}

/**
 * The index of a measured VolumeAttachment name, {@link CANARY}, {@link FLOOD_PROBE}, or undefined
 * for others.
 */
export function indexOfVa(spec: FixtureSpec, name: string): number | undefined {
  const head = `${spec.prefix}va-`;
  if (!name.startsWith(head)) return undefined;
  const tail = name.slice(head.length);
  if (tail === "canary") return CANARY;
  if (tail === "flood") return FLOOD_PROBE;
  if (!/^\d{5,}$/.test(tail)) return undefined;
  const index = Number(tail);
  return index < spec.count ? index : undefined;
}
