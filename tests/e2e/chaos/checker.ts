/**
 * The cluster chaos run's checker: what the API server recorded (its audit log: the Lease
 * holder after each write, the finalizers of each VolumeAttachment after each of the attacher's
 * writes), what each replica logged before each driver call, what the driver served, and the
 * final state of every VolumeAttachment and volume. It fails on
 *
 * - `outside-term`: a ControllerPublishVolume or ControllerUnpublishVolume served for a replica
 *   outside its term as the server saw it (`lease_terms.ts`), beyond {@link TERM_TOLERANCE_MS};
 * - `unattributed`: such a call no replica logged;
 * - `write-outside-term`: a write of a VolumeAttachment (its object or its status) or of a
 *   PersistentVolume (the attacher writes only their finalizers) that kube-apiserver received
 *   from a replica outside its term, beyond the same tolerance; the replica is the audit record's
 *   user, each replica's own (`replica_users.ts`); Lease writes and Events need no lease. A write
 *   received while the replica's way to the server held or delayed its bytes, by a fault that began
 *   before the term ended, is counted as delivered late by the network instead
 *   ({@link NetworkHold}): the server cannot say when its bytes left, and the fence acts there;
 * - `not-final`: a VolumeAttachment that did not reach its final state (attached, then gone);
 * - `driver-state`: a volume whose final publication differs from its VolumeAttachment
 *   (published with none left, or not published while attached);
 * - `no-finalizer`: a ControllerPublishVolume served while the attacher's last write of the
 *   VolumeAttachment before it had not stored our finalizer (never stored, or already removed).
 *
 * A driver call is judged at the moment the driver received it: the fence governs what a replica
 * sends. A call received inside its term may end after it, at a slow driver, when another replica
 * leads: CSI has no fencing token, so no attacher can take such a call back. Those are counted
 * ({@link LateCompletion}) with what happened to the volume next, and judged by the final state.
 *
 * @module
 */

import type { AuditEvent } from "../cluster.ts";
import { PUBLISH, UNPUBLISH } from "../driver_log.ts";
import { auditTime, type LeaseWrite, type TermVerdict, termVerdict } from "../lease_terms.ts";
import type { AttributedCall } from "../replica_calls.ts";

/**
 * Allowed slack at both ends of a term: the driver's log line of a call and the API server's
 * audit time come from two processes sharing one clock; the driver logs a call after serving it
 * (a few ms on this machine, more under load). A fenced replica stops a margin before its lease
 * could end (ARCHITECTURE.md), which this slack does not eat into.
 */
export const TERM_TOLERANCE_MS = 250;

/** The kinds of violation. */
export type ViolationKind =
  | "outside-term"
  | "unattributed"
  | "write-outside-term"
  | "not-final"
  | "driver-state"
  | "no-finalizer";

/**
 * A time when a replica's way to kube-apiserver held its bytes back (a partition) or delivered them
 * late (a slow API server): bytes sent in `[from, until)` may reach the server up to `until`
 * (+ {@link DELIVERY_SLACK_MS}).
 */
export interface NetworkHold {
  replica: string;
  from: number;
  until: number;
}

/** Time a fault proxy may take to deliver what it held once the hold ends. */
export const DELIVERY_SLACK_MS = 1_000;

/** One broken promise. */
export interface Violation {
  kind: ViolationKind;
  detail: string;
}

/** One VolumeAttachment lifecycle of the workload. */
export interface LifecycleRecord {
  va: string;
  pv: string;
  volumeId: string;
  /** ms since the epoch; undefined when it never happened. */
  attachedAt?: number;
  goneAt?: number;
  /** Why the workload gave up on it, if it did. */
  error?: string;
}

/** The attacher's write of a VolumeAttachment: when the server answered, what it stored. */
export interface VaWrite {
  va: string;
  answered: number;
  finalizers: string[];
}

/**
 * A request of a replica that needs its lease: a create, update, patch or delete of a
 * VolumeAttachment (any subresource) or a PersistentVolume, whatever the server answered (the
 * bytes were sent).
 */
export interface ApiWrite {
  replica: string;
  verb: string;
  /** `volumeattachments`, `volumeattachments/status`, `persistentvolumes`. */
  resource: string;
  name: string;
  /** When kube-apiserver received it (ms since the epoch). */
  received: number;
  code: number;
}

/** What the checker counted of one replica's {@link ApiWrite}s. */
export interface WriteFigures {
  checked: number;
  outside: number;
  /**
   * Received outside the term while a {@link NetworkHold} that began inside it held the replica's
   * bytes: sent when the term may still have run, delivered late.
   */
  heldByNetwork: number;
  /** The latest write outside the term, ms past its end (0 for a replica that never led). */
  latestMs: number;
}

/** Everything the checker reads. */
export interface ChaosRecord {
  leaseWrites: readonly LeaseWrite[];
  /** Acting calls the driver served, attributed (`replica_calls.ts`); identities as in the Lease. */
  calls: readonly AttributedCall[];
  lifecycles: readonly LifecycleRecord[];
  vaWrites: readonly VaWrite[];
  /** Every write of a replica that needs its lease ({@link apiWrites}). */
  apiWrites: readonly ApiWrite[];
  /** When each replica's way to the server held or delayed bytes (default none). */
  networkHolds?: readonly NetworkHold[];
  /** At the end: VolumeAttachments that still exist, by name, and whether attached. */
  finalVas: ReadonlyMap<string, boolean>;
  /** At the end: the volumes the driver has published. */
  finalPublished: ReadonlySet<string>;
  finalizer: string;
}

/**
 * A driver call received inside its caller's term that ended after the term: it was still running
 * at the driver when another replica could lead.
 */
export interface LateCompletion {
  replica: string;
  method: string;
  volumeId: string;
  /** How long after the term's end the call ended, ms. */
  pastEndMs: number;
  /** The next acting call served for the same volume, in words; undefined: none. */
  next?: string;
}

/** What the checker measured besides the violations. */
export interface CheckFigures {
  publishes: number;
  unpublishes: number;
  /** Served acting calls per replica. */
  byReplica: Map<string, number>;
  /** The smallest distance (ms) of a call inside a term to that term's end. */
  closestToEndMs: number | undefined;
  /** Calls outside the caller's term, per replica, and the latest (ms past the term's end). */
  outside: Map<string, { calls: number; latestMs: number }>;
  /** {@link ApiWrite}s per replica. */
  writes: Map<string, WriteFigures>;
  lateCompletions: LateCompletion[];
}

const LEASED_RESOURCES = new Set(["volumeattachments", "persistentvolumes"]);
const WRITE_VERBS = new Set(["create", "update", "patch", "delete", "deletecollection"]);

/**
 * The writes that need a lease, from the audit log, attributed by `replicaOf` (audit user name →
 * replica); requests of other users are left out. Oldest first, by the time received.
 */
export function apiWrites(
  events: readonly AuditEvent[],
  replicaOf: ReadonlyMap<string, string>,
): ApiWrite[] {
  const out: ApiWrite[] = [];
  for (const e of events) {
    if (e.stage !== "ResponseComplete" || !WRITE_VERBS.has(e.verb)) continue;
    const resource = e.objectRef?.resource ?? "";
    if (!LEASED_RESOURCES.has(resource)) continue;
    const replica = replicaOf.get(e.user.username);
    if (replica === undefined) continue;
    const sub = e.objectRef?.subresource ?? "";
    out.push({
      replica,
      verb: e.verb,
      resource: sub === "" ? resource : `${resource}/${sub}`,
      name: e.objectRef?.name ?? "",
      received: auditTime(e.requestReceivedTimestamp),
      code: e.responseStatus?.code ?? 0,
    });
  }
  return out.sort((a, b) => a.received - b.received);
}

/** Why a moment lies outside a term, in words. */
function outsideWhy(verdict: Exclude<TermVerdict, { inside: true }>): string {
  return verdict.why === "never-held"
    ? "it never held the Lease before"
    : verdict.why === "taken"
    ? `${verdict.by} had taken the Lease ${(verdict.lateMs / 1000).toFixed(2)} s before`
    : `its lease had run out ${(verdict.lateMs / 1000).toFixed(2)} s before`;
}

/** The successful writes of VolumeAttachments (not their status) by the attacher, from the audit. */
export function vaWrites(events: readonly AuditEvent[]): VaWrite[] {
  const out: VaWrite[] = [];
  for (const e of events) {
    if (e.stage !== "ResponseComplete" || e.objectRef?.resource !== "volumeattachments") continue;
    if ((e.objectRef.subresource ?? "") !== "") continue;
    const code = e.responseStatus?.code ?? 0;
    if (code < 200 || code >= 300) continue;
    const obj = e.responseObject as { metadata?: { name?: string; finalizers?: string[] } };
    if (obj?.metadata === undefined) continue;
    out.push({
      va: obj.metadata.name ?? e.objectRef.name ?? "",
      answered: auditTime(e.stageTimestamp),
      finalizers: obj.metadata.finalizers ?? [],
    });
  }
  return out.sort((a, b) => a.answered - b.answered);
}

/** `1.50 s after` or `0.20 s before`. */
function relative(ms: number): string {
  return `${(Math.abs(ms) / 1000).toFixed(2)} s ${ms < 0 ? "before" : "after"}`;
}

/** Checks a run; violations in the order of the list above. */
export function checkChaos(
  record: ChaosRecord,
): { violations: Violation[]; figures: CheckFigures } {
  const violations: Violation[] = [];
  const at = (t: number) => new Date(t).toISOString().slice(11, 23);
  const figures: CheckFigures = {
    publishes: 0,
    unpublishes: 0,
    byReplica: new Map(),
    closestToEndMs: undefined,
    outside: new Map(),
    writes: new Map(),
    lateCompletions: [],
  };
  const short = (method: string) => method.slice(method.lastIndexOf("/") + 1);
  for (const { served, logged } of record.calls) {
    const what = `${short(served.method)} of volume ` +
      `${served.request.volume_id} served at ${at(served.time)}`;
    if (served.method === PUBLISH) figures.publishes++;
    if (served.method === UNPUBLISH) figures.unpublishes++;
    if (logged === undefined) {
      violations.push({ kind: "unattributed", detail: `${what}: no replica logged it` });
      continue;
    }
    figures.byReplica.set(logged.replica, (figures.byReplica.get(logged.replica) ?? 0) + 1);
    const verdict = termVerdict(record.leaseWrites, logged.replica, served.time, TERM_TOLERANCE_MS);
    if (verdict.inside) {
      const last = [...record.leaseWrites].reverse().find((w) =>
        w.holder === logged.replica && w.answered <= served.time + TERM_TOLERANCE_MS
      );
      if (last !== undefined) {
        const left = last.received + last.leaseDurationMs - served.time;
        figures.closestToEndMs = Math.min(figures.closestToEndMs ?? Infinity, left);
      }
      const ended = termVerdict(record.leaseWrites, logged.replica, served.completed, 0);
      if (!ended.inside) {
        const volumeId = String(served.request.volume_id ?? "");
        const next = record.calls.find((c) =>
          c.served.time > served.time && String(c.served.request.volume_id ?? "") === volumeId
        );
        figures.lateCompletions.push({
          replica: logged.replica,
          method: served.method,
          volumeId,
          pastEndMs: ended.why === "never-held" ? 0 : Math.round(ended.lateMs),
          next: next === undefined
            ? undefined
            : `${short(next.served.method)} for ${next.logged?.replica ?? "nobody"} received ${
              relative(next.served.time - served.completed)
            } it ended` +
              (next.served.error === "" ? "" : ` (${next.served.error})`),
        });
      }
      continue;
    }
    const late = verdict.why === "never-held" ? 0 : verdict.lateMs;
    const seen = figures.outside.get(logged.replica) ?? { calls: 0, latestMs: 0 };
    figures.outside.set(logged.replica, {
      calls: seen.calls + 1,
      latestMs: Math.max(seen.latestMs, late),
    });
    violations.push({
      kind: "outside-term",
      detail: `${what} for ${logged.replica} (logged ${at(logged.time)}): ${outsideWhy(verdict)}`,
    });
  }

  for (const w of record.apiWrites) {
    const seen = figures.writes.get(w.replica) ??
      { checked: 0, outside: 0, heldByNetwork: 0, latestMs: 0 };
    figures.writes.set(w.replica, seen);
    seen.checked++;
    const verdict = termVerdict(record.leaseWrites, w.replica, w.received, TERM_TOLERANCE_MS);
    if (verdict.inside) continue;
    if (verdict.why !== "never-held") {
      const termEnd = w.received - verdict.lateMs;
      const held = (record.networkHolds ?? []).some((h) =>
        h.replica === w.replica && h.from <= termEnd + TERM_TOLERANCE_MS &&
        w.received >= h.from && w.received <= h.until + DELIVERY_SLACK_MS
      );
      if (held) {
        seen.heldByNetwork++;
        continue;
      }
    }
    seen.outside++;
    seen.latestMs = Math.max(seen.latestMs, verdict.why === "never-held" ? 0 : verdict.lateMs);
    violations.push({
      kind: "write-outside-term",
      detail: `${w.verb} of ${w.resource} ${w.name} (answered ${w.code}) received at ` +
        `${at(w.received)} from ${w.replica}: ${outsideWhy(verdict)}`,
    });
  }

  const lifecycleOf = new Map(record.lifecycles.map((l) => [l.volumeId, l]));
  for (const l of record.lifecycles) {
    if (l.attachedAt === undefined || l.goneAt === undefined) {
      const state = l.attachedAt === undefined ? "never attached" : "attached, never gone";
      violations.push({
        kind: "not-final",
        detail: `${l.va}: ${state}${l.error ? ` (${l.error})` : ""}`,
      });
    }
  }
  for (const l of record.lifecycles) {
    const exists = record.finalVas.has(l.va);
    const published = record.finalPublished.has(l.volumeId);
    if (!exists && published) {
      violations.push({
        kind: "driver-state",
        detail: `volume ${l.volumeId} is published, its VolumeAttachment ${l.va} is gone`,
      });
    } else if (exists && record.finalVas.get(l.va) === true && !published) {
      violations.push({
        kind: "driver-state",
        detail: `volume ${l.volumeId} is not published, its VolumeAttachment ${l.va} is attached`,
      });
    }
  }

  const writesOf = new Map<string, VaWrite[]>();
  for (const w of record.vaWrites) writesOf.set(w.va, [...(writesOf.get(w.va) ?? []), w]);
  for (const { served } of record.calls) {
    if (served.method !== PUBLISH) continue;
    const l = lifecycleOf.get(String(served.request.volume_id ?? ""));
    if (l === undefined) continue;
    const before = (writesOf.get(l.va) ?? []).filter((w) => w.answered <= served.time + 1);
    const last = before[before.length - 1];
    if (last === undefined || !last.finalizers.includes(record.finalizer)) {
      violations.push({
        kind: "no-finalizer",
        detail: `ControllerPublishVolume of ${l.volumeId} for ${l.va} served at ` +
          `${at(served.time)}: ${
            last === undefined ? "no write of ours stored before" : "our finalizer removed before"
          }`,
      });
    }
  }
  return { violations, figures };
}
