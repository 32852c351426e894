/**
 * The DATA octets of one response stream, appended into one array as frames arrive: memory
 * follows the octets received, never the number of frames that carried them. A peer that sends
 * a 3 MiB answer as three million one-octet DATA frames (the client side of CVE-2019-9511,
 * "data dribble") costs what a peer sending it in full frames costs.
 *
 * The array is sized from the answer's own length prefix when the caller names one (a gRPC
 * message says its length in its first 5 octets; grpc-go's `recvMsg` allocates the message
 * from that length too, `rpc_util.go`), else it grows geometrically (doubling, from 1 KiB), and
 * it is never larger than the stream's limit. So the buffer holds at most
 * max(2 × received, 1 KiB) octets, or the length the prefix promised, and never more than the
 * limit; while it grows, the old and the new array live together for one copy.
 *
 * @module
 */

/** How to learn an answer's whole length from its first octets (a gRPC length prefix). */
export interface DataSizeHint {
  /** Octets needed to read the length. */
  readonly prefixLength: number;
  /** The whole answer's length in octets, from its first {@link prefixLength} octets. */
  total(prefix: Uint8Array): number;
}

const EMPTY = new Uint8Array(0);
const FIRST_CAPACITY = 1024;

/** One stream's received DATA octets. */
export class ReceiveBuffer {
  readonly #limit: number;
  readonly #hint: DataSizeHint | undefined;
  #buf: Uint8Array = EMPTY;
  #length = 0;
  #hinted = false;

  /**
   * @param limit the most octets the buffer will ever be asked to hold (the caller refuses more
   *   before appending).
   * @param hint reads the whole length from the first octets, when the answer says it.
   */
  constructor(limit: number, hint?: DataSizeHint) {
    this.#limit = limit;
    this.#hint = hint;
  }

  /** Octets received. */
  get length(): number {
    return this.#length;
  }

  /** Octets of the array behind the buffer. */
  get capacity(): number {
    return this.#buf.length;
  }

  /** Appends a copy of `bytes`. The total must stay within the limit. */
  append(bytes: Uint8Array): void {
    const needed = this.#length + bytes.length;
    if (needed > this.#buf.length) this.#grow(needed, bytes);
    this.#buf.set(bytes, this.#length);
    this.#length = needed;
  }

  /** The octets received, without a copy (a view of the buffer's array). */
  bytes(): Uint8Array {
    return this.#buf.subarray(0, this.#length);
  }

  #grow(needed: number, next: Uint8Array): void {
    let size = Math.max(FIRST_CAPACITY, this.#buf.length * 2, needed);
    const hint = this.#hint;
    if (hint !== undefined && !this.#hinted && needed >= hint.prefixLength) {
      this.#hinted = true;
      const prefix = new Uint8Array(hint.prefixLength);
      const have = Math.min(this.#length, hint.prefixLength);
      prefix.set(this.#buf.subarray(0, have));
      prefix.set(next.subarray(0, hint.prefixLength - have), have);
      const total = hint.total(prefix);
      if (Number.isSafeInteger(total) && total >= needed) size = total;
    }
    size = Math.max(needed, Math.min(size, this.#limit));
    const grown = new Uint8Array(size);
    grown.set(this.#buf.subarray(0, this.#length));
    this.#buf = grown;
  }
}
