/**
 * The body of a watch: newline-delimited JSON events (kube-apiserver writes one `metav1.WatchEvent`
 * per line with Go's `json.Encoder`), split into frames, decoded and checked, and the idle
 * watchdog that ends a watch that delivers nothing.
 *
 * What fails a watch, as client-go fails it (the watch then ends with an {@link ApiError} of
 * reason `InvalidResponse`; the informer backs off and watches again from its last
 * resourceVersion):
 * - an event over {@link MAX_WATCH_EVENT_BYTES}, 16 MiB: client-go's streaming decoder
 *   (`k8s.io/apimachinery/pkg/runtime/serializer/streaming/streaming.go`, `maxBytes`) refuses
 *   larger objects with `ErrObjectTooLarge`, "object to decode was longer than maximum allowed
 *   size". The line is refused as soon as its unfinished part passes the limit, so no more than
 *   16 MiB of it is ever kept;
 * - a line that is not a JSON event with a type and an object;
 * - an event type other than ADDED, MODIFIED, DELETED, BOOKMARK and ERROR (client-go
 *   `rest/watch/decoder.go`: "got invalid watch event type", reported by `watch.StreamWatcher` as
 *   "unable to decode an event from the watch stream").
 *
 * A protobuf watch (`Content-Type: application/vnd.kubernetes.protobuf;stream=watch`) is read
 * as length-delimited frames of `metav1.WatchEvent` (`../../wire/kubernetes/framing.ts`, the same
 * 16 MiB limit, checked when a frame's length is read) and decoded to the same JSON form
 * (`../../wire/kubernetes/decode.ts`); a frame that does not decode, a body that ends inside a
 * frame, and an object in another encoding (JSON inside a protobuf stream) fail the watch in the
 * same way.
 *
 * Progress, for the idle watchdog, is an event (or the response headers), not a chunk: a line
 * that keeps streaming without ending does not keep a watch alive.
 *
 * @module
 */

import { peerText } from "../../peer_text.ts";
import { ApiError, type WatchEvent } from "../api.ts";
import type { Clock, Timer } from "../../clock.ts";
import { concatBytes } from "../../bytes.ts";
import { chunkReader } from "./body.ts";
import type { TransportResponse } from "./transport.ts";
import { isObject, tryParseJson } from "../json.ts";
import { type RequestContext, requestFailure } from "./request.ts";
import type { KubeObject } from "../types.ts";
import { errorText } from "../../errors.ts";
import { FrameError, LengthFrameSplitter } from "../../wire/kubernetes/framing.ts";
import {
  decodeWatchEvent as decodeProtobufEvent,
  KubeProtobufError,
} from "../../wire/kubernetes/decode.ts";

/** Most characters of a bad event line quoted in an error message. */
const LINE_SNIPPET_CHARS = 200;

/**
 * The largest watch event accepted, in bytes (client-go's streaming decoder `maxBytes`,
 * 16 MiB).
 */
export const MAX_WATCH_EVENT_BYTES = 16 * 1024 * 1024;

/** The event types of a watch (`k8s.io/apimachinery/pkg/watch` `EventType`). */
const EVENT_TYPES: ReadonlySet<string> = new Set([
  "ADDED",
  "MODIFIED",
  "DELETED",
  "BOOKMARK",
  "ERROR",
]);

/** client-go's `streaming.ErrObjectTooLarge` text. */
const OBJECT_TOO_LARGE = "object to decode was longer than maximum allowed size";

/**
 * Splits a watch body into its frames. Chunks may end anywhere, inside a frame or a multi-byte
 * character: bytes are split at `\n` before they are decoded (a newline byte never occurs inside
 * a UTF-8 sequence, and JSON escapes it inside strings). Blank lines are skipped; the tail after
 * the last newline is kept, copied, until {@link WatchFrameSplitter.end}. A frame longer than
 * `maxFrameBytes` is refused as soon as that many of its bytes have arrived.
 */
export class WatchFrameSplitter {
  readonly #decoder = new TextDecoder();
  readonly #maxFrameBytes: number;
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;

  /** A splitter refusing frames over `maxFrameBytes` (default {@link MAX_WATCH_EVENT_BYTES}). */
  constructor(maxFrameBytes = MAX_WATCH_EVENT_BYTES) {
    this.#maxFrameBytes = maxFrameBytes;
  }

  /**
   * The complete frames that `chunk` ends, trimmed.
   *
   * @throws {ApiError} (`InvalidResponse`, client-go's "object to decode was longer than maximum
   *   allowed size") for a frame over the limit; the splitter keeps nothing of it.
   */
  push(chunk: Uint8Array): string[] {
    const frames: string[] = [];
    let from = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, from)) {
      this.#check(nl - from);
      this.#add(frames, this.#take(chunk.subarray(from, nl)));
      from = nl + 1;
    }
    if (from < chunk.length) {
      this.#check(chunk.length - from);
      // A copy: a view would keep the whole chunk alive until the frame ends.
      this.#pending.push(chunk.slice(from));
      this.#pendingBytes += chunk.length - from;
    }
    return frames;
  }

  /** The frame after the last newline, if any (a body that ended without one). */
  end(): string | undefined {
    const frames: string[] = [];
    if (this.#pending.length > 0) this.#add(frames, this.#take(new Uint8Array(0)));
    return frames[0];
  }

  /** Throws when `more` bytes would make the frame under way too long. */
  #check(more: number): void {
    if (this.#pendingBytes + more <= this.#maxFrameBytes) return;
    this.#pending = [];
    this.#pendingBytes = 0;
    throw new ApiError(0, "InvalidResponse", OBJECT_TOO_LARGE);
  }

  #take(last: Uint8Array): Uint8Array {
    if (this.#pending.length === 0) return last;
    const parts = [...this.#pending, last];
    this.#pending = [];
    this.#pendingBytes = 0;
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

/** Refuses an event type other than the five of a watch, as client-go does. */
function checkEventType(type: string, ctx: Pick<RequestContext, "method" | "url">): void {
  if (EVENT_TYPES.has(type)) return;
  throw new ApiError(
    0,
    "InvalidResponse",
    requestFailure(
      ctx,
      "unable to decode an event from the watch stream: got invalid watch event type: " +
        peerText(type, LINE_SNIPPET_CHARS),
    ),
  );
}

/**
 * One protobuf watch event frame decoded.
 *
 * @throws {ApiError} (`InvalidResponse`) when the frame is not a `metav1.WatchEvent` of an
 *   object the decoder reads, or its type is not one of the five a watch has.
 */
export function decodeProtobufWatchEvent<T extends KubeObject>(
  frame: Uint8Array,
  ctx: Pick<RequestContext, "method" | "url">,
): WatchEvent<T> {
  let ev: { type: string; object: unknown };
  try {
    ev = decodeProtobufEvent(frame);
  } catch (err) {
    if (!(err instanceof KubeProtobufError)) throw err;
    throw new ApiError(
      0,
      "InvalidResponse",
      requestFailure(ctx, `invalid watch event: ${err.message}`),
      { cause: err },
    );
  }
  checkEventType(ev.type, ctx);
  return ev as unknown as WatchEvent<T>;
}

/**
 * One watch event line decoded.
 *
 * @throws {ApiError} (`InvalidResponse`) when the line is not a JSON event with a type and an
 *   object, or its type is not one of the five a watch has.
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
      requestFailure(ctx, `invalid watch event: ${peerText(line, LINE_SNIPPET_CHARS)}`),
    );
  }
  checkEventType(ev.type, ctx);
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
  /** Touched as each event arrives. */
  idle?: IdleWatchdog;
  /** The largest event accepted. @default MAX_WATCH_EVENT_BYTES */
  maxEventBytes?: number;
  /** The body is a protobuf watch (length-delimited frames), not JSON lines. */
  protobuf?: boolean;
}

/**
 * The events of a watch body, in order, until it ends. Ends without an error when `stopped()`
 * becomes true; throws `signal`'s reason when it aborted otherwise, and an {@link ApiError} for
 * a line that is not an event or is too long.
 */
export async function* watchEvents<T extends KubeObject>(
  response: Pick<TransportResponse, "body" | "chunks">,
  opts: WatchEventsOptions,
): AsyncGenerator<WatchEvent<T>, void, undefined> {
  if (opts.protobuf) {
    yield* protobufWatchEvents<T>(response, opts);
    return;
  }
  const { ctx, signal, stopped, idle } = opts;
  const splitter = new WatchFrameSplitter(opts.maxEventBytes);
  const reader = chunkReader(response, signal);
  for (;;) {
    const data = reader === undefined ? null : await reader.read();
    if (data === null) break;
    let frames: string[] = [];
    try {
      for (const piece of data) {
        const more = splitter.push(piece);
        frames = frames.length === 0 ? more : frames.concat(more);
      }
    } catch (err) {
      reader?.cancel();
      throw new ApiError(0, "InvalidResponse", requestFailure(ctx, errorText(err)), {
        cause: err,
      });
    }
    for (const frame of frames) {
      if (stopped()) return;
      const event = decodeWatchEvent<T>(frame, ctx);
      idle?.touch();
      yield event;
    }
  }
  if (stopped()) return;
  // The watch's own deadline, or the client closed.
  if (signal.aborted) throw signal.reason;
  const last = splitter.end();
  if (last !== undefined) yield decodeWatchEvent<T>(last, ctx);
}

/** {@link watchEvents} of a protobuf watch. */
async function* protobufWatchEvents<T extends KubeObject>(
  response: Pick<TransportResponse, "body" | "chunks">,
  opts: WatchEventsOptions,
): AsyncGenerator<WatchEvent<T>, void, undefined> {
  const { ctx, signal, stopped, idle } = opts;
  const splitter = new LengthFrameSplitter(opts.maxEventBytes ?? MAX_WATCH_EVENT_BYTES);
  const reader = chunkReader(response, signal);
  const failed = (err: unknown) => {
    reader?.cancel();
    return new ApiError(0, "InvalidResponse", requestFailure(ctx, errorText(err)), {
      cause: err,
    });
  };
  for (;;) {
    const data = reader === undefined ? null : await reader.read();
    if (data === null) break;
    const frames: Uint8Array[] = [];
    let failure: FrameError | undefined;
    try {
      for (const piece of data) splitter.push(piece, frames);
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      failure = err;
    }
    // The events before a bad frame are delivered, as client-go's decoder delivers them.
    for (const frame of frames) {
      if (stopped()) return;
      let event: WatchEvent<T>;
      try {
        event = decodeProtobufWatchEvent<T>(frame, ctx);
      } catch (err) {
        reader?.cancel();
        throw err;
      }
      idle?.touch();
      yield event;
    }
    if (failure !== undefined) throw failed(failure);
  }
  if (stopped()) return;
  if (signal.aborted) throw signal.reason;
  try {
    splitter.end();
  } catch (err) {
    if (!(err instanceof FrameError)) throw err;
    throw failed(err);
  }
}
