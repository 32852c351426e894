/**
 * What this replica last saw of the election record, and when: client-go's `observedRecord`,
 * `observedRawRecord` and `observedTime` (`tools/leaderelection/leaderelection.go`). A lease
 * expires only when the record has not changed for the holder's `leaseDurationSeconds` of this
 * replica's own monotonic clock; no time written by another replica is ever compared.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { EMPTY_RECORD, type LeaderElectionRecord } from "./record.ts";

/** The last record this replica read or wrote, and the local time it last changed. */
export class ObservedRecord {
  #clock: Clock;
  #record: LeaderElectionRecord = EMPTY_RECORD;
  /** The record as last read, serialized: a read that differs from it resets {@link time}. */
  #raw = "";
  #time = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** The last record read or written. */
  get record(): LeaderElectionRecord {
    return this.#record;
  }

  /** Local clock time (ms) at which {@link record} was last set. */
  get time(): number {
    return this.#time;
  }

  /** A record this replica wrote: it is the observed one from now. */
  wrote(record: LeaderElectionRecord): void {
    this.#record = record;
    this.#time = this.#clock.now();
  }

  /** A record read from the Lease: observed from now only when it differs from the last read. */
  read(record: LeaderElectionRecord): void {
    const raw = JSON.stringify(record);
    if (raw === this.#raw) return;
    this.wrote(record);
    this.#raw = raw;
  }

  /** True while the holder's lease, counted from our own observation, has not run out at `now`. */
  leaseValid(now: number): boolean {
    return this.#time + this.#record.leaseDurationSeconds * 1000 > now;
  }
}
