/**
 * One attempt to acquire or renew the Lease, client-go's `tryAcquireOrRenew`
 * (`tools/leaderelection/leaderelection.go`), and the release of the Lease: what one request
 * round against the lock does, apart from the elector's loops, terms and fences
 * (`./elector.ts`). It reads and writes through the {@link LeaseLock} and keeps the
 * {@link ObservedRecord} current; a successful write naming this replica is reported with the
 * time its request started, which is what moves the term's fence.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { isNotFound } from "../kube/api.ts";
import { formatMicroTime } from "../kube/time.ts";
import type { Logger } from "../observe/logger.ts";
import type { LeaseLock } from "./lease_lock.ts";
import type { ObservedRecord } from "./observed_record.ts";
import type { LeaderElectionRecord } from "./record.ts";

/** How one acquire or renew attempt ended; `held`: another replica holds a valid lease. */
export type AttemptOutcome = "ok" | "failed" | "held";

/** A request's signal and the means to drop its timer and links. */
export interface RequestSignal {
  signal: AbortSignal;
  done(): void;
}

/** Collaborators of {@link LeaseAttempts}, shared with the elector. */
export interface LeaseAttemptsDeps {
  lock: LeaseLock;
  observed: ObservedRecord;
  clock: Clock;
  log: Logger;
  /** `leader_election_slowpath_total{name}`: a renewal that had to re-read the Lease. */
  slowpathExercised?: () => void;
  /** A write naming this replica, whose request started at `startedAt`, succeeded. */
  wrote(startedAt: number): void;
}

/** The attempts of one replica on one Lease; see the module doc. */
export class LeaseAttempts {
  readonly #lock: LeaseLock;
  readonly #observed: ObservedRecord;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #slowpathExercised: (() => void) | undefined;
  readonly #wrote: (startedAt: number) => void;
  readonly #identity: string;
  readonly #leaseDurationMs: number;

  constructor(deps: LeaseAttemptsDeps, opts: { identity: string; leaseDurationMs: number }) {
    this.#lock = deps.lock;
    this.#observed = deps.observed;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#slowpathExercised = deps.slowpathExercised;
    this.#wrote = deps.wrote;
    this.#identity = opts.identity;
    this.#leaseDurationMs = opts.leaseDurationMs;
  }

  /** True when the last record this replica saw or wrote names it as the holder. */
  isLeader(): boolean {
    return this.#observed.record.holderIdentity === this.#identity;
  }

  /** The lease duration written into the Lease, in whole seconds (what other replicas count). */
  writtenSeconds(): number {
    return Math.floor(this.#leaseDurationMs / 1000);
  }

  /**
   * One attempt to acquire or renew, client-go's `tryAcquireOrRenew`: "ok" when this replica
   * holds the lease afterwards, "held" when another replica's lease is valid, "failed"
   * otherwise. Never throws: failures are logged. A successful write moves the fence.
   */
  async tryAcquireOrRenew(signal: AbortSignal): Promise<AttemptOutcome> {
    // The lease's validity is judged on the monotonic clock, from our own observations (as
    // client-go does); the times written into the Lease are wall time.
    const now = this.#clock.now();
    const nowText = formatMicroTime(this.#clock.wallNow());
    const desired: LeaderElectionRecord = {
      holderIdentity: this.#identity,
      leaseDurationSeconds: this.writtenSeconds(),
      acquireTime: nowText,
      renewTime: nowText,
      leaderTransitions: 0,
    };

    // 1. Fast path: the leader updates optimistically, assuming its last record is current.
    if (this.isLeader() && this.#observed.leaseValid(now) && this.#lock.initialized) {
      const record: LeaderElectionRecord = {
        ...desired,
        acquireTime: this.#observed.record.acquireTime,
        leaderTransitions: this.#observed.record.leaderTransitions,
      };
      const optimistic = await this.#write(record, signal, "update");
      if (optimistic.ok) return "ok";
      this.#log.error(
        optimistic.error,
        "Failed to update lock optimistically, falling back to slow path",
      );
    }

    // 2. Read the lease, or create it when it does not exist.
    let current: LeaderElectionRecord;
    try {
      current = await this.#lock.get(signal);
    } catch (err) {
      if (!isNotFound(err)) {
        this.#log.error(err, "Error retrieving resource lock");
        return "failed";
      }
      const created = await this.#write(desired, signal, "create");
      if (created.ok) return "ok";
      // 409 AlreadyExists: another replica created it first.
      this.#log.error(created.error, "Error initially creating leader election record");
      return "failed";
    }

    // 3. Note when the record changed; back off while another holder's lease is valid.
    this.#observed.read(current);
    if (current.holderIdentity !== "" && this.#observed.leaseValid(now) && !this.isLeader()) {
      this.#log.v(4).info("Lock is held and has not yet expired", {
        holder: current.holderIdentity,
      });
      return "held";
    }

    // 4. Take over (or renew on the slow path) with the resourceVersion just read.
    let record: LeaderElectionRecord;
    if (this.isLeader()) {
      record = {
        ...desired,
        acquireTime: current.acquireTime,
        leaderTransitions: current.leaderTransitions,
      };
      this.#slowpathExercised?.();
    } else {
      record = { ...desired, leaderTransitions: current.leaderTransitions + 1 };
    }
    const taken = await this.#write(record, signal, "update");
    if (taken.ok) return "ok";
    // 409 Conflict: another replica wrote since our read; try again next period.
    this.#log.error(taken.error, "Failed to update lock");
    return "failed";
  }

  /**
   * Creates or updates the Lease with `record`, naming this replica; on success the record is
   * the observed one and the fence moves to when the request started.
   */
  async #write(
    record: LeaderElectionRecord,
    signal: AbortSignal,
    how: "create" | "update",
  ): Promise<{ ok: true } | { ok: false; error: unknown }> {
    const startedAt = this.#clock.now();
    try {
      if (how === "create") await this.#lock.create(record, signal);
      else await this.#lock.update(record, signal);
    } catch (error) {
      return { ok: false, error };
    }
    this.#observed.wrote(record);
    this.#wrote(startedAt);
    return { ok: true };
  }

  /**
   * client-go's `release()`: writes an empty holder with a one-second duration so that a
   * standby takes over at its next attempt. Unlike client-go, it first checks that the freshly
   * read Lease still names this replica, so it never overwrites a new leader's record. Each of
   * its two requests runs under a signal of `request`'s.
   */
  async release(request: () => RequestSignal): Promise<void> {
    let current: LeaderElectionRecord;
    const read = request();
    try {
      current = await this.#lock.get(read.signal);
    } catch (err) {
      if (isNotFound(err)) this.#log.info("Lease lock not found; nothing to release");
      else this.#log.error(err, "Error retrieving resource lock");
      return;
    } finally {
      read.done();
    }
    if (!this.isLeader()) return;
    if (current.holderIdentity !== this.#identity) {
      this.#log.info("Lease is held by another replica; not releasing", {
        holder: current.holderIdentity,
      });
      return;
    }
    const now = formatMicroTime(this.#clock.wallNow());
    const record: LeaderElectionRecord = {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
      leaderTransitions: this.#observed.record.leaderTransitions,
    };
    const write = request();
    try {
      await this.#lock.update(record, write.signal);
    } catch (err) {
      this.#log.error(err, "Failed to release lock");
      return;
    } finally {
      write.done();
    }
    this.#observed.wrote(record);
    this.#log.info("Released lease");
  }
}
