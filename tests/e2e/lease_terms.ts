/**
 * The leader-election Lease as the API server stored it, read from its audit log: every
 * successful create or update of the Lease with the holder it wrote, and whether a moment lies
 * inside a replica's term.
 *
 * A replica's term, as the server saw it: from the answer to a write that made it the holder
 * until `leaseDuration` after the server *received* its last such write (the start of the
 * request is the earliest moment the replica can measure from; another replica may take the
 * Lease once it has seen the record unchanged for `leaseDuration`, so no later moment is safe),
 * and never past a write by another holder. client-go's `LeaderElector` and ours judge the same
 * record (k8s.io/client-go/tools/leaderelection/leaderelection.go, `tryAcquireOrRenew`).
 *
 * @module
 */

import type { AuditEvent } from "./cluster.ts";

/** One successful write of the Lease. */
export interface LeaseWrite {
  /** When the server received the request (ms since the epoch). */
  received: number;
  /** When it answered (ms since the epoch). */
  answered: number;
  /** `spec.holderIdentity` after the write ("" once released). */
  holder: string;
  /** `spec.leaseDurationSeconds` in ms. */
  leaseDurationMs: number;
  verb: string;
}

interface LeaseObject {
  metadata?: { name?: string };
  spec?: { holderIdentity?: string | null; leaseDurationSeconds?: number | null };
}

/** RFC 3339 with microseconds → ms since the epoch (fractional). */
export function auditTime(text: string | undefined): number {
  if (text === undefined) return Number.NaN;
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(text);
  if (m === null) return Date.parse(text);
  const frac = Number(`0.${m[2] ?? "0"}`);
  return Date.parse(`${m[1]}Z`) + frac * 1000;
}

/** The successful writes of the Lease `name`, oldest answer first. */
export function leaseWrites(events: readonly AuditEvent[], name: string): LeaseWrite[] {
  const out: LeaseWrite[] = [];
  for (const e of events) {
    if (e.stage !== "ResponseComplete" || e.objectRef?.resource !== "leases") continue;
    if (e.objectRef.subresource !== undefined && e.objectRef.subresource !== "") continue;
    if (e.verb !== "create" && e.verb !== "update" && e.verb !== "patch") continue;
    const code = e.responseStatus?.code ?? 0;
    if (code < 200 || code >= 300) continue;
    const lease = e.responseObject as LeaseObject | undefined;
    if ((e.objectRef.name ?? lease?.metadata?.name) !== name) continue;
    out.push({
      received: auditTime(e.requestReceivedTimestamp),
      answered: auditTime(e.stageTimestamp),
      holder: lease?.spec?.holderIdentity ?? "",
      leaseDurationMs: (lease?.spec?.leaseDurationSeconds ?? 0) * 1000,
      verb: e.verb,
    });
  }
  return out.sort((a, b) => a.answered - b.answered);
}

/** Where a moment lies relative to a replica's term. */
export type TermVerdict =
  | { inside: true }
  /** Before any write made it the holder. */
  | { inside: false; why: "never-held" }
  /** After its last write's lease ran out: `lateMs` past the end. */
  | { inside: false; why: "expired"; lateMs: number; lastWrite: LeaseWrite }
  /** After another holder's write (`by`), `lateMs` after it. */
  | { inside: false; why: "taken"; lateMs: number; by: string; lastWrite: LeaseWrite };

/**
 * Whether `time` lies inside a term of `identity`, with `toleranceMs` allowed at both ends
 * (timestamps come from different processes' logs).
 */
export function termVerdict(
  writes: readonly LeaseWrite[],
  identity: string,
  time: number,
  toleranceMs: number,
): TermVerdict {
  let last: LeaseWrite | undefined;
  for (const w of writes) {
    if (w.answered > time + toleranceMs) break;
    if (w.holder === identity) last = w;
  }
  if (last === undefined) return { inside: false, why: "never-held" };
  const other = writes.find((w) =>
    w.answered > last!.answered && w.answered < time - toleranceMs && w.holder !== identity
  );
  if (other !== undefined) {
    return {
      inside: false,
      why: "taken",
      lateMs: time - other.answered,
      by: other.holder,
      lastWrite: last,
    };
  }
  const end = last.received + last.leaseDurationMs;
  if (time > end + toleranceMs) {
    return { inside: false, why: "expired", lateMs: time - end, lastWrite: last };
  }
  return { inside: true };
}

/** The holder changes: who took the Lease when (the first write of each new holder). */
export function holderChanges(writes: readonly LeaseWrite[]): { at: number; holder: string }[] {
  const out: { at: number; holder: string }[] = [];
  for (const w of writes) {
    if (out.length === 0 || out[out.length - 1]!.holder !== w.holder) {
      out.push({ at: w.answered, holder: w.holder });
    }
  }
  return out;
}
