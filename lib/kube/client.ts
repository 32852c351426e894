/**
 * The production {@link KubeApi}: REST over `fetch`, with raw JSON in and out.
 *
 * Where to connect and how to authenticate comes from a {@link ClusterConnection}
 * (`./config.ts`): the client builds ONE transport from its TLS material on first use
 * (`./transport.ts`: a `Deno.HttpClient`, or a `node:https` agent for what that cannot do), and
 * asks the connection for the credential headers of every request, so rotated tokens are picked
 * up. A new connection pool per request would leak file descriptors (client-node 1.x did that:
 * https://github.com/kubernetes-client/javascript/issues/2893).
 *
 * @module
 */

import {
  ApiError,
  type KubeApi,
  type ListOptions,
  type ObjectList,
  type ObjectOptions,
  type Patch,
  type Resource,
  type WatchEvent,
  type WatchOptions,
} from "./api.ts";
import type { Logger } from "../observe/logger.ts";
import type { ClusterConnection } from "./config.ts";
import {
  createTransport,
  type ProxyEnvironment,
  type Transport,
  type TransportResponse,
} from "./transport.ts";
import { isTransportError } from "../wire/http1/errors.ts";
import { errorText } from "../errors.ts";
import { ABORTED, raceAbort } from "../abort.ts";
import type { KubeObject, Status } from "./types.ts";
import { type Clock, realClock, type Timer } from "../clock.ts";

/** Something that paces requests (client-go's QPS/burst token bucket). */
export interface RequestRateLimiter {
  /** Resolves when a request may go; rejects with the signal's reason when it aborts. */
  take(signal?: AbortSignal): Promise<void>;
}

/** What {@link KubeClientDeps.onRequest} learns about each request. */
export interface RequestInfo {
  /** HTTP method. */
  method: string;
  /** API verb: get, list, watch, create, update, patch, delete. */
  verb: string;
  /** Plural resource name. */
  resource: string;
  /** `status` or "". */
  subresource: string;
  /** `host:port` of the API server. */
  host: string;
  /** HTTP status code; 0 when no answer came. For a watch, the code of the response headers. */
  code: number;
  /** Duration until the answer (for a watch: until the response headers). */
  seconds: number;
}

/** What {@link KubeClientDeps.onRetry} learns about each retry. */
export interface RetryInfo {
  /** HTTP method of the request. */
  method: string;
  /** API verb: get, list, create, update, patch, delete. */
  verb: string;
  /** Plural resource name. */
  resource: string;
  /** `host:port` of the API server, as client-go's `host` label. */
  host: string;
  /** HTTP status code of the answer that is retried; 0 for a broken connection. */
  code: number;
  /** 1 for the first retry, up to {@link MAX_RETRIES}. */
  attempt: number;
  /** The wait before the retry, in milliseconds. */
  delayMs: number;
}

/**
 * Retries of one request after a retryable answer, as client-go's `rest.Request` (`maxRetries`
 * 10 in `rest/request.go`, counted in `rest/with_retry.go` `IsNextRetry`): up to 11 tries.
 */
export const MAX_RETRIES = 10;

/**
 * The longest wait a `Retry-After` header can impose on one retry. client-go waits whatever the
 * server says; a capped wait keeps one answer from parking a worker for minutes (the retry still
 * ends at the caller's signal or after {@link MAX_RETRIES}).
 */
export const MAX_RETRY_AFTER_MS = 30_000;

/**
 * The wait client-go makes up for a broken connection of a GET (`retryAfterResponse()` in
 * `rest/with_retry.go`: an artificial `Retry-After: 1`).
 */
const CONNECTION_RETRY_MS = 1_000;

/** Collaborators of a {@link KubeClient}. */
export interface KubeClientDeps {
  /** Server, TLS and credentials, e.g. from {@link import("./config.ts").loadConnection}. */
  connection: ClusterConnection;
  /** Awaited before every request except watches. */
  rateLimiter?: RequestRateLimiter;
  /**
   * Called once per try when it ends (watch: when its response headers arrive); a request that
   * is retried reports each try.
   */
  onRequest?: (info: RequestInfo) => void;
  /** Called before each retry (see {@link KubeClient}); the retry is also logged at `--v=4`. */
  onRetry?: (info: RetryInfo) => void;
  /** Timers of retry waits and of the watch idle timeout. @default realClock */
  clock?: Clock;
  /**
   * Request log at verbosity 6, as client-go's round tripper logs (`"HTTP" verb URL status
   * milliseconds`); never headers or bodies.
   */
  log?: Logger;
}

/** Options of a {@link KubeClient}. */
export interface KubeClientOptions {
  /** `User-Agent` header; default `csi-attacher/unknown`. */
  userAgent?: string;
  /**
   * Timeout of one non-watch request, counted from the last byte received (so a large answer
   * that keeps arriving is not cut short); default 30 s.
   */
  timeoutMs?: number;
  /** Extra time a watch may run past its `timeoutSeconds` before it is cut; default 30 s. */
  watchGraceMs?: number;
  /**
   * The proxy variables of the process environment (`main.ts` reads them): when one applies to
   * the server's scheme, requests go through `fetch`, which honours them and `NO_PROXY`. Unset:
   * no proxy.
   */
  proxyEnvironment?: ProxyEnvironment;
}

interface Target {
  namespace?: string;
  name?: string;
  subresource?: string;
  query?: Record<string, string>;
}

interface Body {
  contentType: string;
  data: string;
}

/** True for a JSON object (not an array, not null). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** True when a body is a `v1.Status`. */
function isStatus(value: unknown): value is Status {
  return isObject(value) && value.kind === "Status";
}

/** Go's `url.Error` operation name: `Get`, `Patch`, … */
function goOp(method: string): string {
  return method.charAt(0) + method.slice(1).toLowerCase();
}

/** The reason client-go gives an error answer without a Status body. */
function reasonForCode(code: number): string {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

/** Parses JSON, or undefined when the text is not JSON. */
function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/**
 * The {@link ApiError} for an error answer: the Status' reason and message when the body is a
 * Status, else `the server responded with HTTP <code>` and the start of the body.
 */
export function errorFromResponse(code: number, text: string): ApiError {
  const body = tryParseJson(text);
  if (isStatus(body)) {
    return new ApiError(
      code,
      body.reason || reasonForCode(code),
      body.message || `the server responded with HTTP ${code}`,
    );
  }
  const snippet = text.trim().replace(/\s+/g, " ").slice(0, 200);
  return new ApiError(
    code,
    reasonForCode(code),
    `the server responded with HTTP ${code}` + (snippet === "" ? "" : `: ${snippet}`),
  );
}

/**
 * The `Retry-After` of an answer in milliseconds (capped at {@link MAX_RETRY_AFTER_MS}), or
 * undefined when the header is missing or not a number of seconds (client-go's
 * `retryAfterSeconds` reads it with `strconv.Atoi`; an HTTP date is not understood either).
 */
export function retryAfterMs(header: string | undefined): number | undefined {
  if (header === undefined || !/^\s*[+-]?[0-9]+\s*$/.test(header)) return undefined;
  const seconds = Number(header.trim());
  if (!Number.isSafeInteger(seconds)) return undefined;
  return Math.min(Math.max(0, seconds) * 1000, MAX_RETRY_AFTER_MS);
}

/**
 * True when a request failed because the connection broke: reset by the peer, closed before the
 * answer (EOF), or a broken pipe (client-go's `net.IsConnectionReset` / `net.IsProbableEOF`,
 * k8s.io/apimachinery/pkg/util/net/http.go): an `ApiError` of reason `ConnectionError` whose cause
 * is a `TransportError` of kind `reset` or `eof`. A timeout is not: the request may still be
 * running on the server; nor is a refused connection or a failed TLS handshake.
 */
export function isBrokenConnection(err: unknown): boolean {
  if (!(err instanceof ApiError) || err.reason !== "ConnectionError") return false;
  return isTransportError(err.cause, "reset", "eof");
}

/**
 * Splits a watch body into its frames: kube-apiserver writes one JSON object per line (Go's
 * `json.Encoder`). Chunks may end anywhere, inside a frame or a multi-byte character: bytes are
 * split at `\n` before they are decoded (a newline byte never occurs inside a UTF-8 sequence, and
 * JSON escapes it inside strings). Blank lines are skipped; the tail after the last newline is
 * kept, copied, until {@link WatchFrameSplitter.end}.
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

/** The bytes of `parts` in one array. */
function concatBytes(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/*
 * Ending a request: the transport gets the request's signal, and in addition every wait here
 * ends on that signal by itself (the answer through raceAbort, the body by cancelling its
 * stream, which also releases the connection). Measured on Deno 2.9.6: a watch whose fetch
 * signal aborted after 3,000 events and a few forced GCs never saw its pending read end.
 */

/**
 * The answer of `sending`, or undefined when `signal` aborts first; an answer that comes after
 * the abort has its body cancelled.
 */
async function answerOrAbort(
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
function bodyReader(
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

const UTF8 = new TextDecoder();

/**
 * Answers up to this size that say their length are read in one piece (`Response.text()`, which
 * skips the per-chunk work of a stream reader); bigger ones, and those without a length (a list
 * streamed in chunks), chunk by chunk so that the request timeout counts from the last byte.
 */
const WHOLE_BODY_MAX_BYTES = 1024 * 1024;

/**
 * A body read to its end (or until `signal` aborts) as UTF-8; `onChunk` is called as each chunk
 * arrives.
 */
async function readText(
  body: ReadableStream<Uint8Array> | null,
  signal: AbortSignal,
  onChunk?: () => void,
): Promise<string> {
  const reader = bodyReader(body, signal);
  if (reader === undefined) return "";
  const chunks: Uint8Array[] = [];
  for (;;) {
    const next = await reader.read();
    if (next.done) break;
    onChunk?.();
    chunks.push(next.value);
  }
  return chunks.length === 0 ? "" : UTF8.decode(concatBytes(chunks));
}

/**
 * The wait before retrying a try that ended with `answer` or `failure`, or undefined when it is
 * not retried. As client-go (`rest/with_retry.go` `IsNextRetry` and `checkWait`): `429` and any
 * `5xx` answer with a `Retry-After` in seconds, for every method (our bodies are strings, so
 * always replayable); a broken connection of a GET after 1 s. Nothing else.
 */
function retryDelayMs(
  method: string,
  answer: { status: number; text: string; retryAfter?: string } | undefined,
  failure: unknown,
): number | undefined {
  if (answer === undefined) {
    return method === "GET" && isBrokenConnection(failure) ? CONNECTION_RETRY_MS : undefined;
  }
  if (answer.status !== 429 && answer.status < 500) return undefined;
  return retryAfterMs(answer.retryAfter);
}

/**
 * Calls `onIdle` once when {@link IdleWatchdog.touch} has not been called for `ms` on `clock`.
 * One timer at a time: a touch only notes the time, and the timer, when it fires early, waits
 * for the rest.
 */
export class IdleWatchdog {
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
 * A {@link KubeApi} over HTTP(S). One keep-alive connection pool per client; call
 * {@link KubeClient.close} when done. The constructor does no I/O.
 *
 * Guarantees: every method rejects with {@link ApiError} for an error answer (code, Status
 * reason and message) or a failed connection (code 0, reason `ConnectionError`, or `Timeout` when
 * the request timed out), and with the signal's reason when `opts.signal` aborts.
 *
 * Retries, as client-go's `rest.Request` makes them: a `429` or `5xx` answer with a
 * `Retry-After` of whole seconds is sent again after that delay (capped at
 * {@link MAX_RETRY_AFTER_MS}), for every method; a GET whose connection broke before the answer
 * after 1 s; at most {@link MAX_RETRIES} times, each try taking a token from the rate limiter,
 * reported to `onRetry` and logged at verbosity 4. The wait ends early when the caller's signal
 * aborts (a Lease renewal retries only within its renew deadline).
 */
export class KubeClient implements KubeApi {
  readonly #server: URL;
  readonly #connection: ClusterConnection;
  readonly #rateLimiter: RequestRateLimiter | undefined;
  readonly #onRequest: ((info: RequestInfo) => void) | undefined;
  readonly #onRetry: ((info: RetryInfo) => void) | undefined;
  readonly #clock: Clock;
  readonly #log: Logger | undefined;
  readonly #userAgent: string;
  readonly #timeoutMs: number;
  readonly #watchGraceMs: number;
  readonly #proxyEnvironment: ProxyEnvironment;
  #transport: Promise<Transport> | undefined;
  /** One controller per request or watch under way; {@link close} aborts them. */
  readonly #inflight = new Set<AbortController>();
  #closed = false;

  /** @throws {TypeError} when the server URL is invalid. */
  constructor(deps: KubeClientDeps, options: KubeClientOptions = {}) {
    const connection = deps.connection;
    let server: URL;
    try {
      server = new URL(connection.server);
    } catch (err) {
      throw new TypeError(`invalid API server URL "${connection.server}"`, { cause: err });
    }
    if (server.protocol !== "https:" && server.protocol !== "http:") {
      throw new TypeError(`unsupported API server URL scheme "${server.protocol}"`);
    }
    this.#server = server;
    this.#connection = connection;

    this.#rateLimiter = deps.rateLimiter;
    this.#onRequest = deps.onRequest;
    this.#onRetry = deps.onRetry;
    this.#clock = deps.clock ?? realClock;
    this.#log = deps.log;
    this.#userAgent = options.userAgent ?? "csi-attacher/unknown";
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#watchGraceMs = options.watchGraceMs ?? 30_000;
    this.#proxyEnvironment = options.proxyEnvironment ?? {};
    if (!(this.#timeoutMs > 0) || !(this.#watchGraceMs >= 0)) {
      throw new RangeError("timeoutMs must be positive and watchGraceMs not negative");
    }
  }

  async list<T extends KubeObject>(
    res: Resource,
    opts: ListOptions = {},
  ): Promise<ObjectList<T>> {
    const query: Record<string, string> = {};
    if (opts.resourceVersion !== undefined) query.resourceVersion = opts.resourceVersion;
    if (opts.limit !== undefined && opts.limit > 0) query.limit = String(opts.limit);
    if (opts.continue !== undefined && opts.continue !== "") query.continue = opts.continue;
    const body = await this.#call("GET", "list", res, { namespace: opts.namespace, query }, {
      signal: opts.signal,
    });
    if (!isObject(body) || !Array.isArray(body.items)) {
      throw new ApiError(200, "InvalidResponse", `list of ${res.plural}: the answer is not a list`);
    }
    const meta = isObject(body.metadata) ? body.metadata : {};
    const kind = typeof body.kind === "string" && body.kind.endsWith("List")
      ? body.kind.slice(0, -"List".length)
      : undefined;
    const apiVersion = typeof body.apiVersion === "string" ? body.apiVersion : undefined;
    const items: T[] = [];
    for (const item of body.items) {
      if (!isObject(item) || !isObject(item.metadata)) continue;
      // The real server leaves kind and apiVersion out of list items; watch events have them.
      if (item.kind === undefined && kind !== undefined) item.kind = kind;
      if (item.apiVersion === undefined && apiVersion !== undefined) item.apiVersion = apiVersion;
      items.push(item as unknown as T);
    }
    const rv = typeof meta.resourceVersion === "string" ? meta.resourceVersion : "";
    const next = typeof meta.continue === "string" ? meta.continue : "";
    return next === ""
      ? { items, resourceVersion: rv }
      : { items, resourceVersion: rv, continue: next };
  }

  watch<T extends KubeObject>(res: Resource, opts: WatchOptions): AsyncIterable<WatchEvent<T>> {
    return this.#watch<T>(res, opts);
  }

  async get<T extends KubeObject>(
    res: Resource,
    name: string,
    opts: ObjectOptions = {},
  ): Promise<T> {
    const target = { namespace: this.#namespace(res, opts.namespace, name), name };
    return this.#object<T>(await this.#call("GET", "get", res, target, { signal: opts.signal }));
  }

  async create<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    const ns = this.#namespace(res, opts.namespace ?? obj.metadata.namespace, obj.metadata.name);
    const body = { contentType: "application/json", data: JSON.stringify(obj) };
    return this.#object<T>(
      await this.#call("POST", "create", res, { namespace: ns }, { body, signal: opts.signal }),
    );
  }

  async update<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    const name = obj.metadata.name;
    const ns = this.#namespace(res, opts.namespace ?? obj.metadata.namespace, name);
    const body = { contentType: "application/json", data: JSON.stringify(obj) };
    return this.#object<T>(
      await this.#call("PUT", "update", res, { namespace: ns, name }, {
        body,
        signal: opts.signal,
      }),
    );
  }

  async patch<T extends KubeObject>(
    res: Resource,
    name: string,
    patch: Patch,
    opts: ObjectOptions & { subresource?: "status" } = {},
  ): Promise<T> {
    const target = {
      namespace: this.#namespace(res, opts.namespace, name),
      name,
      subresource: opts.subresource,
    };
    const contentType = patch.type === "merge"
      ? "application/merge-patch+json"
      : "application/json-patch+json";
    const body = { contentType, data: JSON.stringify(patch.body) };
    return this.#object<T>(
      await this.#call("PATCH", "patch", res, target, { body, signal: opts.signal }),
    );
  }

  async delete(res: Resource, name: string, opts: ObjectOptions = {}): Promise<void> {
    const target = { namespace: this.#namespace(res, opts.namespace, name), name };
    await this.#call("DELETE", "delete", res, target, { signal: opts.signal });
  }

  /** Closes the connection pool and ends the requests and watches under way. Later requests reject. */
  async close(): Promise<void> {
    this.#closed = true;
    const closed = new ApiError(0, "ConnectionError", "the Kubernetes client is closed");
    for (const controller of this.#inflight) controller.abort(closed);
    this.#inflight.clear();
    const pending = this.#transport;
    this.#transport = undefined;
    if (pending === undefined) return;
    // A build that failed left nothing to close; its error already reached the request that
    // triggered it.
    const transport = await pending.then((t) => t, () => undefined);
    transport?.close();
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The namespace of a request on one object; required for namespaced resources. */
  #namespace(res: Resource, namespace: string | undefined, name: string): string | undefined {
    if (!res.namespaced) return undefined;
    if (namespace === undefined || namespace === "") {
      throw new TypeError(`${res.plural} "${name}": a namespace is required`);
    }
    return namespace;
  }

  #object<T extends KubeObject>(body: unknown): T {
    if (!isObject(body) || !isObject(body.metadata)) {
      throw new ApiError(200, "InvalidResponse", "the answer is not a Kubernetes object");
    }
    return body as unknown as T;
  }

  #url(res: Resource, target: Target): URL {
    const url = new URL(this.#server.href);
    let path = url.pathname.replace(/\/+$/, "");
    path += res.group === "" ? `/api/${res.version}` : `/apis/${res.group}/${res.version}`;
    if (res.namespaced && target.namespace !== undefined) {
      path += `/namespaces/${encodeURIComponent(target.namespace)}`;
    }
    path += `/${res.plural}`;
    if (target.name !== undefined) path += `/${encodeURIComponent(target.name)}`;
    if (target.subresource !== undefined) path += `/${target.subresource}`;
    url.pathname = path;
    url.search = new URLSearchParams(target.query ?? {}).toString();
    return url;
  }

  /** The one transport of this client, built on first use. */
  #getTransport(): Promise<Transport> {
    if (this.#closed) {
      return Promise.reject(new ApiError(0, "ConnectionError", "the Kubernetes client is closed"));
    }
    if (this.#transport === undefined) {
      const building = createTransport(this.#server, this.#connection, this.#proxyEnvironment);
      this.#transport = building;
      // A failed build (e.g. client-node failing on a proxy-url) is retried by the next request.
      building.catch((err: unknown) => {
        if (this.#transport === building) this.#transport = undefined;
        return err;
      });
    }
    return this.#transport;
  }

  /** Request header lines with fresh credentials; a list is sent as repeated lines. */
  async #headers(body?: Body): Promise<[string, string][]> {
    const lines: [string, string][] = [];
    for (const [name, value] of Object.entries(await this.#connection.headers())) {
      for (const v of Array.isArray(value) ? value : [value]) lines.push([name, v]);
    }
    lines.push(["Accept", "application/json"], ["User-Agent", this.#userAgent]);
    if (body !== undefined) lines.push(["Content-Type", body.contentType]);
    return lines;
  }

  #report(
    method: string,
    verb: string,
    res: Resource,
    url: URL,
    subresource: string | undefined,
    code: number,
    start: number,
  ): void {
    const seconds = (performance.now() - start) / 1000;
    if (this.#log?.enabled(6)) {
      this.#log.v(6).info("HTTP", {
        verb: method,
        url: url.href,
        status: code,
        milliseconds: Math.round(seconds * 1000),
      });
    }
    this.#onRequest?.({
      method,
      verb,
      resource: res.plural,
      subresource: subresource ?? "",
      host: url.host,
      code,
      seconds,
    });
  }

  /**
   * One non-watch request: rate limit, send, parse; retried as client-go retries (see
   * {@link retryDelayMs}), each try taking its own token from the rate limiter.
   */
  async #call(
    method: string,
    verb: string,
    res: Resource,
    target: Target,
    opts: { body?: Body; signal?: AbortSignal },
  ): Promise<unknown> {
    const url = this.#url(res, target);
    for (let attempt = 1;; attempt++) {
      await this.#rateLimiter?.take(opts.signal);
      const start = performance.now();
      let code = 0;
      let answer: { status: number; text: string; retryAfter?: string } | undefined;
      let failure: unknown;
      try {
        answer = await this.#send(method, url, opts.body, opts.signal);
        code = answer.status;
      } catch (err) {
        failure = err;
      } finally {
        this.#report(method, verb, res, url, target.subresource, code, start);
      }
      const delayMs = attempt > MAX_RETRIES || opts.signal?.aborted
        ? undefined
        : retryDelayMs(method, answer, failure);
      if (delayMs !== undefined) {
        this.#retrying(method, verb, res, url, code, attempt, delayMs);
        await this.#clock.sleep(delayMs, opts.signal);
        continue;
      }
      if (answer === undefined) throw failure;
      if (code < 200 || code > 299) throw errorFromResponse(code, answer.text);
      const parsed = tryParseJson(answer.text);
      if (parsed === undefined) {
        throw new ApiError(
          code,
          "InvalidResponse",
          `${goOp(method)} "${url.href}": the answer is not JSON`,
        );
      }
      return parsed;
    }
  }

  /** Counts and logs one retry, as client-go logs it at level 4. */
  #retrying(
    method: string,
    verb: string,
    res: Resource,
    url: URL,
    code: number,
    attempt: number,
    delayMs: number,
  ): void {
    this.#log?.v(4).info("Got a Retry-After response, retrying", {
      verb: method,
      url: url.href,
      status: code,
      attempt,
      retryAfterMs: delayMs,
    });
    this.#onRetry?.({
      method,
      verb,
      resource: res.plural,
      host: url.host,
      code,
      attempt,
      delayMs,
    });
  }

  /**
   * A controller that ends one request: aborted by the caller's signal (with its reason), by a
   * timeout, or by {@link close}. `dispose` unsubscribes from the caller's signal.
   */
  #begin(signal: AbortSignal | undefined): { controller: AbortController; dispose(): void } {
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    this.#inflight.add(controller);
    return {
      controller,
      dispose: () => {
        signal?.removeEventListener("abort", onAbort);
        this.#inflight.delete(controller);
      },
    };
  }

  /** Sends a request and reads the whole answer. */
  async #send(
    method: string,
    url: URL,
    body: Body | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ status: number; text: string; retryAfter?: string }> {
    signal?.throwIfAborted();
    const transport = await this.#getTransport();
    const headers = await this.#headers(body);
    signal?.throwIfAborted();
    if (this.#closed) {
      throw new ApiError(0, "ConnectionError", "the Kubernetes client is closed");
    }
    const generation = transport.generation;
    const timeoutMs = this.#timeoutMs;
    const { controller, dispose } = this.#begin(signal);
    // The timeout counts from the last byte received, so a large answer that keeps arriving
    // (a big list) is never cut short; a silent connection is.
    let lastProgress = performance.now();
    const onTimer = () => {
      const left = lastProgress + timeoutMs - performance.now();
      if (left > 0) {
        timer = setTimeout(onTimer, left);
        return;
      }
      controller.abort(
        new ApiError(
          0,
          "Timeout",
          `${goOp(method)} "${url.href}": request timed out after ${timeoutMs / 1000}s`,
        ),
      );
      // No answer on this connection: the pooled ones may have gone silent too.
      transport.renew(generation);
    };
    let timer = setTimeout(onTimer, timeoutMs);
    try {
      const response = await answerOrAbort(
        transport.send(url, { method, headers, body: body?.data, signal: controller.signal }),
        controller.signal,
      );
      if (response === undefined) throw controller.signal.reason;
      lastProgress = performance.now();
      const length = Number(response.headers.get("content-length") ?? NaN);
      let text: string;
      if (length <= WHOLE_BODY_MAX_BYTES && response.text !== undefined) {
        const whole = await raceAbort(response.text(), controller.signal);
        if (whole === ABORTED) throw controller.signal.reason;
        text = whole;
      } else {
        text = await readText(
          response.body,
          controller.signal,
          () => lastProgress = performance.now(),
        );
      }
      if (controller.signal.aborted) throw controller.signal.reason;
      return {
        status: response.status,
        text,
        retryAfter: response.headers.get("retry-after") ?? undefined,
      };
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      // A timeout, or close().
      if (controller.signal.aborted) throw controller.signal.reason;
      throw this.#connectionError(method, url, err);
    } finally {
      clearTimeout(timer);
      dispose();
    }
  }

  #idleWatchClosed(url: URL, ms: number): void {
    this.#log?.v(4).info("Watch delivered neither an event nor a bookmark, closing it", {
      url: url.href,
      idleMs: ms,
    });
  }

  #connectionError(method: string, url: URL, err: unknown): ApiError {
    if (err instanceof ApiError) return err;
    return new ApiError(
      0,
      "ConnectionError",
      `${goOp(method)} "${url.href}": ${errorText(err)}`,
      { cause: err },
    );
  }

  async *#watch<T extends KubeObject>(
    res: Resource,
    opts: WatchOptions,
  ): AsyncGenerator<WatchEvent<T>, void, undefined> {
    const { signal } = opts;
    if (signal.aborted) return;
    const query: Record<string, string> = {
      watch: "true",
      resourceVersion: opts.resourceVersion,
      timeoutSeconds: String(opts.timeoutSeconds),
    };
    if (opts.allowWatchBookmarks) query.allowWatchBookmarks = "true";
    if (opts.sendInitialEvents) {
      query.sendInitialEvents = "true";
      query.resourceVersionMatch = "NotOlderThan";
    }
    const url = this.#url(res, { namespace: opts.namespace, query });
    const transport = await this.#getTransport();
    const headers = await this.#headers();
    if (signal.aborted) return;
    if (this.#closed) {
      throw new ApiError(0, "ConnectionError", "the Kubernetes client is closed");
    }
    const generation = transport.generation;

    // Ends the watch: the caller's abort, the idle watchdog, the guard below or close(). The
    // wait for the answer, or for the next chunk of the body, then ends at once.
    const { controller, dispose } = this.#begin(signal);
    let guardError: ApiError | undefined;
    const guardMs = opts.timeoutSeconds * 1000 + this.#watchGraceMs;
    const guard = setTimeout(() => {
      guardError = new ApiError(
        0,
        "Timeout",
        `${goOp("GET")} "${url.href}": watch still open ${guardMs / 1000}s after it started`,
      );
      controller.abort(guardError);
    }, guardMs);
    const idle = opts.idleTimeoutMs === undefined
      ? undefined
      : new IdleWatchdog(this.#clock, opts.idleTimeoutMs, () => controller.abort());
    const start = performance.now();
    let reported = false;
    try {
      const response = await answerOrAbort(
        transport.send(url, { method: "GET", headers, signal: controller.signal }),
        controller.signal,
      );
      if (signal.aborted || idle?.fired) {
        response?.body?.cancel().catch(() => {});
        return;
      }
      if (response === undefined) throw controller.signal.reason;
      reported = true;
      this.#report("GET", "watch", res, url, undefined, response.status, start);
      if (response.status !== 200) {
        const text = await readText(response.body, controller.signal);
        if (controller.signal.aborted) throw controller.signal.reason;
        throw errorFromResponse(response.status, text);
      }
      const splitter = new WatchFrameSplitter();
      const reader = bodyReader(response.body, controller.signal);
      for (;;) {
        const next = reader === undefined ? { done: true as const } : await reader.read();
        if (next.done) break;
        idle?.touch();
        for (const frame of splitter.push(next.value)) {
          // Nothing is delivered once the caller aborted, even frames already received.
          if (signal.aborted || idle?.fired) return;
          yield this.#watchEvent<T>(frame, url);
        }
      }
      if (signal.aborted || idle?.fired) return;
      // The guard's timeout, or close().
      if (controller.signal.aborted) throw controller.signal.reason;
      const last = splitter.end();
      if (last !== undefined) yield this.#watchEvent<T>(last, url);
    } catch (err) {
      if (signal.aborted || idle?.fired) return;
      if (guardError !== undefined) throw guardError;
      if (err instanceof ApiError) throw err;
      if (!reported) this.#report("GET", "watch", res, url, undefined, 0, start);
      throw this.#connectionError("GET", url, err);
    } finally {
      clearTimeout(guard);
      idle?.stop();
      dispose();
      // A watch left early (the caller stopped reading, an error) releases its stream; after the
      // end of the body this changes nothing.
      controller.abort();
      if (idle?.fired) {
        this.#idleWatchClosed(url, idle.ms);
        // The watch's connection went silent: new requests must not go out on it, nor on the
        // other pooled connections to the same server (behind the same load balancer).
        transport.renew(generation);
      }
    }
  }

  #watchEvent<T extends KubeObject>(line: string, url: URL): WatchEvent<T> {
    const ev = tryParseJson(line);
    if (!isObject(ev) || typeof ev.type !== "string" || !isObject(ev.object)) {
      throw new ApiError(
        0,
        "InvalidResponse",
        `${goOp("GET")} "${url.href}": invalid watch event: ${line.slice(0, 200)}`,
      );
    }
    return ev as unknown as WatchEvent<T>;
  }
}
