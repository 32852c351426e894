/**
 * A header block received in pieces: a HEADERS frame without END_HEADERS and the CONTINUATION
 * frames that follow it on the same stream (RFC 9113 §4.3, §6.10), put together for the HPACK
 * decoder, which must see the whole block.
 *
 * @module
 */

import { ConnectionError, ErrorCode } from "./frames.ts";

/** The limits of {@link HeaderBlock}. */
export interface HeaderBlockLimits {
  /** Octets of the whole block; more is a connection error ENHANCE_YOUR_CALM. */
  maxBytes: number;
  /** CONTINUATION frames after the HEADERS frame; more is ENHANCE_YOUR_CALM. */
  maxContinuations: number;
}

/** The fragments of one header block, from its HEADERS frame to END_HEADERS. */
export class HeaderBlock {
  readonly streamId: number;
  /** The HEADERS frame carried END_STREAM. */
  readonly endStream: boolean;
  readonly #limits: HeaderBlockLimits;
  #parts: Uint8Array[];
  #size: number;

  constructor(
    streamId: number,
    endStream: boolean,
    first: Uint8Array,
    limits: HeaderBlockLimits,
  ) {
    this.streamId = streamId;
    this.endStream = endStream;
    this.#limits = limits;
    // The frame reader's payloads are views of its buffer: the block keeps copies.
    this.#parts = [first.slice()];
    this.#size = first.length;
  }

  /**
   * Adds the fragment of a CONTINUATION frame.
   *
   * @throws {ConnectionError} ENHANCE_YOUR_CALM when the block grows past the limits.
   */
  add(fragment: Uint8Array): void {
    if (this.#parts.length > this.#limits.maxContinuations) {
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "too many CONTINUATION frames");
    }
    this.#parts.push(fragment.slice());
    this.#size += fragment.length;
    if (this.#size > this.#limits.maxBytes) {
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "header block too large");
    }
  }

  /** The whole block. */
  bytes(): Uint8Array {
    const block = new Uint8Array(this.#size);
    let offset = 0;
    for (const part of this.#parts) {
      block.set(part, offset);
      offset += part.length;
    }
    return block;
  }
}
