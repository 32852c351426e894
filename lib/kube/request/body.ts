/**
 * Reading answers: waiting for one or for the caller's abort, reading a body to its end.
 *
 * Ending a request: the transport gets the request's signal, and in addition every wait here
 * ends on that signal by itself (the answer through `raceAbort`, the body by cancelling its
 * stream, which also releases the connection). Measured on Deno 2.9.6: a watch whose fetch
 * signal aborted after 3,000 events and a few forced GCs never saw its pending read end.
 *
 * @module
 */

import { ABORTED, raceAbort } from "../../abort.ts";
import type { TransportResponse } from "./transport.ts";
import { TransportError } from "../../wire/http1/errors.ts";
import { concatBytes } from "../../bytes.ts";

/**
 * The largest answer to a non-watch request the client reads, in bytes: 64 MiB. client-go reads
 * whole bodies without a bound; this one keeps a broken or hostile server (or a proxy in front
 * of it) from exhausting memory with a body that does not end. The largest answers we read are
 * list pages of 500 objects (the informer's page size, client-go's pager default): 500
 * VolumeAttachments or PersistentVolumes of 2-8 KiB each are 1-4 MiB, and even the unpaginated
 * list an informer falls back to when a continue token expired, 50,000 VolumeAttachments of
 * about 1 KiB, fits. A single object is at most 1.5 MiB (etcd's default request limit).
 */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/**
 * Answers up to this size that say their length are read in one piece (`text()`, which skips the
 * per-chunk work of a stream reader); bigger ones, and those without a length (a list streamed in
 * chunks), chunk by chunk so that the request timeout counts from the last byte.
 */
export const WHOLE_BODY_MAX_BYTES = 1024 * 1024;

/**
 * The answer of `sending`, or undefined when `signal` aborts first; an answer that comes after
 * the abort has its body cancelled.
 */
export async function answerOrAbort(
  sending: Promise<TransportResponse>,
  signal: AbortSignal,
): Promise<TransportResponse | undefined> {
  const answer = await raceAbort(sending, signal);
  if (answer !== ABORTED) return answer;
  sending.then((late) => late.body?.cancel().catch(() => {}), () => {});
  return undefined;
}

/**
 * A reader of `body` that is cancelled when `signal` aborts: a pending read then ends as done
 * (the caller looks at the signal). Undefined for no body.
 */
export function bodyReader(
  body: ReadableStream<Uint8Array> | null,
  signal: AbortSignal,
): ReadableStreamDefaultReader<Uint8Array> | undefined {
  if (body === null) return undefined;
  const reader = body.getReader();
  const cancel = () => void reader.cancel(signal.reason).catch(() => {});
  if (signal.aborted) cancel();
  else signal.addEventListener("abort", cancel, { once: true });
  return reader;
}

/** The pieces of a body as {@link chunkReader} reads them. */
export interface ChunkReader {
  /** The next pieces, or null at the end of the body or once the signal aborted. */
  read(): Promise<Uint8Array[] | null>;
  /** Stops reading (a pending read ends); the connection is released. */
  cancel(): void;
}

/**
 * A reader of `response`'s body that ends when `signal` aborts: a pending read then ends as the
 * end of the body (the caller looks at the signal), as {@link bodyReader}'s does. Without a
 * stream when the transport offers `chunks()` (a watch reads one piece per event, and a stream
 * costs a pull, an enqueue and a read request for each); undefined for no body.
 */
export function chunkReader(
  response: Pick<TransportResponse, "body" | "chunks">,
  signal: AbortSignal,
): ChunkReader | undefined {
  const chunks = response.chunks?.();
  if (chunks === undefined) {
    const reader = bodyReader(response.body, signal);
    if (reader === undefined) return undefined;
    return {
      read: () => reader.read().then((next) => (next.done ? null : [next.value])),
      cancel: () => void reader.cancel().catch(() => {}),
    };
  }
  let endPending: ((value: null) => void) | undefined;
  const onAbort = () => {
    chunks.cancel();
    endPending?.(null);
  };
  if (signal.aborted) chunks.cancel();
  else signal.addEventListener("abort", onAbort, { once: true });
  return {
    read: () => {
      if (signal.aborted) return Promise.resolve(null);
      return new Promise<Uint8Array[] | null>((resolve, reject) => {
        endPending = resolve;
        chunks.next().then(
          (data) => {
            endPending = undefined;
            resolve(data);
          },
          (err: unknown) => {
            endPending = undefined;
            if (signal.aborted) resolve(null);
            else reject(err);
          },
        );
      });
    },
    cancel: () => {
      signal.removeEventListener("abort", onAbort);
      chunks.cancel();
    },
  };
}

const UTF8 = new TextDecoder();

/** How {@link readText} reads. */
export interface ReadTextOptions {
  /** The most bytes kept; past them the body is cancelled. @default MAX_BODY_BYTES */
  maxBytes?: number;
  /** Called as each chunk arrives. */
  onChunk?: () => void;
}

/**
 * A body read to its end (or until `signal` aborts) as UTF-8.
 *
 * @throws {TransportError} (`too-large`) once the body passes `maxBytes`; the stream is cancelled
 *   and nothing more is kept.
 */
export async function readText(
  body: ReadableStream<Uint8Array> | null,
  signal: AbortSignal,
  opts: ReadTextOptions = {},
): Promise<string> {
  const bytes = await readBytes(body, signal, opts);
  return bytes.length === 0 ? "" : UTF8.decode(bytes);
}

/**
 * A body read to its end (or until `signal` aborts) as bytes, with the limit of
 * {@link readText}.
 *
 * @throws {TransportError} (`too-large`) once the body passes `maxBytes`.
 */
export async function readBytes(
  body: ReadableStream<Uint8Array> | null,
  signal: AbortSignal,
  opts: ReadTextOptions = {},
): Promise<Uint8Array> {
  const maxBytes = opts.maxBytes ?? MAX_BODY_BYTES;
  const reader = bodyReader(body, signal);
  if (reader === undefined) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const next = await reader.read();
    if (next.done) break;
    opts.onChunk?.();
    length += next.value.length;
    if (length > maxBytes) {
      reader.cancel().catch(() => {});
      throw new TransportError("too-large", `the answer's body is over ${maxBytes} bytes`);
    }
    chunks.push(next.value);
  }
  return chunks.length === 1 ? chunks[0]! : concatBytes(chunks);
}
