/**
 * The `max_entries` of each ListVolumes page of the reconciler.
 *
 * With `--max-entries=0` (the default) the Go attacher asks for every volume in one answer
 * (external-attacher `pkg/controller/csi_handler.go`, `ReconcileVA`); once the driver holds
 * enough volumes that answer exceeds gRPC's 4 MiB receive limit (about 90 000 volumes of 45
 * bytes each) and every pass fails with ResourceExhausted `grpc: received message larger than
 * max (<size> vs. <limit>)`, forever. Here paging is turned on instead, on its own:
 * - before a pass, when the last whole answer grown to the number of VolumeAttachments now
 *   cached would come within {@link PREDICTED_FRACTION} of the limit, or
 * - when an answer fails for its size (the client's receive limit, or a driver's send limit:
 *   grpc-go words both `... message larger than max (<size> vs. <limit>)`); the page is then
 *   asked again, smaller, within the same pass.
 *
 * A page asks for as many entries as fit in {@link PAGE_FRACTION} of the limit at the bytes per
 * entry last observed (a first page, before any is observed, asks for {@link PROBE_ENTRIES}).
 * The CSI spec obliges a plugin that reports LIST_VOLUMES to honour `max_entries`
 * (csi-spec `spec.md`, ListVolumes). An operator's `--max-entries` stays the upper bound.
 *
 * @module
 */

import { CSI_MAX_RECEIVE_MESSAGE_BYTES, CsiError, type ListedVolume } from "../csi/api.ts";

/** gRPC's ResourceExhausted (grpc `codes.ResourceExhausted`). */
const RESOURCE_EXHAUSTED = 8;
/** A page aims at this fraction of the receive limit, leaving room for larger entries. */
export const PAGE_FRACTION = 0.25;
/** A whole answer predicted above this fraction of the limit turns paging on before it fails. */
export const PREDICTED_FRACTION = 0.75;
/** `max_entries` of the first page when no bytes per entry were observed yet. */
export const PROBE_ENTRIES = 1000;

/** `... message larger than max (<size> vs. <limit>)`: grpc-go `rpc_util.go` recvMsg/encode. */
const TOO_LARGE = /message larger than max \((\d+) vs\. (\d+)\)/;

/** Why paging was turned on, for the one log line that says so. */
export interface PagingTurnedOn {
  reason: string;
  /** The size of the answer that failed, or the predicted size. */
  answerBytes: number;
  /** The limit the answer is held to. */
  limitBytes: number;
  /** `max_entries` of the next page. */
  maxEntries: number;
}

/**
 * The size of an answer that failed for its size and the limit it exceeded, or undefined when
 * `err` is another failure.
 */
export function tooLargeAnswer(err: unknown): { bytes: number; limit: number } | undefined {
  if (!(err instanceof CsiError) || err.code !== RESOURCE_EXHAUSTED) return undefined;
  const m = TOO_LARGE.exec(err.details);
  if (m === null) return undefined;
  return { bytes: Number(m[1]), limit: Number(m[2]) };
}

/**
 * The protobuf size of `entries` as a driver sends them without volume capacity or context:
 * the fallback when a client does not report the answer's size.
 */
export function estimatedBytes(entries: readonly ListedVolume[]): number {
  let bytes = 0;
  for (const e of entries) {
    let status = 0;
    for (const id of e.publishedNodeIds) status += 2 + id.length;
    const volume = 2 + e.volumeId.length;
    const entry = 2 + volume + 2 + status;
    bytes += 3 + entry;
  }
  return bytes;
}

/** The page size state of one reconciler; see the module doc. */
export class ListVolumesPaging {
  #configured: number;
  #limit = CSI_MAX_RECEIVE_MESSAGE_BYTES;
  /** 0 while every volume is asked for in one answer (and `--max-entries` is 0). */
  #pageSize = 0;
  #bytesPerEntry = 0;
  #lastAnswerEntries = 0;
  #paging = false;

  /** @param configured `--max-entries`; 0 means no limit. */
  constructor(configured: number) {
    this.#configured = configured;
  }

  /** True once paging was turned on. */
  get paging(): boolean {
    return this.#paging;
  }

  /** `max_entries` of the next page (0: no limit). */
  get maxEntries(): number {
    if (!this.#paging) return this.#configured;
    if (this.#configured > 0) return Math.min(this.#configured, this.#pageSize);
    return this.#pageSize;
  }

  /**
   * Called before a pass with the number of VolumeAttachments cached: turns paging on when the
   * last whole answer, grown to that number, would come close to the limit.
   */
  beforePass(cachedAttachments: number): PagingTurnedOn | undefined {
    if (this.#paging || this.#bytesPerEntry === 0) return undefined;
    const entries = Math.max(this.#lastAnswerEntries, cachedAttachments);
    const predicted = Math.ceil(entries * this.#bytesPerEntry);
    if (predicted <= this.#limit * PREDICTED_FRACTION) return undefined;
    if (this.#configured > 0 && this.#configured * this.#bytesPerEntry <= this.#limit / 2) {
      return undefined;
    }
    return this.#turnOn(
      `the answer for ${entries} volumes would be about ${predicted} bytes`,
      predicted,
    );
  }

  /** Records a page that arrived: its size in bytes (estimated when unknown) and entries. */
  observe(entries: readonly ListedVolume[], bytes: number | undefined, whole: boolean): void {
    if (entries.length === 0) return;
    const size = bytes ?? estimatedBytes(entries);
    this.#bytesPerEntry = size / entries.length;
    if (whole) this.#lastAnswerEntries = entries.length;
    if (this.#paging) this.#pageSize = this.#sizeFor(this.#bytesPerEntry);
  }

  /**
   * Called when a page failed: when it failed for its size, makes the next page smaller and
   * returns true (ask again); returns false for any other failure, or when a page of one entry
   * is already too large. `turnedOn` is set when this turned paging on.
   */
  onFailure(err: unknown): { retry: boolean; turnedOn?: PagingTurnedOn } {
    const tooLarge = tooLargeAnswer(err);
    if (tooLarge === undefined) return { retry: false };
    if (tooLarge.limit > 0) this.#limit = Math.min(this.#limit, tooLarge.limit);
    const asked = this.maxEntries;
    if (asked === 1) return { retry: false };
    let next: number;
    if (asked === 0) {
      next = this.#bytesPerEntry > 0 ? this.#sizeFor(this.#bytesPerEntry) : PROBE_ENTRIES;
    } else {
      // The page held `asked` entries of tooLarge.bytes: shrink it to the target, at least half.
      const fit = Math.floor(asked * (this.#limit * PAGE_FRACTION) / Math.max(1, tooLarge.bytes));
      next = Math.max(1, Math.min(Math.floor(asked / 2), fit));
    }
    this.#pageSize = next;
    if (this.#paging) return { retry: true };
    return {
      retry: true,
      turnedOn: this.#turnOn(err instanceof Error ? err.message : String(err), tooLarge.bytes),
    };
  }

  #turnOn(reason: string, answerBytes: number): PagingTurnedOn {
    this.#paging = true;
    if (this.#pageSize === 0) {
      this.#pageSize = this.#bytesPerEntry > 0 ? this.#sizeFor(this.#bytesPerEntry) : PROBE_ENTRIES;
    }
    return { reason, answerBytes, limitBytes: this.#limit, maxEntries: this.maxEntries };
  }

  #sizeFor(bytesPerEntry: number): number {
    return Math.max(1, Math.floor(this.#limit * PAGE_FRACTION / bytesPerEntry));
  }
}
