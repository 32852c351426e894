/**
 * The framing of a protobuf watch (`application/vnd.kubernetes.protobuf;stream=watch`): each
 * event is a 4-byte big-endian length, then that many bytes (k8s.io/apimachinery
 * `pkg/util/framer/framer.go`, `NewLengthDelimitedFrameWriter` and `lengthDelimitedFrameReader`).
 *
 * Limits, as client-go's:
 * - {@link MAX_FRAME_BYTES}, 16 MiB: client-go reads every watch (`rest/request.go`,
 *   `newStreamWatcher`) through apimachinery's streaming decoder
 *   (`pkg/runtime/serializer/streaming/streaming.go`, `NewDecoder`, `maxBytes` 16 MiB), which
 *   grows its buffer up to that and then fails with `ErrObjectTooLarge`, "object to decode was
 *   longer than maximum allowed size". Here the length is checked as soon as its 4 bytes are in,
 *   before any byte of the frame is kept: a frame length of 4 GiB costs nothing.
 * - What is kept between chunks is the unfinished frame only, at most its declared length.
 *
 * @module
 */

import { concatBytes } from "../../bytes.ts";

/** The largest frame accepted, in bytes (client-go's streaming decoder `maxBytes`, 16 MiB). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** client-go's `streaming.ErrObjectTooLarge` text. */
export const OBJECT_TOO_LARGE = "object to decode was longer than maximum allowed size";

/** A frame over the limit, or a stream that ended inside a frame. */
export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FrameError";
  }
}

/**
 * Splits a length-delimited stream into its frames. Chunks may end anywhere, inside the length
 * or the frame. A frame that ends inside one chunk is a view of it (no copy); one spread over
 * chunks is copied once, when complete.
 */
export class LengthFrameSplitter {
  readonly #maxFrameBytes: number;
  /** The bytes of the length read so far (0 to 3 of them), as a number. */
  #header = 0;
  #headerBytes = 0;
  /** The length of the frame under way, or -1 while its length is being read. */
  #want = -1;
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;

  /** A splitter refusing frames over `maxFrameBytes` (default {@link MAX_FRAME_BYTES}). */
  constructor(maxFrameBytes = MAX_FRAME_BYTES) {
    this.#maxFrameBytes = maxFrameBytes;
  }

  /**
   * The frames that `chunk` completes, in order, appended to `frames` (which is returned).
   *
   * @throws {FrameError} (client-go's "object to decode was longer than maximum allowed size")
   *   for a length over the limit; nothing more is kept, the frames completed before it are in
   *   `frames`.
   */
  push(chunk: Uint8Array, frames: Uint8Array[] = []): Uint8Array[] {
    let at = 0;
    const n = chunk.length;
    while (at < n) {
      if (this.#want < 0) {
        // The 4 length bytes, possibly split over chunks.
        while (this.#headerBytes < 4 && at < n) {
          this.#header = this.#header * 256 + chunk[at++]!;
          this.#headerBytes++;
        }
        if (this.#headerBytes < 4) break;
        const length = this.#header;
        this.#header = 0;
        this.#headerBytes = 0;
        if (length > this.#maxFrameBytes) {
          this.#reset();
          throw new FrameError(`${OBJECT_TOO_LARGE}: a frame of ${length} bytes`);
        }
        this.#want = length;
      }
      const missing = this.#want - this.#pendingBytes;
      const take = Math.min(missing, n - at);
      if (take === missing && this.#pending.length === 0) {
        frames.push(chunk.subarray(at, at + take));
      } else {
        // A copy: a view would keep the whole chunk alive until the frame ends.
        this.#pending.push(chunk.slice(at, at + take));
        this.#pendingBytes += take;
        if (this.#pendingBytes < this.#want) {
          at += take;
          break;
        }
        frames.push(concatBytes(this.#pending));
        this.#pending = [];
        this.#pendingBytes = 0;
      }
      at += take;
      this.#want = -1;
    }
    return frames;
  }

  /**
   * Checks the end of the stream.
   *
   * @throws {FrameError} when it ended inside a frame or its length.
   */
  end(): void {
    if (this.#want < 0 && this.#headerBytes === 0) return;
    const what = this.#want < 0
      ? `${this.#headerBytes} of the 4 bytes of a frame length`
      : `${this.#pendingBytes} of the ${this.#want} bytes of a frame`;
    this.#reset();
    throw new FrameError(`the watch ended inside a frame: ${what}`);
  }

  /** Bytes kept for the frame under way. */
  get pendingBytes(): number {
    return this.#pendingBytes + this.#headerBytes;
  }

  #reset(): void {
    this.#want = -1;
    this.#header = 0;
    this.#headerBytes = 0;
    this.#pending = [];
    this.#pendingBytes = 0;
  }
}
