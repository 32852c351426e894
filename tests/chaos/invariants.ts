/**
 * The safety and liveness properties a chaos schedule must keep, as pure functions of the API
 * server's objects, the driver's publications and what the driver acknowledged.
 *
 * 1. The driver has a volume published to a node only while a VolumeAttachment of ours for that
 *    volume and node carries our finalizer (deleted or not).
 * 2. Our VA finalizer is never removed while the driver has that volume published to that node
 *    (checked at the write that removes it).
 * 3. Our PV finalizer is never removed while a VolumeAttachment that may be attached names the
 *    PV (at the write; see {@link checkPersistentVolumeWrite} for why a VA the attacher has not
 *    seen yet does not count).
 * 4. Once faults and user actions stop, every VA reaches its final state: attached with the
 *    driver's publish context when it can be attached, gone (and unpublished) when deleted; no
 *    finalizer of ours stays on a deleted object that nothing needs.
 * 5. `status.attached: true` appears only after the driver acknowledged the publish, and stays
 *    true only while the volume is published (or its detach has been asked of the driver).
 * 6. No secret value appears in the logs or in any VolumeAttachment status.
 * 7. A replica resumed after a pause never finds its lease fence open while another replica's
 *    leader elector leads (checked at the resume, `simulation.ts`: the fence only closes as time
 *    goes on, so that is the one moment two open terms could meet).
 *
 * @module
 */

import type { CapturedLine } from "../../testkit/fakes/fake_logger.ts";
import type { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { errorText } from "../../lib/errors.ts";
import { jsonEqual } from "../../lib/kube/patches.ts";
import { finalizerName, NODE_ID_ANNOTATION } from "../../lib/controller/names.ts";
import type {
  CsiNode,
  CsiPersistentVolumeSource,
  KubeObject,
  PersistentVolume,
  VolumeAttachment,
} from "../../lib/kube/types.ts";
import type { ApiWrite } from "./faulty_kube_api.ts";
import type { CsiAck, CsiCallRecord } from "./faulty_csi_client.ts";
import type { ServerMirror } from "./mirror.ts";

/** One broken invariant. */
export interface Breach {
  /** 1–6 as in the module doc; 0 for a harness-level failure (e.g. an unexpected rejection). */
  invariant: number;
  message: string;
}

/** What the checks look at. */
export interface WorldView {
  /** The API server's objects. */
  server: ServerMirror;
  driver: ExampleDriver;
  /** Our driver name (the VA `spec.attacher`). */
  driverName: string;
  /** Successes the attacher received from the driver, oldest first. */
  acks: readonly CsiAck[];
  /** Publish and unpublish calls the driver received, with their sequence numbers. */
  calls: readonly CsiCallRecord[];
  /** The sequence number at which the VA with this uid was created. */
  createdSeq(uid: string): number | undefined;
}

/** The volume handle a VA stands for, from its PV in the server (undefined when unknown). */
export function volumeHandleOf(server: ServerMirror, va: VolumeAttachment): string | undefined {
  const source = va.spec.source ?? {};
  if (source.inlineVolumeSpec) return source.inlineVolumeSpec.csi?.volumeHandle;
  if (!source.persistentVolumeName) return undefined;
  const pv = server.find<PersistentVolume>("persistentvolumes", source.persistentVolumeName);
  return pv?.spec.csi?.volumeHandle;
}

/** The node ID a VA stands for: its annotation (stored with the finalizer), else its CSINode. */
export function nodeIdOf(
  server: ServerMirror,
  va: VolumeAttachment,
  driverName: string,
): string | undefined {
  const annotated = va.metadata.annotations?.[NODE_ID_ANNOTATION];
  if (annotated !== undefined) return annotated;
  return csiNodeIdOf(server, va.spec.nodeName, driverName);
}

/** The node ID of our driver in a node's CSINode, if any. */
export function csiNodeIdOf(
  server: ServerMirror,
  nodeName: string,
  driverName: string,
): string | undefined {
  const csiNode = server.find<CsiNode>("csinodes", nodeName);
  return (csiNode?.spec.drivers ?? []).find((d) => d.name === driverName)?.nodeID;
}

function hasFinalizer(obj: KubeObject | undefined, finalizer: string): boolean {
  return (obj?.metadata.finalizers ?? []).includes(finalizer);
}

function pairKey(volumeId: string, nodeId: string): string {
  return `${volumeId}\u0000${nodeId}`;
}

/** The last publish the attacher heard succeed for a volume and node. */
function lastPublishAck(view: WorldView, volumeId: string, nodeId: string): CsiAck | undefined {
  for (let i = view.acks.length - 1; i >= 0; i--) {
    const a = view.acks[i]!;
    if (
      a.method === "ControllerPublishVolume" && a.volumeId === volumeId && a.nodeId === nodeId
    ) {
      return a;
    }
  }
  return undefined;
}

/** Our VAs in the server. */
function ourAttachments(view: WorldView): VolumeAttachment[] {
  return view.server.list<VolumeAttachment>("volumeattachments").filter((va) =>
    va.spec.attacher === view.driverName
  );
}

/** Invariant 1: every publication is covered by a VA of ours carrying our finalizer. */
export function checkPublicationsCovered(view: WorldView): Breach[] {
  const finalizer = finalizerName(view.driverName);
  const covered = new Set<string>();
  for (const va of ourAttachments(view)) {
    if (!hasFinalizer(va, finalizer)) continue;
    const volumeId = volumeHandleOf(view.server, va);
    const nodeId = nodeIdOf(view.server, va, view.driverName);
    if (volumeId !== undefined && nodeId !== undefined) covered.add(pairKey(volumeId, nodeId));
  }
  const breaches: Breach[] = [];
  for (const p of view.driver.publications()) {
    if (!covered.has(pairKey(p.volumeId, p.nodeId))) {
      breaches.push({
        invariant: 1,
        message:
          `volume ${p.volumeId} is published to node ${p.nodeId} but no VolumeAttachment with our finalizer covers it`,
      });
    }
  }
  return breaches;
}

/**
 * Invariants 2 and 5 at a VA write, plus: we never write to another attacher's VA. Called with
 * the stored object before and after the write.
 */
export function checkVolumeAttachmentWrite(view: WorldView, w: ApiWrite): Breach[] {
  const before = w.before as VolumeAttachment | undefined;
  const after = w.after as VolumeAttachment | undefined;
  const va = after ?? before;
  if (va === undefined) return [];
  const breaches: Breach[] = [];
  if (va.spec.attacher !== view.driverName) {
    breaches.push({
      invariant: 0,
      message: `${w.client} wrote to VolumeAttachment ${w.name} of attacher ${va.spec.attacher}`,
    });
    return breaches;
  }
  const finalizer = finalizerName(view.driverName);
  const volumeId = volumeHandleOf(view.server, va);
  const nodeId = nodeIdOf(view.server, va, view.driverName);
  if (hasFinalizer(before, finalizer) && !hasFinalizer(after, finalizer)) {
    if (volumeId === undefined || nodeId === undefined) {
      breaches.push({
        invariant: 2,
        message: `VA ${w.name} finalizer removed while its volume or node ID cannot be told`,
      });
    } else if (view.driver.isPublished(volumeId, nodeId)) {
      breaches.push({
        invariant: 2,
        message:
          `VA ${w.name} finalizer removed while volume ${volumeId} is still published to ${nodeId}`,
      });
    }
  }
  const wasAttached = before?.status?.attached === true;
  const isAttached = after?.status?.attached === true;
  const metadataChanged = !jsonEqual(
    before?.status?.attachmentMetadata ?? {},
    after?.status?.attachmentMetadata ?? {},
  );
  if (isAttached && (!wasAttached || metadataChanged)) {
    const created = view.createdSeq(va.metadata.uid ?? "") ?? 0;
    const ack = volumeId !== undefined && nodeId !== undefined
      ? lastPublishAck(view, volumeId, nodeId)
      : undefined;
    if (ack === undefined || ack.seq < created) {
      breaches.push({
        invariant: 5,
        message:
          `VA ${w.name} marked attached without an acknowledged publish of ${volumeId} to ${nodeId}`,
      });
    } else if (!jsonEqual(ack.publishContext ?? {}, after?.status?.attachmentMetadata ?? {})) {
      breaches.push({
        invariant: 5,
        message: `VA ${w.name} attachmentMetadata ${
          JSON.stringify(after?.status?.attachmentMetadata ?? {})
        } differs from the publish context ${JSON.stringify(ack.publishContext ?? {})}`,
      });
    }
  }
  return breaches;
}

/**
 * Invariant 3 at a PV write: our finalizer goes only when no VA that may be attached names the
 * PV, i.e. no VA naming it carries our finalizer (which is stored before any publish and removed
 * only after a successful unpublish).
 *
 * Like the Go attacher, we decide from the informer's cache, so the finalizer can go while a VA
 * the attacher has not seen yet names the PV. That is harmless: the attacher saw the PV marked
 * for deletion before it decided, and refuses to attach to such a PV, so that VA is never
 * published. Those VAs are returned in `unseen` (counted, not a breach); invariant 1 and 4 catch
 * any of them that does get published.
 */
export function checkPersistentVolumeWrite(
  view: WorldView,
  w: ApiWrite,
): { breaches: Breach[]; unseen: string[] } {
  const finalizer = finalizerName(view.driverName);
  if (!hasFinalizer(w.before, finalizer) || hasFinalizer(w.after, finalizer)) {
    return { breaches: [], unseen: [] };
  }
  const users = view.server.list<VolumeAttachment>("volumeattachments")
    .filter((va) => va.spec.source?.persistentVolumeName === w.name);
  const covered = users.filter((va) => hasFinalizer(va, finalizer)).map((va) => va.metadata.name);
  const unseen = users.filter((va) => !hasFinalizer(va, finalizer)).map((va) => va.metadata.name);
  if (covered.length === 0) return { breaches: [], unseen };
  return {
    breaches: [{
      invariant: 3,
      message: `PV ${w.name} finalizer removed by ${w.client} while VolumeAttachment ${
        covered.join(", ")
      } names it and carries our finalizer`,
    }],
    unseen,
  };
}

/**
 * Invariant 5 on the current state: a VA of ours that says attached has its volume published,
 * unless it is being deleted and the driver was already asked to unpublish it.
 */
export function checkAttachedStatus(view: WorldView): Breach[] {
  const breaches: Breach[] = [];
  for (const va of ourAttachments(view)) {
    if (va.status?.attached !== true) continue;
    const volumeId = volumeHandleOf(view.server, va);
    const nodeId = nodeIdOf(view.server, va, view.driverName);
    if (volumeId === undefined || nodeId === undefined) {
      breaches.push({
        invariant: 5,
        message: `VA ${va.metadata.name} is attached but its volume or node cannot be told`,
      });
      continue;
    }
    if (view.driver.isPublished(volumeId, nodeId)) continue;
    const ack = lastPublishAck(view, volumeId, nodeId);
    const unpublishAsked = view.calls.some((c) =>
      c.method === "ControllerUnpublishVolume" && c.volumeId === volumeId &&
      c.nodeId === nodeId && c.seq > (ack?.seq ?? 0)
    );
    if (!(va.metadata.deletionTimestamp && unpublishAsked)) {
      breaches.push({
        invariant: 5,
        message:
          `VA ${va.metadata.name} says attached but ${volumeId} is not published to ${nodeId}`,
      });
    }
  }
  return breaches;
}

/** Why a VA of ours cannot be attached in the current world, or undefined when it can. */
export function attachBlocker(
  view: WorldView,
  va: VolumeAttachment,
  volumes: ReadonlySet<string>,
): string | undefined {
  const source = va.spec.source ?? {};
  const pvName = source.persistentVolumeName;
  let csi: CsiPersistentVolumeSource | null | undefined;
  if (pvName) {
    const pv = view.server.find<PersistentVolume>("persistentvolumes", pvName);
    if (!pv) return `PV ${pvName} missing`;
    if (pv.metadata.deletionTimestamp) return `PV ${pvName} being deleted`;
    csi = pv.spec.csi;
  } else {
    csi = source.inlineVolumeSpec?.csi;
  }
  if (!csi) return "no CSI source";
  const ref = csi.controllerPublishSecretRef;
  if (ref && !view.server.find("secrets", ref.name ?? "", ref.namespace ?? "")) {
    return `secret ${ref.namespace}/${ref.name} missing`;
  }
  if (csiNodeIdOf(view.server, va.spec.nodeName, view.driverName) === undefined) {
    return `CSINode ${va.spec.nodeName} lacks the driver`;
  }
  if (!volumes.has(csi.volumeHandle)) return `volume ${csi.volumeHandle} unknown to the driver`;
  return undefined;
}

/**
 * Invariant 4: what is not yet in its final state (empty when everything is). `volumes` are the
 * volume IDs the driver knows.
 */
export function unconverged(view: WorldView, volumes: ReadonlySet<string>): string[] {
  const finalizer = finalizerName(view.driverName);
  const out: string[] = [];
  const vas = view.server.list<VolumeAttachment>("volumeattachments");
  for (const va of vas) {
    const name = va.metadata.name;
    if (va.spec.attacher !== view.driverName) {
      if (hasFinalizer(va, finalizer)) out.push(`VA ${name} of another attacher has our finalizer`);
      continue;
    }
    if (va.metadata.deletionTimestamp) {
      out.push(`VA ${name} is being deleted but still exists`);
      continue;
    }
    if (attachBlocker(view, va, volumes) !== undefined) continue;
    const volumeId = volumeHandleOf(view.server, va)!;
    const nodeId = csiNodeIdOf(view.server, va.spec.nodeName, view.driverName)!;
    if (va.status?.attached !== true) {
      out.push(`VA ${name} can be attached but is not`);
    } else if (!view.driver.isPublished(volumeId, nodeId)) {
      out.push(`VA ${name} is attached but ${volumeId} is not published to ${nodeId}`);
    } else {
      const ack = lastPublishAck(view, volumeId, nodeId);
      if (!jsonEqual(ack?.publishContext ?? {}, va.status.attachmentMetadata ?? {})) {
        out.push(`VA ${name} attachmentMetadata does not match the publish context`);
      }
    }
  }
  for (const pv of view.server.list<PersistentVolume>("persistentvolumes")) {
    if (!pv.metadata.deletionTimestamp || !hasFinalizer(pv, finalizer)) continue;
    if (vas.some((va) => va.spec.source?.persistentVolumeName === pv.metadata.name)) continue;
    out.push(`PV ${pv.metadata.name} is being deleted, unused, and still has our finalizer`);
  }
  return out;
}

/**
 * Attached VAs of ours that still carry an `attachError`. Not a breach: like the Go attacher we
 * write status patches computed from the informer's (possibly stale) copy, so the patch that
 * marks a VA attached omits `attachError: null` when the cache has not seen the error yet, and a
 * sync started from a stale "not attached" copy can save a new error after the VA was marked
 * attached. Kubernetes reads `attached` first, so the leftover message is only cosmetic.
 */
export function attachedWithError(view: WorldView): string[] {
  return ourAttachments(view)
    .filter((va) => va.status?.attached === true && va.status.attachError)
    .map((va) => va.metadata.name);
}

/**
 * Invariant 6: the secret values found in captured log lines or VA statuses.
 */
export function findSecretLeaks(
  lines: readonly CapturedLine[],
  server: ServerMirror,
  secrets: readonly string[],
): Breach[] {
  const breaches: Breach[] = [];
  const texts: string[] = lines.map((l) =>
    `${l.msg} ${safeJson(l.fields)} ${l.err === undefined ? "" : errorText(l.err)}`
  );
  for (const va of server.list<VolumeAttachment>("volumeattachments")) {
    texts.push(safeJson(va.status ?? {}));
  }
  for (const secret of secrets) {
    const hit = texts.find((t) => t.includes(secret));
    if (hit !== undefined) {
      breaches.push({ invariant: 6, message: `a secret value appears in: ${redact(hit, secret)}` });
    }
  }
  return breaches;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v) => v instanceof Error ? errorText(v) : v) ?? "";
  } catch (err) {
    return `<unserializable: ${errorText(err)}>`;
  }
}

function redact(text: string, secret: string): string {
  return text.split(secret).join("<SECRET>").slice(0, 300);
}
