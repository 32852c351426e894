/**
 * The production {@link KubeApi}: REST over the HTTP/1.1 transport (directly or through an HTTP
 * proxy's tunnel), with raw JSON out and JSON or Kubernetes protobuf in
 * (`./request/protobuf_answer.ts`: reads of the attacher's kinds ask for protobuf, every answer is
 * read by its `Content-Type`).
 *
 * Where to connect and how to authenticate comes from a {@link ClusterConnection}
 * (`./config.ts`): the client sends over ONE transport built from its TLS material on first use
 * (`./request/transport.ts`), its own or the one its configuration's clients share
 * (`./client_factory.ts`), and asks the connection for the credential headers of every request,
 * so rotated tokens are picked up. A new connection pool per request would leak file descriptors
 * (client-node 1.x did that: https://github.com/kubernetes-client/javascript/issues/2893).
 *
 * The request plumbing lives in `./request/`, private to `lib/kube/`: `request.ts` (the request
 * context every step gets), `status_errors.ts` (error answers), `connection_errors.ts` (no
 * answer), `retry.ts` (when to send again), `body.ts` (reading answers), `watch_stream.ts`
 * (watch frames, events and the idle watchdog).
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
import type { ClusterConnection, CredentialHeaders } from "./config.ts";
import { sameCredentials } from "./request/credential_headers.ts";
import { createTransport, type Transport, type TransportResponse } from "./request/transport.ts";
import { SharedTransport, type TransportUse } from "./request/shared_transport.ts";
import { ABORTED, raceAbort } from "../abort.ts";
import type { KubeObject } from "./types.ts";
import { FencedError, type LeaseFence } from "../lease_fence.ts";
import { type Clock, realClock, type Timer } from "../clock.ts";
import { isObject, tryParseJson } from "./json.ts";
import { type RequestBody, type RequestContext, requestFailure } from "./request/request.ts";
import { errorFromResponse } from "./request/status_errors.ts";
import { clientClosedError, connectionError } from "./request/connection_errors.ts";
import { type Answer, MAX_RETRIES, retryDelayMs } from "./request/retry.ts";
import {
  answerOrAbort,
  MAX_BODY_BYTES,
  readBytes,
  readText,
  WHOLE_BODY_MAX_BYTES,
} from "./request/body.ts";
import {
  asksForProtobuf,
  errorFromProtobuf,
  isProtobuf,
  PROTOBUF_ACCEPT,
  protobufBody,
} from "./request/protobuf_answer.ts";
import { IdleWatchdog, watchEvents } from "./request/watch_stream.ts";
import { requestUrl, type ServerUrl, serverUrl } from "./request/request_url.ts";
import {
  CLIENT_SIDE_THROTTLING,
  logThrottleWait,
  retryReason,
  ThrottledLogger,
} from "./request/throttle_log.ts";
import { errorText } from "../errors.ts";
import type { KubeClientDeps, KubeClientOptions } from "./client_options.ts";
import type { KubeRequestObserver, RequestRateLimiter } from "./request_reports.ts";
export type { KubeClientDeps, KubeClientOptions } from "./client_options.ts";

export type {
  KubeRequestObserver,
  LatencyInfo,
  RequestInfo,
  RequestRateLimiter,
  RetryInfo,
} from "./request_reports.ts";

/** Where a request goes, below the resource's collection URL. */
interface Target {
  namespace?: string;
  name?: string;
  subresource?: string;
  query?: Record<string, string>;
}

/** What a public method asks for; {@link KubeClient} turns it into a {@link RequestContext}. */
interface RequestSpec {
  method: string;
  verb: string;
  resource: Resource;
  target: Target;
  body?: RequestBody;
  signal?: AbortSignal;
  /** The write's lease fence (see {@link ObjectOptions.fence}). */
  fence?: LeaseFence;
}

/**
 * A {@link KubeApi} over HTTP(S). One keep-alive connection pool per client, or per
 * configuration when made by a `KubeClientFactory` (`./client_factory.ts`); call
 * {@link KubeClient.close} when done. The constructor does no I/O.
 *
 * Guarantees: every method rejects with {@link ApiError} for an error answer (code, Status
 * reason and message) or a failed connection (code 0, reason `ConnectionError`, or `Timeout` when
 * the request timed out), and with the signal's reason when `opts.signal` aborts.
 *
 * Retries, as client-go's `rest.Request` makes them: a `429` or `5xx` answer with a
 * `Retry-After` of whole seconds is sent again after that delay (capped at
 * `MAX_RETRY_AFTER_MS` (`./request/retry.ts`)), for every method; a GET whose connection broke before the answer
 * after 1 s; at most {@link MAX_RETRIES} times, each try taking a token from the rate limiter,
 * reported to the observer and logged at verbosity 4. The wait ends early when the caller's signal
 * aborts (a Lease renewal retries only within its renew deadline).
 */
export class KubeClient implements KubeApi {
  readonly #server: URL;
  readonly #serverUrl: ServerUrl;
  readonly #connection: ClusterConnection;
  readonly #rateLimiter: RequestRateLimiter | undefined;
  readonly #observer: KubeRequestObserver | undefined;
  readonly #throttledLogger: ThrottledLogger;
  readonly #clock: Clock;
  readonly #log: Logger | undefined;
  readonly #userAgent: string;
  readonly #timeoutMs: number;
  readonly #deadlineMs: number;
  readonly #maxBodyBytes: number;
  readonly #watchGraceMs: number;
  readonly #protobuf: boolean;
  readonly #transport: TransportUse;
  /** The header lines of the last credentials, by content type ("" without a body). */
  #headerLines:
    | { credentials: CredentialHeaders; byContentType: Map<string, [string, string][]> }
    | undefined;
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
    this.#serverUrl = serverUrl(server);
    this.#connection = connection;

    this.#rateLimiter = deps.rateLimiter;
    this.#observer = deps.observer;
    this.#clock = deps.clock ?? realClock;
    this.#throttledLogger = deps.throttledLogger ?? new ThrottledLogger(this.#clock);
    this.#log = deps.log;
    this.#userAgent = options.userAgent ?? "csi-attacher/unknown";
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#deadlineMs = options.deadlineMs ?? 4 * this.#timeoutMs;
    this.#maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
    this.#watchGraceMs = options.watchGraceMs ?? 30_000;
    this.#protobuf = options.protobuf ?? true;
    if (
      !(this.#timeoutMs > 0) || !(this.#deadlineMs > 0) || !(this.#maxBodyBytes > 0) ||
      !(this.#watchGraceMs >= 0)
    ) {
      throw new RangeError(
        "timeoutMs, deadlineMs and maxBodyBytes must be positive and watchGraceMs not negative",
      );
    }
    const proxyEnvironment = options.proxyEnvironment ?? {};
    this.#transport = deps.transport ??
      new SharedTransport(() => createTransport(connection, proxyEnvironment)).use();
  }

  async list<T extends KubeObject>(
    res: Resource,
    opts: ListOptions = {},
  ): Promise<ObjectList<T>> {
    const query: Record<string, string> = {};
    if (opts.resourceVersion !== undefined) query.resourceVersion = opts.resourceVersion;
    if (opts.limit !== undefined && opts.limit > 0) query.limit = String(opts.limit);
    if (opts.continue !== undefined && opts.continue !== "") query.continue = opts.continue;
    const body = await this.#call({
      method: "GET",
      verb: "list",
      resource: res,
      target: { namespace: opts.namespace, query },
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
    return this.#object<T>(
      await this.#call({
        method: "GET",
        verb: "get",
        resource: res,
        target,
        signal: opts.signal,
      }),
    );
  }

  async create<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    const ns = this.#namespace(res, opts.namespace ?? obj.metadata.namespace, obj.metadata.name);
    return this.#object<T>(
      await this.#call({
        method: "POST",
        verb: "create",
        resource: res,
        target: { namespace: ns },
        body: { contentType: "application/json", data: JSON.stringify(obj) },
        signal: opts.signal,
        fence: opts.fence,
      }),
    );
  }

  async update<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    const name = obj.metadata.name;
    const ns = this.#namespace(res, opts.namespace ?? obj.metadata.namespace, name);
    return this.#object<T>(
      await this.#call({
        method: "PUT",
        verb: "update",
        resource: res,
        target: { namespace: ns, name },
        body: { contentType: "application/json", data: JSON.stringify(obj) },
        signal: opts.signal,
        fence: opts.fence,
      }),
    );
  }

  async patch<T extends KubeObject>(
    res: Resource,
    name: string,
    patch: Patch,
    opts: ObjectOptions & { subresource?: "status" } = {},
  ): Promise<T> {
    const contentType = patch.type === "merge"
      ? "application/merge-patch+json"
      : "application/json-patch+json";
    return this.#object<T>(
      await this.#call({
        method: "PATCH",
        verb: "patch",
        resource: res,
        target: {
          namespace: this.#namespace(res, opts.namespace, name),
          name,
          subresource: opts.subresource,
        },
        body: { contentType, data: JSON.stringify(patch.body) },
        signal: opts.signal,
        fence: opts.fence,
      }),
    );
  }

  async delete(res: Resource, name: string, opts: ObjectOptions = {}): Promise<void> {
    await this.#call({
      method: "DELETE",
      verb: "delete",
      resource: res,
      target: { namespace: this.#namespace(res, opts.namespace, name), name },
      signal: opts.signal,
      fence: opts.fence,
    });
  }

  /**
   * Ends every request and watch under way (they reject with a `ConnectionError` saying the
   * client is closed, and their streams are ended), then lets go of the connection pool: a pool
   * of its own is closed; a shared one (`./client_factory.ts`) is closed by the last of its
   * clients to close. Later requests reject the same way.
   */
  close(): Promise<void> {
    this.#closed = true;
    const closed = clientClosedError();
    for (const controller of this.#inflight) controller.abort(closed);
    this.#inflight.clear();
    this.#transport.release();
    return Promise.resolve();
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Whether the request of `ctx` asks for protobuf (`./request/protobuf_answer.ts`). */
  #asksForProtobuf(ctx: RequestContext): boolean {
    return this.#protobuf && asksForProtobuf(ctx.method, ctx.resource);
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

  /** The request context of `spec`: its URL built from the server's (`./request/request_url.ts`). */
  #context(spec: RequestSpec): RequestContext {
    const { resource: res, target } = spec;
    let path = res.group === "" ? `/api/${res.version}` : `/apis/${res.group}/${res.version}`;
    if (res.namespaced && target.namespace !== undefined) {
      path += `/namespaces/${encodeURIComponent(target.namespace)}`;
    }
    path += `/${res.plural}`;
    if (target.name !== undefined) path += `/${encodeURIComponent(target.name)}`;
    if (target.subresource !== undefined) path += `/${target.subresource}`;
    return {
      method: spec.method,
      verb: spec.verb,
      resource: res,
      subresource: target.subresource ?? "",
      url: requestUrl(this.#serverUrl, path, target.query),
      body: spec.body,
      signal: spec.signal,
      fence: spec.fence,
    };
  }

  /** The transport of this client (its own or its configuration's), built on first use. */
  #getTransport(): Transport {
    if (this.#closed) throw clientClosedError();
    return this.#transport.transport();
  }

  /**
   * Request header lines with fresh credentials; a list is sent as repeated lines. The lines are
   * made once per credentials and content type and shared by the requests that use them (the
   * transport only reads them); new credentials (a rotated token) make new lines.
   */
  async #headers(body?: RequestBody, protobuf = false): Promise<[string, string][]> {
    const credentials = await this.#connection.headers();
    let made = this.#headerLines;
    if (made === undefined || !sameCredentials(made.credentials, credentials)) {
      made = this.#headerLines = { credentials, byContentType: new Map() };
    }
    const contentType = body?.contentType ?? "";
    const key = protobuf ? "protobuf" : contentType;
    let lines = made.byContentType.get(key);
    if (lines === undefined) {
      lines = [];
      for (const [name, value] of Object.entries(credentials)) {
        for (const v of Array.isArray(value) ? value : [value]) lines.push([name, v]);
      }
      lines.push(
        ["Accept", protobuf ? PROTOBUF_ACCEPT : "application/json"],
        ["User-Agent", this.#userAgent],
      );
      if (body !== undefined) lines.push(["Content-Type", contentType]);
      made.byContentType.set(key, lines);
    }
    return lines;
  }

  /** Logs one try at verbosity 6 and reports it to the observer; `start` is a clock reading. */
  #report(ctx: RequestContext, code: number, start: number): void {
    const seconds = (this.#clock.now() - start) / 1000;
    if (this.#log?.enabled(6)) {
      this.#log.v(6).info("HTTP", {
        verb: ctx.method,
        url: ctx.url.href,
        status: code,
        milliseconds: Math.round(seconds * 1000),
      });
    }
    this.#observer?.observeApiRequest({
      method: ctx.method,
      verb: ctx.verb,
      resource: ctx.resource.plural,
      subresource: ctx.subresource,
      host: ctx.url.host,
      code,
      seconds,
    });
  }

  /**
   * One non-watch request: rate limit, send, parse; retried as client-go retries (see
   * `./request/retry.ts`), each try taking its own token from the rate limiter.
   */
  async #call(spec: RequestSpec): Promise<unknown> {
    const ctx = this.#context(spec);
    const started = this.#clock.now();
    try {
      return await this.#tries(ctx);
    } finally {
      // client-go's rest_client_request_duration_seconds: the whole request, its waits for the
      // rate limiter and its retries included (`rest/request.go` `request`).
      this.#observer?.observeApiRequestDuration({
        method: ctx.method,
        host: ctx.url.host,
        seconds: (this.#clock.now() - started) / 1000,
      });
    }
  }

  /** The tries of one request, each after its wait for the rate limiter. */
  async #tries(ctx: RequestContext): Promise<unknown> {
    const { signal } = ctx;
    let reason = CLIENT_SIDE_THROTTLING;
    for (let attempt = 1;; attempt++) {
      await this.#throttle(ctx, reason);
      // The lease may have passed while this try waited for its token (seconds, with work
      // queued): asked again here, and by the transport right before the bytes are written.
      if (ctx.fence?.valid() === false) throw new FencedError();
      const start = this.#clock.now();
      let code = 0;
      let answer: Answer | undefined;
      let failure: unknown;
      let fenced = false;
      try {
        answer = await this.#send(ctx);
        code = answer.status;
      } catch (err) {
        // Refused by the fence: never sent, so neither a try to report nor one to retry.
        fenced = err instanceof FencedError;
        if (fenced) throw err;
        failure = err;
      } finally {
        if (!fenced) this.#report(ctx, code, start);
      }
      const delayMs = attempt > MAX_RETRIES || signal?.aborted
        ? undefined
        : retryDelayMs(ctx.method, answer, failure);
      if (delayMs !== undefined) {
        this.#retrying(ctx, code, attempt, delayMs);
        reason = retryReason(attempt, Math.round(delayMs / 1000), {
          status: answer?.status,
          flowSchemaUid: answer?.flowSchemaUid,
          error: answer === undefined ? errorText(failure) : undefined,
        });
        await this.#clock.sleep(delayMs, signal);
        continue;
      }
      if (answer === undefined) throw failure;
      if (answer.bytes !== undefined) {
        if (code < 200 || code > 299) throw errorFromProtobuf(code, answer.bytes);
        return protobufBody(ctx, code, answer.bytes);
      }
      if (code < 200 || code > 299) throw errorFromResponse(code, answer.text);
      const parsed = tryParseJson(answer.text);
      if (parsed === undefined) {
        throw new ApiError(code, "InvalidResponse", requestFailure(ctx, "the answer is not JSON"));
      }
      return parsed;
    }
  }

  /**
   * Waits for the rate limiter, then reports the wait and logs a long one as client-go's
   * `tryThrottleWithInfo` does (`./request/throttle_log.ts`). Without a rate limiter: nothing.
   */
  async #throttle(ctx: RequestContext, reason: string): Promise<void> {
    if (this.#rateLimiter === undefined) return;
    const start = this.#clock.now();
    await this.#rateLimiter.take(ctx.signal);
    const waitedMs = this.#clock.now() - start;
    this.#observer?.observeRateLimiterWait({
      method: ctx.method,
      host: ctx.url.host,
      seconds: waitedMs / 1000,
    });
    if (this.#log !== undefined) {
      logThrottleWait(this.#log, this.#throttledLogger, {
        waitedMs,
        reason,
        verb: ctx.method,
        url: ctx.url.href,
      });
    }
  }

  /** Counts and logs one retry, as client-go logs it at level 4. */
  #retrying(ctx: RequestContext, code: number, attempt: number, delayMs: number): void {
    this.#log?.v(4).info("Got a Retry-After response, retrying", {
      verb: ctx.method,
      url: ctx.url.href,
      status: code,
      attempt,
      retryAfterMs: delayMs,
    });
    this.#observer?.observeApiRetry({
      method: ctx.method,
      verb: ctx.verb,
      resource: ctx.resource.plural,
      host: ctx.url.host,
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
  async #send(ctx: RequestContext): Promise<Answer> {
    const { signal, body } = ctx;
    signal?.throwIfAborted();
    const transport = await this.#getTransport();
    const headers = await this.#headers(body, this.#asksForProtobuf(ctx));
    signal?.throwIfAborted();
    if (this.#closed) throw clientClosedError();
    const generation = transport.generation;
    const timeoutMs = this.#timeoutMs;
    const deadlineMs = this.#deadlineMs;
    const maxBodyBytes = this.#maxBodyBytes;
    const clock = this.#clock;
    const { controller, dispose } = this.#begin(signal);
    // The timeout counts from the last byte received, so a large answer that keeps arriving
    // (a big list) is not cut short; a silent connection is, and so is an answer still arriving
    // at the deadline.
    const start = clock.now();
    let lastProgress = start;
    let timer: Timer;
    const onTimer = () => {
      const now = clock.now();
      const silentLeft = lastProgress + timeoutMs - now;
      const deadlineLeft = start + deadlineMs - now;
      if (silentLeft > 0 && deadlineLeft > 0) {
        timer = clock.setTimer(Math.min(silentLeft, deadlineLeft), onTimer);
        return;
      }
      const what = deadlineLeft > 0
        ? `request timed out after ${timeoutMs / 1000}s`
        : `request did not complete within ${deadlineMs / 1000}s`;
      controller.abort(new ApiError(0, "Timeout", requestFailure(ctx, what)));
      // No answer on this connection: the pooled ones may have gone silent too.
      transport.renew(generation);
    };
    timer = clock.setTimer(Math.min(timeoutMs, deadlineMs), onTimer);
    try {
      const response = await answerOrAbort(
        transport.send(ctx.url, {
          method: ctx.method,
          headers,
          body: body?.data,
          signal: controller.signal,
          maxBodyBytes,
          fence: ctx.fence,
        }),
        controller.signal,
      );
      if (response === undefined) throw controller.signal.reason;
      lastProgress = clock.now();
      const read = await this.#readBody(response, controller.signal, maxBodyBytes, () => {
        lastProgress = clock.now();
      });
      if (controller.signal.aborted) throw controller.signal.reason;
      return {
        status: response.status,
        ...read,
        retryAfter: response.headers.get("retry-after") ?? undefined,
        flowSchemaUid: response.headers.get("x-kubernetes-pf-flowschema-uid") ?? undefined,
      };
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      // A timeout, or close().
      if (controller.signal.aborted) throw controller.signal.reason;
      if (err instanceof FencedError) throw err;
      throw connectionError(ctx, err);
    } finally {
      timer.cancel();
      dispose();
    }
  }

  /**
   * An answer's body: protobuf as bytes, anything else as text (in one read when the transport
   * has one and the length is known to be small); `onProgress` is called as pieces arrive.
   */
  async #readBody(
    response: TransportResponse,
    signal: AbortSignal,
    maxBytes: number,
    onProgress: () => void,
  ): Promise<{ text: string; bytes?: Uint8Array }> {
    if (isProtobuf(response.headers.get("content-type"))) {
      return {
        text: "",
        bytes: await readBytes(response.body, signal, { maxBytes, onChunk: onProgress }),
      };
    }
    const length = Number(response.headers.get("content-length") ?? NaN);
    if (length <= WHOLE_BODY_MAX_BYTES && response.text !== undefined) {
      const whole = await raceAbort(response.text(), signal);
      if (whole === ABORTED) throw signal.reason;
      return { text: whole };
    }
    return { text: await readText(response.body, signal, { maxBytes, onChunk: onProgress }) };
  }

  async *#watch<T extends KubeObject>(
    res: Resource,
    opts: WatchOptions,
  ): AsyncGenerator<WatchEvent<T>, void, undefined> {
    const { signal } = opts;
    if (signal.aborted) return;
    const ctx = this.#context({
      method: "GET",
      verb: "watch",
      resource: res,
      target: { namespace: opts.namespace, query: watchQuery(opts) },
      signal,
    });
    const transport = await this.#getTransport();
    const headers = await this.#headers(undefined, this.#asksForProtobuf(ctx));
    if (signal.aborted) return;
    if (this.#closed) throw clientClosedError();
    const generation = transport.generation;
    const clock = this.#clock;

    // Ends the watch: the caller's abort, the idle watchdog, the guard below or close(). The
    // wait for the answer, or for the next chunk of the body, then ends at once.
    const { controller, dispose } = this.#begin(signal);
    // A server that keeps the watch open past its timeoutSeconds (and the grace) is cut off.
    let guardError: ApiError | undefined;
    const guardMs = opts.timeoutSeconds * 1000 + this.#watchGraceMs;
    const guard = clock.setTimer(guardMs, () => {
      const message = `watch still open ${guardMs / 1000}s after it started`;
      controller.abort(guardError = new ApiError(0, "Timeout", requestFailure(ctx, message)));
    });
    const idle = opts.idleTimeoutMs === undefined
      ? undefined
      : new IdleWatchdog(clock, opts.idleTimeoutMs, () => controller.abort());
    const stopped = () => signal.aborted || idle?.fired === true;
    const start = clock.now();
    let reported = false;
    try {
      const response = await answerOrAbort(
        transport.send(ctx.url, { method: "GET", headers, signal: controller.signal }),
        controller.signal,
      );
      if (stopped()) {
        response?.body?.cancel().catch(() => {});
        return;
      }
      if (response === undefined) throw controller.signal.reason;
      reported = true;
      idle?.touch();
      this.#report(ctx, response.status, start);
      const protobuf = isProtobuf(response.headers.get("content-type"));
      if (response.status !== 200) {
        const read = { maxBytes: this.#maxBodyBytes };
        if (protobuf) {
          const bytes = await readBytes(response.body, controller.signal, read);
          if (controller.signal.aborted) throw controller.signal.reason;
          throw errorFromProtobuf(response.status, bytes);
        }
        const text = await readText(response.body, controller.signal, read);
        if (controller.signal.aborted) throw controller.signal.reason;
        throw errorFromResponse(response.status, text);
      }
      yield* watchEvents<T>(response, { ctx, signal: controller.signal, stopped, idle, protobuf });
    } catch (err) {
      if (stopped()) return;
      if (guardError !== undefined) throw guardError;
      if (err instanceof ApiError) throw err;
      if (!reported) this.#report(ctx, 0, start);
      throw connectionError(ctx, err);
    } finally {
      guard.cancel();
      idle?.stop();
      dispose();
      // A watch left early (the caller stopped reading, an error) releases its stream; after the
      // end of the body this changes nothing.
      controller.abort();
      if (idle?.fired) this.#silentWatch(ctx, idle, () => transport.renew(generation));
    }
  }

  /**
   * A watch that delivered neither an event nor a bookmark for `idle.ms` was closed: its
   * connection went silent, so new requests must not go out on it, nor on the other pooled
   * connections to the same server (behind the same load balancer): `renew` them.
   */
  #silentWatch(ctx: RequestContext, idle: IdleWatchdog, renew: () => void): void {
    this.#log?.v(4).info("Watch delivered neither an event nor a bookmark, closing it", {
      url: ctx.url.href,
      idleMs: idle.ms,
    });
    renew();
  }
}

/** The query of a watch request (`watch=true` and the options' parameters). */
function watchQuery(opts: WatchOptions): Record<string, string> {
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
  return query;
}
