/**
 * A response body read as it arrives: the DATA of one stream queued for its reader, and the
 * receive window given back as the reader takes it, so a reader that stops reading stops the
 * server once the stream's window is used (RFC 9113 §5.2.1, §6.9). Go's `x/net/http2` Transport
 * does the same: `transportResponseBody.Read` returns the stream's flow (and the connection's) only
 * for what was read (`h2_bundle.go`).
 *
 * Memory follows octets, not frames: DATA is copied into blocks that grow from 1 KiB (or the
 * first DATA's size) to 16 KiB (a frame's payload is a view of the frame reader's buffer, valid
 * until the next frame), so a run of one-octet frames fills shared blocks, never one object per
 * frame. What is queued is at most the stream's window plus one block.
 *
 * @module
 */

import type { StreamError } from "./stream_error.ts";
import type { FencedError } from "../../lease_fence.ts";

/**
 * Blocks grow from the first DATA's size (at least {@link FIRST_BLOCK_BYTES}) by doubling to
 * {@link BLOCK_BYTES}: a small answer costs one block of its size, a run of tiny frames fills
 * ever larger blocks.
 */
const BLOCK_BYTES = 16 * 1024;
const FIRST_BLOCK_BYTES = 1024;
const EMPTY = new Uint8Array(0);

/** The session's side of a {@link StreamBody}. */
export interface StreamBodyOwner {
  /** The reader took `octets`: they may be given back to the peer as window. */
  consumed(octets: number): void;
}

/**
 * The DATA of one stream, queued until read: the session {@link append}s, {@link end}s or
 * {@link fail}s it; one reader calls {@link next}.
 */
export class StreamBody {
  readonly #owner: StreamBodyOwner;
  /** Blocks filled, oldest first. */
  #queue: Uint8Array[] = [];
  #queued = 0;
  #tail: Uint8Array = EMPTY;
  #tailStart = 0;
  #tailLength = 0;
  #length = 0;
  #ended = false;
  #error: StreamError | FencedError | undefined;
  #waiter:
    | { resolve: (d: Uint8Array[] | null) => void; reject: (e: StreamError | FencedError) => void }
    | undefined;

  constructor(owner: StreamBodyOwner) {
    this.#owner = owner;
  }

  /** Octets received so far (the caller's size limit counts these). */
  get length(): number {
    return this.#length;
  }

  /** Octets received and not yet read. */
  get queued(): number {
    return this.#queued + this.#tailLength - this.#tailStart;
  }

  /** True once the body ended or failed. */
  get done(): boolean {
    return this.#ended || this.#error !== undefined;
  }

  /** Appends a copy of `bytes` (a view valid only for this call). */
  append(bytes: Uint8Array): void {
    if (this.done || bytes.length === 0) return;
    this.#length += bytes.length;
    if (this.#tailLength + bytes.length > this.#tail.length) {
      this.#sealTail();
      const grown = Math.min(BLOCK_BYTES, Math.max(FIRST_BLOCK_BYTES, 2 * this.#tail.length));
      this.#tail = new Uint8Array(Math.max(grown, bytes.length));
      this.#tailStart = 0;
      this.#tailLength = 0;
    }
    this.#tail.set(bytes, this.#tailLength);
    this.#tailLength += bytes.length;
    this.#wake();
  }

  /** The body ended (END_STREAM). */
  end(): void {
    if (this.done) return;
    this.#ended = true;
    this.#wake();
  }

  /** The stream failed: a pending or later read rejects with `err`; what is queued is dropped. */
  fail(err: StreamError | FencedError): void {
    if (this.done) return;
    this.#error = err;
    this.#queue = [];
    this.#queued = 0;
    this.#tail = EMPTY;
    this.#tailStart = this.#tailLength = 0;
    const w = this.#waiter;
    this.#waiter = undefined;
    w?.reject(err);
  }

  /**
   * Everything queued (at least one non-empty view), waiting for data when nothing is; null at
   * the end of the body. One read at a time.
   */
  next(): Promise<Uint8Array[] | null> {
    if (this.#error !== undefined) return Promise.reject(this.#error);
    if (this.#waiter !== undefined) throw new TypeError("a read is already pending");
    const data = this.#take();
    if (data !== null) return Promise.resolve(data);
    if (this.#ended) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  #wake(): void {
    const w = this.#waiter;
    if (w === undefined) return;
    const data = this.#take();
    if (data === null && !this.#ended) return;
    this.#waiter = undefined;
    w.resolve(data);
  }

  /** Moves the unread part of the tail block into the queue. */
  #sealTail(): void {
    if (this.#tailLength > this.#tailStart) {
      this.#queue.push(this.#tail.subarray(this.#tailStart, this.#tailLength));
      this.#queued += this.#tailLength - this.#tailStart;
    }
    this.#tailStart = this.#tailLength;
  }

  #take(): Uint8Array[] | null {
    this.#sealTail();
    if (this.#queue.length === 0) return null;
    const out = this.#queue;
    const octets = this.#queued;
    this.#queue = [];
    this.#queued = 0;
    this.#owner.consumed(octets);
    return out;
  }
}
