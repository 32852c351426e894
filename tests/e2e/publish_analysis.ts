/**
 * Why a volume was published more than once: each repeated ControllerPublishVolume of a
 * VolumeAttachment is explained from what the attacher logged about that VolumeAttachment
 * between the previous call and this one.
 *
 * @module
 */

import { type AttacherLogLine, parseAttacherLog } from "./kit.ts";

/** The explanation of one repeated publish. */
export type RepublishCause =
  /**
   * The previous publish was made by another replica, or by an earlier process of the same one
   * (leader hand-over).
   */
  | "hand-over"
  /** The previous attempt published, then failed to write `status.attached` (retry, as in Go). */
  | "status-write-failed"
  /** The ListVolumes reconciler forced a sync (`forceSync`) while the attach was in flight. */
  | "reconcile-forced"
  /**
   * The VolumeAttachment was synced again right after it was marked attached, from a cache that
   * did not have the status write yet (the re-queue caused by the attacher's own metadata patch).
   */
  | "stale-cache"
  /** The previous attempt failed otherwise and was retried. */
  | "retry-after-error"
  | "unexplained";

/** Every {@link RepublishCause}. */
export const REPUBLISH_CAUSES: readonly RepublishCause[] = [
  "hand-over",
  "status-write-failed",
  "reconcile-forced",
  "stale-cache",
  "retry-after-error",
  "unexplained",
];

/** One repeated publish. */
export interface Republish {
  volumeAttachment: string;
  volumeHandle: string;
  cause: RepublishCause;
  /** Time of the repeated call (ms since the epoch). */
  time: number;
}

/** One attacher replica's log. */
export interface ReplicaLog {
  replica: string;
  text: string;
}

interface Entry extends AttacherLogLine {
  replica: string;
  fields: Record<string, string>;
  publish: boolean;
}

const FIELD = /(\w+)=("(?:[^"\\]|\\.)*"|\S+)/g;

/** The `key=value` fields of a klog text line's rest (quoted values unquoted). */
export function fieldsOf(rest: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of rest.matchAll(FIELD)) {
    const raw = m[2]!;
    out[m[1]!] = raw.startsWith('"') ? JSON.parse(raw) as string : raw;
  }
  // The Go csi-attacher's spelling, so its logs can be compared.
  if (out.volumeAttachment === undefined && out.VolumeAttachment !== undefined) {
    out.volumeAttachment = out.VolumeAttachment;
  }
  return out;
}

/** Our attacher logs "Calling ControllerPublishVolume"; the Go one only the gRPC call. */
function isPublishCall(line: AttacherLogLine, fields: Record<string, string>): boolean {
  if (line.msg === "Calling ControllerPublishVolume") return true;
  return line.msg === "GRPC call" &&
    fields.method === "/csi.v1.Controller/ControllerPublishVolume" &&
    fields.VolumeAttachment !== undefined;
}

function goVolumeId(fields: Record<string, string>): string {
  try {
    return String((JSON.parse(fields.request ?? "{}") as { volume_id?: string }).volume_id ?? "");
  } catch (err) {
    if (err instanceof SyntaxError) return "";
    throw err;
  }
}

function causeBetween(between: Entry[]): RepublishCause {
  const failed = between.filter((e) => e.msg === "Error processing VolumeAttachment, will retry");
  if (failed.some((e) => (e.fields.err ?? "").startsWith("failed to mark as attached"))) {
    return "status-write-failed";
  }
  if (between.some((e) => e.msg.startsWith("Driver's published state differs"))) {
    return "reconcile-forced";
  }
  if (between.some((e) => e.msg === "Fully attached")) return "stale-cache";
  if (failed.length > 0) return "retry-after-error";
  return "unexplained";
}

/**
 * Every ControllerPublishVolume call after the first one per VolumeAttachment (optionally only
 * those whose name starts with `prefix`), with its cause.
 */
export function findRepublishes(logs: readonly ReplicaLog[], prefix = ""): Republish[] {
  const entries: Entry[] = [];
  for (const log of logs) {
    for (const line of parseAttacherLog(log.text)) {
      const fields = fieldsOf(line.rest);
      const va = fields.volumeAttachment;
      if (va === undefined || !va.startsWith(prefix)) continue;
      const publish = isPublishCall(line, fields);
      if (publish && fields.volumeHandle === undefined) fields.volumeHandle = goVolumeId(fields);
      // A restarted replica is a new process: what its predecessor did is a hand-over.
      entries.push({ ...line, replica: `${log.replica}/${line.pid}`, fields, publish });
    }
  }
  entries.sort((a, b) => a.time - b.time);
  const byVa = new Map<string, Entry[]>();
  for (const e of entries) {
    const list = byVa.get(e.fields.volumeAttachment!) ?? [];
    list.push(e);
    byVa.set(e.fields.volumeAttachment!, list);
  }
  const out: Republish[] = [];
  for (const [va, list] of byVa) {
    let previous: Entry | undefined;
    let since = 0;
    list.forEach((e, i) => {
      if (!e.publish) return;
      if (previous !== undefined) {
        const between = list.slice(since, i).filter((x) => x.replica === e.replica);
        out.push({
          volumeAttachment: va,
          volumeHandle: e.fields.volumeHandle ?? "",
          cause: previous.replica !== e.replica ? "hand-over" : causeBetween(between),
          time: e.time,
        });
      }
      previous = e;
      since = i + 1;
    });
  }
  return out;
}

/**
 * How many ControllerUnpublishVolume calls came after the first one of the same VolumeAttachment
 * (optionally only those whose name starts with `prefix`), over all replicas; failed calls that
 * were retried count too.
 */
export function countRepeatedUnpublishes(logs: readonly ReplicaLog[], prefix = ""): number {
  const calls = new Map<string, number>();
  for (const log of logs) {
    for (const line of parseAttacherLog(log.text)) {
      if (line.msg !== "Calling ControllerUnpublishVolume") continue;
      const va = fieldsOf(line.rest).volumeAttachment;
      if (va === undefined || !va.startsWith(prefix)) continue;
      calls.set(va, (calls.get(va) ?? 0) + 1);
    }
  }
  let repeated = 0;
  for (const n of calls.values()) repeated += n - 1;
  return repeated;
}

/** `cause: va (volume), …` lines for messages. */
export function describeRepublishes(list: readonly Republish[]): string[] {
  return list.map((r) => `${r.cause}: ${r.volumeAttachment} (volume ${r.volumeHandle})`);
}

/** How many repeated publishes each volume handle had. */
export function republishesByVolume(list: readonly Republish[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of list) out.set(r.volumeHandle, (out.get(r.volumeHandle) ?? 0) + 1);
  return out;
}
