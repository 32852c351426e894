/**
 * One HTTP request over an HTTP/2 stream, as the Kubernetes client's {@link Transport} contract
 * (`../http1/api.ts`) sees it: the request's header fields (RFC 9113 §8.3.1 pseudo-headers, then
 * the caller's lines with lowercase names, connection-specific fields refused as §8.2.2 says), and
 * the answer (status, headers, the body as `text()`, `chunks()` or a stream) over a
 * {@link StreamingStream}, its failures as {@link TransportError}s of the kinds the HTTP/1.1
 * transport uses.
 *
 * @module
 */

import type { RequestUrl, TransportRequest, TransportResponse } from "../http1/api.ts";
import { TransportError } from "../http1/errors.ts";
import type { HeaderField } from "./hpack.ts";
import { StreamError } from "./stream_error.ts";
import type { StreamingStream } from "./session_types.ts";
import { readAllChunks } from "../../bytes.ts";

const UTF8 = new TextDecoder();
const UTF8_ENCODER = new TextEncoder();
const EMPTY = new Uint8Array(0);

/** Fields HTTP/2 forbids in a request (RFC 9113 §8.2.2), or that it carries otherwise (Host). */
const CONNECTION_FIELDS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "host",
]);

/**
 * The header fields of `request` to `url`: `:method`, `:scheme`, `:authority`, `:path`, the
 * caller's lines in order (names lowercased, §8.2.1), and `content-length` for a body.
 *
 * @throws {TypeError} for a field name or value HTTP/1.1 could not send either, or a
 *   connection-specific field.
 */
export function requestFields(url: RequestUrl, request: TransportRequest): {
  fields: HeaderField[];
  body: Uint8Array;
} {
  const fields: HeaderField[] = [
    [":method", request.method],
    [":scheme", url.protocol === "https:" ? "https" : "http"],
    [":authority", url.host],
    [":path", `${url.pathname}${url.search}`],
  ];
  for (const [name, value] of request.headers) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\r\n\0]/.test(value)) {
      throw new TypeError(`invalid header line "${name}"`);
    }
    const lower = name.toLowerCase();
    if (CONNECTION_FIELDS.has(lower) || (lower === "te" && value.trim() !== "trailers")) {
      throw new TypeError(`header "${name}" is connection-specific: not sent over HTTP/2`);
    }
    fields.push([lower, value]);
  }
  const body = request.body === undefined ? EMPTY : UTF8_ENCODER.encode(request.body);
  if (request.body !== undefined) fields.push(["content-length", String(body.length)]);
  return { fields, body };
}

/**
 * The {@link TransportError} of a failed stream, with the kinds of the HTTP/1.1 transport: the
 * connection ended or the stream was reset or refused: `reset` (a GET may be sent again, as
 * client-go retries a reset connection); a protocol error: `protocol`; a body or header list over
 * its limit: `too-large`.
 */
export function transportErrorOf(err: unknown): unknown {
  if (!(err instanceof StreamError)) return err;
  const f = err.failure;
  switch (f.kind) {
    case "too-large":
    case "headers-too-large":
      return new TransportError("too-large", err.message, { cause: err });
    case "protocol":
      return new TransportError("protocol", err.message, { cause: err });
    default:
      return new TransportError("reset", `http2: ${err.message}`, { cause: err });
  }
}

/** Response headers over HPACK fields: {@link get} joins repeated fields with ", " as `fetch`. */
class FieldHeaders {
  readonly #fields: HeaderField[];

  constructor(fields: HeaderField[]) {
    this.#fields = fields;
  }

  get(name: string): string | null {
    const lower = name.toLowerCase();
    let out: string | null = null;
    for (const [n, v] of this.#fields) {
      if (n === lower) out = out === null ? v : `${out}, ${v}`;
    }
    return out;
  }
}

/**
 * The answer of `stream` whose `head` came: aborting `signal` resets the stream, and a read then
 * rejects with the signal's reason; `done` is called once, when the body ended, failed or was
 * abandoned.
 *
 * @throws {TransportError} `protocol` when `:status` is missing or not three digits.
 */
export function responseOf(
  head: HeaderField[],
  stream: StreamingStream,
  signal: AbortSignal,
  maxBodyBytes: number | undefined,
  done: () => void,
): TransportResponse {
  const statusText = head.find(([n]) => n === ":status")?.[1];
  if (statusText === undefined || !/^[1-9]\d\d$/.test(statusText)) {
    stream.cancel();
    done();
    throw new TransportError("protocol", "malformed HTTP/2 response: no valid :status");
  }
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    signal.removeEventListener("abort", onAbort);
    done();
  };
  const onAbort = () => {
    stream.cancel();
    finish();
  };
  signal.addEventListener("abort", onAbort, { once: true });
  let used = false;
  const use = () => {
    if (used) throw new TypeError("the body was already read");
    used = true;
  };
  const next = async (): Promise<Uint8Array[] | null> => {
    try {
      const data = await stream.body.next();
      if (data === null) finish();
      return data;
    } catch (err) {
      finish();
      if (signal.aborted) throw signal.reason;
      if (
        err instanceof StreamError && err.failure.kind === "too-large" && maxBodyBytes !== undefined
      ) {
        throw new TransportError("too-large", `the answer's body is over ${maxBodyBytes} bytes`, {
          cause: err,
        });
      }
      throw transportErrorOf(err);
    }
  };
  const cancel = () => {
    stream.cancel();
    finish();
  };
  let readable: ReadableStream<Uint8Array> | undefined;
  return {
    status: Number(statusText),
    headers: new FieldHeaders(head),
    get body() {
      if (readable === undefined) {
        use();
        readable = new ReadableStream<Uint8Array>({
          async pull(controller) {
            const data = await next();
            if (data === null) controller.close();
            else for (const part of data) controller.enqueue(part);
          },
          cancel,
        }, { highWaterMark: 0 });
      }
      return readable;
    },
    text: async () => {
      use();
      return UTF8.decode(await readAllChunks(next));
    },
    bytes: () => {
      use();
      return readAllChunks(next);
    },
    chunks: () => {
      use();
      return { next, cancel };
    },
  };
}
