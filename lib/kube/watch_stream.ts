/**
 * The body of a watch: newline-delimited JSON events (kube-apiserver writes one `metav1.WatchEvent`
 * per line with Go's `json.Encoder`), split into frames, decoded and checked, and the idle
 * watchdog that ends a watch that delivers nothing.
 *
 * @module
 */

import { ApiError, type WatchEvent } from "./api.ts";
import type { Clock, Timer } from "../clock.ts";
import { bodyReader, concatBytes } from "./body.ts";
import { isObject, tryParseJson } from "./json.ts";
import { type RequestContext, requestFailure } from "./request.ts";
import type { KubeObject } from "./types.ts";

/** Most characters of a bad event line quoted in an error message. */
const LINE_SNIPPET_CHARS = 200;

/**
 * Splits a watch body into its frames. Chunks may end anywhere, inside a frame or a multi-byte
 * character: bytes are split at `\n` before they are decoded (a newline byte never occurs inside
 * a UTF-8 sequence, and JSON escapes it inside strings). Blank lines are skipped; the tail after
 * the last newline is kept, copied, until {@link WatchFrameSplitter.end}.
 */
export class WatchFrameSplitter {
  readonly #decoder = new TextDecoder();
  #pending: Uint8Array[] = [];

  /** The complete frames that `chunk` ends, trimmed. */
  push(chunk: Uint8Array): string[] {
    const frames: string[] = [];
    let from = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, from)) {
      this.#add(frames, this.#take(chunk.subarray(from, nl)));
      from = nl + 1;
    }
    // A copy: a view would keep the whole chunk alive until the frame ends.
    if (from < chunk.length) this.#pending.push(chunk.slice(from));
    return frames;
  }

  /** The frame after the last newline, if any (a body that ended without one). */
  end(): string | undefined {
    const frames: string[] = [];
    if (this.#pending.length > 0) this.#add(frames, this.#take(new Uint8Array(0)));
    return frames[0];
  }

  #take(last: Uint8Array): Uint8Array {
    if (this.#pending.length === 0) return last;
    const parts = [...this.#pending, last];
    this.#pending = [];
    return concatBytes(parts);
  }

  #add(frames: string[], bytes: Uint8Array): void {
    const frame = this.#decoder.decode(bytes).trim();
    if (frame !== "") frames.push(frame);
  }
}

/**
 * Calls `onIdle` once when {@link IdleWatchdog.touch} has not been called for `ms` on `clock`.
 * One timer at a time: a touch only notes the time, and the timer, when it fires early, waits
 * for the rest.
 */
export class IdleWatchdog {
  /** The idle time that fires it. */
  readonly ms: number;
  readonly #clock: Clock;
  readonly #onIdle: () => void;
  #last: number;
  #timer: Timer | undefined;
  #fired = false;
  #stopped = false;

  /** @throws {RangeError} when `ms` is not a positive number. */
  constructor(clock: Clock, ms: number, onIdle: () => void) {
    if (!(ms > 0) || !Number.isFinite(ms)) {
      throw new RangeError(`idle timeout must be a positive number of ms, got ${ms}`);
    }
    this.ms = ms;
    this.#clock = clock;
    this.#onIdle = onIdle;
    this.#last = clock.now();
    this.#arm(ms);
  }

  /** True once `onIdle` was called. */
  get fired(): boolean {
    return this.#fired;
  }

  /** Something arrived: the idle time starts again. */
  touch(): void {
    this.#last = this.#clock.now();
  }

  /** No more calls to `onIdle`. */
  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
  }

  #arm(ms: number): void {
    this.#timer = this.#clock.setTimer(ms, () => {
      if (this.#stopped) return;
      const left = this.#last + this.ms - this.#clock.now();
      if (left > 0) {
        this.#arm(left);
        return;
      }
      this.#fired = true;
      this.#onIdle();
    });
  }
}

/**
 * One watch event line decoded.
 *
 * @throws {ApiError} (`InvalidResponse`) when the line is not a JSON event with a type and an
 *   object.
 */
export function decodeWatchEvent<T extends KubeObject>(
  line: string,
  ctx: Pick<RequestContext, "method" | "url">,
): WatchEvent<T> {
  const ev = tryParseJson(line);
  if (!isObject(ev) || typeof ev.type !== "string" || !isObject(ev.object)) {
    throw new ApiError(
      0,
      "InvalidResponse",
      requestFailure(ctx, `invalid watch event: ${line.slice(0, LINE_SNIPPET_CHARS)}`),
    );
  }
  return ev as unknown as WatchEvent<T>;
}

/** How {@link watchEvents} reads a watch body. */
export interface WatchEventsOptions {
  /** The watch request, for error messages. */
  ctx: Pick<RequestContext, "method" | "url">;
  /** Ends the reading: the body stream is cancelled when it aborts. */
  signal: AbortSignal;
  /**
   * True once the watch ended without an error (the caller aborted, the idle watchdog fired):
   * nothing more is delivered, even frames already received.
   */
  stopped(): boolean;
  /** Touched as data arrives. */
  idle?: IdleWatchdog;
}

/**
 * The events of a watch body, in order, until it ends. Ends without an error when `stopped()`
 * becomes true; throws `signal`'s reason when it aborted otherwise, and an {@link ApiError} for
 * a line that is not an event.
 */
export async function* watchEvents<T extends KubeObject>(
  body: ReadableStream<Uint8Array> | null,
  opts: WatchEventsOptions,
): AsyncGenerator<WatchEvent<T>, void, undefined> {
  const { ctx, signal, stopped, idle } = opts;
  const splitter = new WatchFrameSplitter();
  const reader = bodyReader(body, signal);
  for (;;) {
    const next = reader === undefined ? { done: true as const } : await reader.read();
    if (next.done) break;
    idle?.touch();
    for (const frame of splitter.push(next.value)) {
      if (stopped()) return;
      yield decodeWatchEvent<T>(frame, ctx);
    }
  }
  if (stopped()) return;
  // The watch's own deadline, or the client closed.
  if (signal.aborted) throw signal.reason;
  const last = splitter.end();
  if (last !== undefined) yield decodeWatchEvent<T>(last, ctx);
}
