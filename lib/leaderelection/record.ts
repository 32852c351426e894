/**
 * client-go's `resourcelock.LeaderElectionRecord` and its mapping to and from a Lease's spec
 * (client-go `tools/leaderelection/resourcelock/leaselock.go`, `LeaseSpecToLeaderElectionRecord`
 * and `LeaderElectionRecordToLeaseSpec`).
 *
 * @module
 */

import type { Lease } from "../kube/types.ts";

/** client-go's `resourcelock.LeaderElectionRecord`, the part of a Lease the election uses. */
export interface LeaderElectionRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  /** MicroTime text, kept as received: it is carried over, never compared. */
  acquireTime: string | null;
  renewTime: string | null;
  leaderTransitions: number;
}

/** The record of a Lease nobody has written. */
export const EMPTY_RECORD: LeaderElectionRecord = Object.freeze({
  holderIdentity: "",
  leaseDurationSeconds: 0,
  acquireTime: null,
  renewTime: null,
  leaderTransitions: 0,
});

/** The election record of `lease`; missing fields read as client-go reads them (zero). */
export function recordOf(lease: Lease): LeaderElectionRecord {
  const spec = lease.spec ?? {};
  return {
    holderIdentity: spec.holderIdentity ?? "",
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: spec.acquireTime ?? null,
    renewTime: spec.renewTime ?? null,
    leaderTransitions: spec.leaseTransitions ?? 0,
  };
}

export function specOf(record: LeaderElectionRecord): Lease["spec"] {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    acquireTime: record.acquireTime,
    renewTime: record.renewTime,
    leaseTransitions: record.leaderTransitions,
  };
}
