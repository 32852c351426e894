/**
 * One connection of the HTTP/1.1 transport: the byte stream under it (a TCP or TLS connection,
 * maybe through a proxy's tunnel), what was read on it but not used yet, and its read while idle.
 *
 * @module
 */

import { FencedError, type LeaseFence } from "../../lease_fence.ts";
import { TransportError } from "./errors.ts";
import { errorText } from "../../errors.ts";
import type { ByteSource } from "./response.ts";

/**
 * What a connection reads and writes: `Deno.Conn` has this shape, and so does the `node:tls`
 * socket wrapped for `insecure-skip-tls-verify` (`./insecure_tls.ts`).
 */
export interface ByteStream {
  /** Reads into `p`; the number of bytes read, or null at EOF. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes some of `p`; the number of bytes written. */
  write(p: Uint8Array): Promise<number>;
  close(): void;
  /** The stream keeps the process alive (the default). */
  ref(): void;
  /** The stream does not keep the process alive. */
  unref(): void;
}

/**
 * Reads go into slices of one buffer of this size until less than {@link MIN_READ} is left. The
 * image's `MALLOC_MMAP_THRESHOLD_` (Containerfile) is this size, so that these buffers, freed only
 * when V8 collects them, are mapped on their own and not left as holes in malloc's arena.
 */
const READ_BUFFER = 64 * 1024;
const MIN_READ = 8 * 1024;

/**
 * A failure of reading or writing an open connection as a {@link TransportError}: the runtime's
 * `UnexpectedEof` is `eof`, every other I/O error a `reset` (the connection is broken either
 * way); a TransportError stays as it is.
 */
export function brokenConnection(err: unknown): TransportError {
  if (err instanceof TransportError) return err;
  const kind = err instanceof Deno.errors.UnexpectedEof ? "eof" : "reset";
  return new TransportError(kind, errorText(err), { cause: err });
}

/** One connection, what was read on it but not used yet, and its read while idle. */
export class Connection implements ByteSource {
  readonly conn: ByteStream;
  readonly origin: string;
  readonly generation: number;
  /** True once a byte was read since the last request was written. */
  answered = false;
  /** Clock reading when the connection went into the pool. */
  idleSince = 0;
  closed = false;
  #buffer = new Uint8Array(0);
  #used = 0;
  #unread: Uint8Array | undefined;
  /** The read started while idle, handed to the next {@link read}. */
  #ahead: Promise<Uint8Array | null> | undefined;
  #parked = false;

  constructor(conn: ByteStream, origin: string, generation: number) {
    this.conn = conn;
    this.origin = origin;
    this.generation = generation;
  }

  /**
   * The next bytes, as a view that later reads never overwrite; null at EOF. Reads fill
   * successive slices of one buffer, so a small read costs no allocation.
   */
  async read(): Promise<Uint8Array | null> {
    const unread = this.#unread;
    if (unread !== undefined) {
      this.#unread = undefined;
      return unread;
    }
    const ahead = this.#ahead;
    this.#ahead = undefined;
    const bytes = await (ahead ?? this.#readConn());
    if (bytes !== null) this.answered = true;
    return bytes;
  }

  /** Puts `bytes` back in front of the next read. */
  unread(bytes: Uint8Array): void {
    if (bytes.length > 0) this.#unread = bytes;
  }

  /** True when bytes were read past the end of the last answer. */
  get hasUnread(): boolean {
    return this.#unread !== undefined;
  }

  /**
   * The connection goes idle: a read is started, and `onActivity` is called when it ends (data,
   * EOF or an error) while the connection is still idle. An idle connection does not keep the
   * process alive.
   */
  park(onActivity: () => void): void {
    this.#parked = true;
    const ahead = this.#readConn();
    this.#ahead = ahead;
    const settled = () => {
      if (this.#parked) onActivity();
    };
    ahead.then(settled, settled);
    try {
      this.conn.unref();
    } catch {
      // Closed under us: the read fails and reports it.
    }
  }

  /** The connection leaves the pool for a request; its pending read becomes the request's. */
  claim(): void {
    this.#parked = false;
    this.conn.ref();
  }

  /**
   * Writes all of `bytes`. `fence`, when given, is asked synchronously right before each write
   * call; a no throws {@link FencedError} (the caller closes the connection, so a request cut
   * short is never complete at the server).
   */
  async write(bytes: Uint8Array, fence?: LeaseFence): Promise<void> {
    for (let offset = 0; offset < bytes.length;) {
      if (fence !== undefined && !fence.valid()) throw new FencedError();
      try {
        offset += await this.conn.write(bytes.subarray(offset));
      } catch (err) {
        throw brokenConnection(err);
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.#parked = false;
    try {
      this.conn.close();
    } catch {
      // Already closed by the runtime.
    }
  }

  async #readConn(): Promise<Uint8Array | null> {
    if (this.#buffer.length - this.#used < MIN_READ) {
      this.#buffer = new Uint8Array(READ_BUFFER);
      this.#used = 0;
    }
    // One read at a time is ever pending on a connection, so the slice stays this read's.
    const target = this.#buffer.subarray(this.#used);
    let n: number | null;
    try {
      n = await this.conn.read(target);
    } catch (err) {
      throw brokenConnection(err);
    }
    if (n === null) return null;
    this.#used += n;
    return target.subarray(0, n);
  }
}
