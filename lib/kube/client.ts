/**
 * The production {@link KubeApi}: REST over the HTTP/1.1 transport (directly or through an HTTP
 * proxy's tunnel), with raw JSON out and JSON or Kubernetes protobuf in
 * (`./request/protobuf_answer.ts`: the reads, patches and updates of the attacher's kinds ask for a
 * protobuf answer, every answer is read by its `Content-Type`).
 *
 * Where to connect and how to authenticate comes from a {@link ClusterConnection}
 * (`./config.ts`): the client sends over ONE transport built from its TLS material on first use
 * (`./request/transport.ts`), its own or the one its configuration's clients share
 * (`./client_factory.ts`), and asks the connection for the credential headers of every request,
 * so rotated tokens are picked up. A new connection pool per request would leak file descriptors
 * (client-node 1.x did that: https://github.com/kubernetes-client/javascript/issues/2893).
 *
 * This file is the API's verbs: the path and query of each, the request body, the shape of the
 * answer. Sending a built request is the request sender's (`./request/sender.ts`); the rest of
 * the request plumbing lives beside it in `./request/`, private to `lib/kube/`: `request.ts`
 * (the request context every step gets), `status_errors.ts` (error answers),
 * `connection_errors.ts` (no answer), `retry.ts` (when to send again), `body.ts` (reading
 * answers), `watch_stream.ts` (watch frames, events and the idle watchdog).
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
import type { KubeObject } from "./types.ts";
import type { LeaseFence } from "../lease_fence.ts";
import { realClock } from "../clock.ts";
import { isObject } from "./json.ts";
import type { RequestBody, RequestContext } from "./request/request.ts";
import { createTransport } from "./request/transport.ts";
import { SharedTransport } from "./request/shared_transport.ts";
import { MAX_BODY_BYTES } from "./request/body.ts";
import { requestUrl, type ServerUrl, serverUrl } from "./request/request_url.ts";
import { ThrottledLogger } from "./request/throttle_log.ts";
import { RequestSender } from "./request/sender.ts";
import type { KubeClientDeps, KubeClientOptions } from "./client_options.ts";
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
 * `Retry-After` of whole seconds is sent again after that delay (capped at `MAX_RETRY_AFTER_MS`),
 * for every method; a GET whose connection broke before the answer after 1 s; at most
 * `MAX_RETRIES` times (`./request/retry.ts`), each try taking a token from the rate limiter,
 * reported to the observer and logged at verbosity 4. The wait ends early when the caller's signal
 * aborts (a Lease renewal retries only within its renew deadline).
 */
export class KubeClient implements KubeApi {
  readonly #serverUrl: ServerUrl;
  readonly #sender: RequestSender;

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
    this.#serverUrl = serverUrl(server);

    const clock = deps.clock ?? realClock;
    const timeoutMs = options.timeoutMs ?? 30_000;
    const settings = {
      userAgent: options.userAgent ?? "csi-attacher/unknown",
      timeoutMs,
      deadlineMs: options.deadlineMs ?? 4 * timeoutMs,
      maxBodyBytes: options.maxBodyBytes ?? MAX_BODY_BYTES,
      watchGraceMs: options.watchGraceMs ?? 30_000,
      protobuf: options.protobuf ?? true,
    };
    if (
      !(settings.timeoutMs > 0) || !(settings.deadlineMs > 0) || !(settings.maxBodyBytes > 0) ||
      !(settings.watchGraceMs >= 0)
    ) {
      throw new RangeError(
        "timeoutMs, deadlineMs and maxBodyBytes must be positive and watchGraceMs not negative",
      );
    }
    const proxyEnvironment = options.proxyEnvironment ?? {};
    this.#sender = new RequestSender({
      connection,
      transport: deps.transport ??
        new SharedTransport(() => createTransport(connection, proxyEnvironment)).use(),
      rateLimiter: deps.rateLimiter,
      observer: deps.observer,
      throttledLogger: deps.throttledLogger ?? new ThrottledLogger(clock),
      clock,
      log: deps.log,
    }, settings);
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
    this.#sender.close();
    return Promise.resolve();
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

  /** One non-watch request: the sender rate limits, sends, reads and retries it. */
  #call(spec: RequestSpec): Promise<unknown> {
    return this.#sender.call(this.#context(spec));
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
    yield* this.#sender.watch<T>({ ...ctx, signal }, opts);
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
