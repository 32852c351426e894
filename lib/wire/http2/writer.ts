/**
 * The write side of an HTTP/2 connection: frames queued in order and written by one loop, as
 * grpc-go's `loopyWriter` drains its `controlBuffer` (grpc-go `internal/transport/controlbuf.go`).
 *
 * It counts the frames queued in answer to the peer (SETTINGS and PING ACKs, RST_STREAM), so
 * that the reader can stop reading while too many wait unsent: a peer that floods PINGs or
 * SETTINGS and does not read what we write cannot make the queue grow without bound.
 *
 * @module
 */

import { concatBytes } from "../../bytes.ts";

/** Queues frames and writes them to `conn` in order, one write at a time. */
export class FrameWriter {
  readonly #conn: Deno.Conn;
  readonly #onError: (err: unknown) => void;
  #out: Uint8Array[] = [];
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
   * for it: a SETTINGS or PING ACK, a RST_STREAM. Dropped once the writer is closed.
   */
  write(bytes: Uint8Array, response = false): void {
    if (this.#closed) return;
    this.#out.push(bytes);
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
      this.#closeConn();
    }
    this.#wake(true);
  }

  async #drain(): Promise<void> {
    try {
      while (this.#out.length > 0 && (!this.#closed || this.#flushing)) {
        const parts = this.#out.splice(0);
        this.#writingResponses = this.#queuedResponses;
        this.#queuedResponses = 0;
        let chunk = concatBytes(parts);
        while (chunk.length > 0) chunk = chunk.subarray(await this.#conn.write(chunk));
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
