/**
 * The write side of an HTTP/2 connection: frames queued in order and written by one loop, as
 * grpc-go's `loopyWriter` drains its `controlBuffer` (grpc-go `internal/transport/controlbuf.go`).
 *
 * It counts the frames queued in answer to the peer (SETTINGS and PING ACKs, RST_STREAM), so
 * that the reader can stop reading while too many wait unsent: a peer that floods PINGs or
 * SETTINGS and does not read what we write cannot make the queue grow without bound.
 *
 * Frames may carry a {@link WriteFence}: a synchronous check made immediately before the write
 * that would carry them (nothing asynchronous runs between the check and the `Deno.Conn.write`
 * call); frames whose fence says no are dropped, never written.
 *
 * @module
 */

import { concatBytes } from "../../bytes.ts";

/** A check made synchronously immediately before the frames it guards are written. */
export interface WriteFence {
  /** True to write the frames; asked once per write that would carry them. */
  allowed(): boolean;
  /** The frames were dropped because {@link allowed} said no (called once per such write). */
  refused(): void;
}

/** Queues frames and writes them to `conn` in order, one write at a time. */
export class FrameWriter {
  readonly #conn: Deno.Conn;
  readonly #onError: (err: unknown) => void;
  #out: Uint8Array[] = [];
  /** The fence of each frame in {@link #out}, if any. */
  #fences: (WriteFence | undefined)[] = [];
  #fenced = 0;
  /** Responses in {@link #out}. */
  #queuedResponses = 0;
  /** Responses taken from {@link #out} by the write in progress. */
  #writingResponses = 0;
  #writing = false;
  #closed = false;
  #flushing = false;
  #waiters: { limit: number; resolve: () => void }[] = [];

  /** @param onError called once when a write fails (not after {@link close}). */
  constructor(conn: Deno.Conn, onError: (err: unknown) => void) {
    this.#conn = conn;
    this.#onError = onError;
  }

  /**
   * Queues `bytes` (whole frames). `response` marks a frame sent because the peer's frame asks
   * for it: a SETTINGS or PING ACK, a RST_STREAM. With `fence`, the frames are written only if
   * the fence allows it at the moment of writing. Dropped once the writer is closed.
   */
  write(bytes: Uint8Array, response = false, fence?: WriteFence): void {
    if (this.#closed) return;
    this.#out.push(bytes);
    this.#fences.push(fence);
    if (fence !== undefined) this.#fenced++;
    if (response) this.#queuedResponses++;
    if (!this.#writing) {
      this.#writing = true;
      queueMicrotask(() => this.#drain());
    }
  }

  /** Responses ({@link write} with `response`) queued or being written. */
  get pendingResponses(): number {
    return this.#queuedResponses + this.#writingResponses;
  }

  /** Resolves once fewer than `limit` responses are pending, or when the writer closes. */
  responsesBelow(limit: number): Promise<void> {
    if (this.#closed || this.pendingResponses < limit) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ limit, resolve }));
  }

  /**
   * Stops writing and closes the connection; with `flush`, the frames queued (a GOAWAY) are
   * written first. Idempotent.
   */
  close(flush = false): void {
    if (this.#closed) return;
    this.#closed = true;
    if (flush && (this.#out.length > 0 || this.#writing)) {
      this.#flushing = true;
      if (!this.#writing) {
        this.#writing = true;
        queueMicrotask(() => this.#drain());
      }
    } else {
      this.#out = [];
      this.#fences = [];
      this.#fenced = 0;
      this.#closeConn();
    }
    this.#wake(true);
  }

  async #drain(): Promise<void> {
    try {
      while (this.#out.length > 0 && (!this.#closed || this.#flushing)) {
        let parts = this.#out.splice(0);
        const fences = this.#fences.splice(0);
        let refused: WriteFence[] = [];
        if (this.#fenced > 0) {
          this.#fenced = 0;
          ({ parts, refused } = applyFences(parts, fences));
        }
        this.#writingResponses = this.#queuedResponses;
        this.#queuedResponses = 0;
        let chunk = concatBytes(parts);
        let written = chunk.length > 0 ? this.#conn.write(chunk) : undefined;
        // Told after the write call, so that the check stays right before it.
        for (const fence of refused) fence.refused();
        while (written !== undefined) {
          chunk = chunk.subarray(await written);
          written = chunk.length > 0 ? this.#conn.write(chunk) : undefined;
        }
        this.#writingResponses = 0;
        this.#wake(false);
      }
    } catch (err) {
      if (!this.#closed) this.#onError(err);
    } finally {
      this.#writing = false;
      if (this.#flushing) {
        this.#flushing = false;
        this.#closeConn();
      }
    }
  }

  #wake(all: boolean): void {
    if (this.#waiters.length === 0) return;
    const pending = this.pendingResponses;
    const waiting = this.#waiters;
    this.#waiters = [];
    for (const w of waiting) {
      if (all || pending < w.limit) w.resolve();
      else this.#waiters.push(w);
    }
  }

  #closeConn(): void {
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
  }
}

/**
 * The frames of `parts` whose fence allows them (each fence asked once), and the fences that
 * said no.
 */
function applyFences(
  parts: Uint8Array[],
  fences: (WriteFence | undefined)[],
): { parts: Uint8Array[]; refused: WriteFence[] } {
  const answers = new Map<WriteFence, boolean>();
  const kept: Uint8Array[] = [];
  for (let i = 0; i < parts.length; i++) {
    const fence = fences[i];
    if (fence !== undefined) {
      let allowed = answers.get(fence);
      if (allowed === undefined) {
        allowed = fence.allowed();
        answers.set(fence, allowed);
      }
      if (!allowed) continue;
    }
    kept.push(parts[i]!);
  }
  const refused = [...answers].filter(([, allowed]) => !allowed).map(([fence]) => fence);
  return { parts: kept, refused };
}
