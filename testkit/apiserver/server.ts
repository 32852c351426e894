/**
 * An in-memory Kubernetes API server on `Deno.serve` (127.0.0.1, plain HTTP), faithful enough
 * that our {@link import("../../lib/kube/client.ts").KubeClient} and client-node's generated APIs talk
 * to it unchanged. The test suite and the sandbox demo use it in place of a cluster.
 *
 * Served: volumeattachments (storage.k8s.io/v1, with `/status`), persistentvolumes (v1, with
 * `/status`), csinodes (storage.k8s.io/v1), nodes (v1, with `/status`), and the namespaced
 * secrets (v1), leases (coordination.k8s.io/v1) and events (v1). Verbs: get, list, watch, create,
 * update, patch (merge, strategic merge and JSON patch), delete. Responses are JSON, YAML or
 * Kubernetes protobuf (`application/vnd.kubernetes.protobuf`: objects, lists, Status errors, and
 * watches as `;stream=watch` frames), chosen from `Accept` as kube-apiserver chooses
 * ({@link import("./negotiation.ts")}, {@link import("./media.ts")}); protobuf is offered when the
 * upstream `.proto` files are in the Go module cache ({@link MemoryApiServerOptions.protobuf}).
 * Bodies of creates and updates over HTTP (JSON, YAML, or protobuf read into its JSON form) are
 * decoded as the real server decodes them
 * ({@link import("./body_decoder.ts")}: unknown and duplicate fields as `Warning`
 * headers or refused with `fieldValidation=Strict`, field types, kind and version), defaulted and
 * validated ({@link import("./validation.ts")}). Watches send bookmarks, serve
 * watch lists (`sendInitialEvents`) and resume from any resourceVersion since the last periodic
 * compaction; list and watch options are validated
 * ({@link import("./list_options.ts")}). Storage semantics are in
 * {@link import("./registry.ts")}; error texts are the real server's
 * ({@link import("./status_errors.ts")}), checked against kube-apiserver v1.37.2
 * by the end-to-end suite (86 probes, `tests/e2e/api_differences.ts`). No authentication: any
 * request is accepted.
 *
 * For tests it records every request ({@link MemoryApiServer.requests}), injects faults
 * ({@link MemoryApiServer.failNext}), and gives direct access to the objects without HTTP.
 *
 * @example
 * ```ts
 * await using server = await MemoryApiServer.start();
 * server.create(VOLUME_ATTACHMENTS, va);
 * const kc = new KubeConfig();
 * kc.loadFromString(server.kubeconfig());
 * ```
 * @module
 */

import { decodeKubeProtobuf, KUBE_PROTOBUF } from "./protobuf_body.ts";
import { ServerMedia, watchContentType } from "./media.ts";
import type { MediaType } from "./negotiation.ts";
import { type Clock, realClock, type Timer } from "../../lib/clock.ts";
import type { ObjectList, Patch, Resource } from "../../lib/kube/api.ts";
import type { KubeObject } from "../../lib/kube/types.ts";
import { type ChangeType, Registry, type StoredObject } from "./registry.ts";
import {
  apiVersionOf,
  findServedResource,
  resolveServedResource,
  type ServedResource,
  servesGroupVersion,
} from "./resources.ts";
import {
  badRequest,
  continueExpired,
  errorForCode,
  failureStatus,
  invalidContinue,
  invalidListOptions,
  invalidListResourceVersion,
  methodNotAllowed,
  resourceVersionParseError,
  resourceVersionTooLarge,
  StatusError,
  unknownPath,
  unsupportedPatchType,
} from "./status_errors.ts";
import { WatchHub } from "./watch_hub.ts";
import { type ListOptions, parseListOptions, validateListOptions } from "./list_options.ts";
import { type DecodedBody, decodeObjectBody } from "./body_decoder.ts";

/** A Kubernetes API verb, as client-go's fake clientset names actions. */
export type Verb = "get" | "list" | "watch" | "create" | "update" | "patch" | "delete";

/** One request as the server received it. */
export interface RecordedRequest {
  /** HTTP method: `GET`, `POST`, `PUT`, `PATCH`, `DELETE`. */
  method: string;
  /** URL path, e.g. `/apis/storage.k8s.io/v1/volumeattachments/va1/status`. */
  path: string;
  /** The API verb; "" when the path names no served resource or the method fits no verb. */
  verb: Verb | "";
  /** Plural resource name from the path, e.g. `volumeattachments`. */
  resource: string;
  /** Object name; "" for list, watch and create. */
  name: string;
  /** `status` or "". */
  subresource: string;
  /** Namespace from the path; "" for cluster-scoped resources and all-namespace lists. */
  namespace: string;
  /** Query parameters. */
  query: Record<string, string>;
  /** Media type of the body without parameters (e.g. `application/merge-patch+json`), or "". */
  contentType: string;
  /** The body parsed as JSON; the raw text when it is not JSON; undefined when empty. */
  body: unknown;
  /** True for a watch request. */
  watch: boolean;
  /** The `User-Agent` header, or "". */
  userAgent: string;
  /** The `Accept` header, or "". */
  accept: string;
  /**
   * The media type negotiated for the answer (`application/vnd.kubernetes.protobuf;stream=watch`
   * for a protobuf watch); "" when negotiation failed or the path is not served.
   */
  responseType: string;
}

/**
 * A fault for the next matching request(s). Every selector that is set must match.
 * At least one of `status` and `delayMs` must be set.
 */
export interface FaultSpec {
  verb?: Verb;
  /** HTTP method, e.g. `PATCH`. */
  method?: string;
  /** Plural resource name, e.g. `volumeattachments`. */
  resource?: string;
  /** `status` for the status subresource, "" for the main resource only; unset matches both. */
  subresource?: string;
  name?: string;
  namespace?: string;
  /** How many matching requests get the fault; default 1 (`Infinity` for all). */
  times?: number;
  /**
   * HTTP code of the error answer, worded as the real server words it: 403 gives
   * `<resource>.<group> "<name>" is forbidden: <message>`, 409 a Conflict, 500
   * `Internal error occurred: <message>`, and so on.
   */
  status?: number;
  /** Detail of the error (default `Mock error` for 403). */
  message?: string;
  /**
   * Lost response: apply the request, then answer with the error anyway (a timeout after the
   * write reached storage). Default false: the error is answered and nothing changes.
   */
  applyChange?: boolean;
  /** Delay before handling the request, on the server's clock. */
  delayMs?: number;
  /**
   * Sends `Retry-After: <seconds>` with the error answer, as a throttling or overloaded server
   * does. With status 429 the answer is then the one of kube-apiserver's max-in-flight and
   * priority-and-fairness filters (`tooManyRequests` in `apiserver/pkg/server/filters`): plain
   * text `Too many requests, please try again later.`, not a Status.
   */
  retryAfterSeconds?: number;
}

/** A change of one object, for timelines. */
export interface ApiServerEvent {
  type: ChangeType;
  /** Plural resource name. */
  resource: string;
  namespace: string;
  name: string;
  resourceVersion: string;
  /** A copy of the object after the change (DELETED: its last state). */
  object: KubeObject;
}

/** Options of {@link MemoryApiServer.start}. */
export interface MemoryApiServerOptions {
  /** TCP port on 127.0.0.1; default 0 (any free port). */
  port?: number;
  /** Time source for timestamps, watch timeouts, bookmarks and delays; default the wall clock. */
  clock?: Clock;
  /**
   * Most events kept for watches that resume from a resourceVersion; default `Infinity`: as in
   * etcd, the history goes only by compaction.
   */
  historyLimit?: number;
  /**
   * Period of the compaction, as kube-apiserver's `--etcd-compaction-interval` (default 5 min):
   * each run drops the events up to the resourceVersion the previous run saw, so a watch can
   * resume from any resourceVersion of the last one to two periods. 0 disables it.
   */
  compactionIntervalMs?: number;
  /** Period of BOOKMARK events on watches that allow them; default 60 s; 0 disables them. */
  bookmarkIntervalMs?: number;
  /** resourceVersion before the first write; default 100. */
  initialResourceVersion?: number;
  /**
   * Serve Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) when the `.proto` files are
   * in the Go module cache ({@link import("../kube_protos.ts")}); default true. false, or the
   * files absent: a server that offers JSON and YAML only.
   */
  protobuf?: boolean;
}

/** A resource given as a {@link Resource} constant or as a plural name (`"nodes"`). */
export type ResourceRef = Resource | string;

interface Route {
  resource: ServedResource;
  namespace: string;
  name: string;
  subresource: "" | "status";
}

interface ParsedPath {
  group: string;
  version: string;
  plural: string;
  namespace: string;
  name: string;
  subresource: string;
  /** False when the path has a shape no served resource has. */
  valid: boolean;
}

const JSON_PATCH = "application/json-patch+json";
const MERGE_PATCH = "application/merge-patch+json";
const STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json";
/** The patch types served (server-side apply, `application/apply-patch+yaml`, is not). */
const PATCH_TYPES = [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH];

/**
 * The message of `strconv.ParseInt(value, 10, 64)` failing, or undefined when it succeeds.
 */
function parseIntError(value: string): string | undefined {
  if (!/^[+-]?[0-9]+$/.test(value)) return `strconv.ParseInt: parsing "${value}": invalid syntax`;
  const n = BigInt(value);
  if (n > 9223372036854775807n || n < -9223372036854775808n) {
    return `strconv.ParseInt: parsing "${value}": value out of range`;
  }
  return undefined;
}

/** Splits an API path into its parts. */
function parsePath(pathname: string): ParsedPath | undefined {
  let parts: string[];
  try {
    parts = pathname.split("/").slice(1).map(decodeURIComponent);
  } catch (err) {
    if (err instanceof URIError) return undefined;
    throw err;
  }
  if (parts.at(-1) === "") parts.pop();
  let group: string;
  let rest: string[];
  if (parts[0] === "api" && parts.length >= 2) {
    group = "";
    rest = parts.slice(1);
  } else if (parts[0] === "apis" && parts.length >= 3) {
    group = parts[1] ?? "";
    rest = parts.slice(2);
  } else {
    return undefined;
  }
  const version = rest[0] ?? "";
  let namespace = "";
  let tail = rest.slice(1);
  if (tail[0] === "namespaces" && tail.length >= 3) {
    namespace = tail[1] ?? "";
    tail = tail.slice(2);
  }
  return {
    group,
    version,
    plural: tail[0] ?? "",
    namespace,
    name: tail[1] ?? "",
    subresource: tail[2] ?? "",
    valid: tail.length >= 1 && tail.length <= 3,
  };
}

/** The key of an object in its resource, as the storage orders lists: `namespace/name` or `name`. */
function objectKey(obj: KubeObject): string {
  const ns = obj.metadata.namespace ?? "";
  return ns === "" ? obj.metadata.name : `${ns}/${obj.metadata.name}`;
}

/** Where a paginated list's snapshot is kept. */
function snapshotKey(res: ServedResource, namespace: string, rv: number): string {
  return `${rv}/${res.group}/${res.plural}/${namespace}`;
}

/**
 * A `continue` token as the etcd3 store encodes it (`encodeContinue` in
 * `apiserver/pkg/storage/etcd3/store.go`): URL-safe base64 without padding of
 * `{"v":"meta.k8s.io/v1","rv":<rv>,"start":"<key>"}`.
 */
function encodeContinue(rv: number, start: string): string {
  const json = JSON.stringify({ v: "meta.k8s.io/v1", rv, start });
  const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(json)));
  return b64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Decodes a `continue` token. @throws {StatusError} 400 when it is not one. */
function decodeContinue(token: string): { rv: number; start: string } {
  let parsed: unknown;
  try {
    const b64 = token.replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw invalidContinue("illegal base64 data or JSON");
  }
  const t = parsed as { v?: unknown; rv?: unknown; start?: unknown };
  if (t?.v !== "meta.k8s.io/v1") {
    throw invalidContinue(`server does not recognize this encoded key`);
  }
  if (typeof t.rv !== "number" || t.rv === 0) {
    throw invalidContinue("incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  if (typeof t.start !== "string" || t.start === "") {
    throw invalidContinue("encoded start key empty (version meta.k8s.io/v1)");
  }
  return { rv: t.rv, start: t.start };
}

/** The verb of a request. */
function verbOf(method: string, name: string, watch: boolean): Verb | "" {
  switch (method) {
    case "GET":
      if (watch) return "watch";
      return name === "" ? "list" : "get";
    case "POST":
      return name === "" ? "create" : "";
    case "PUT":
      return name === "" ? "" : "update";
    case "PATCH":
      return name === "" ? "" : "patch";
    case "DELETE":
      return name === "" ? "" : "delete";
    default:
      return "";
  }
}

/**
 * The field manager of a write without `fieldManager`: the User-Agent up to its first `/`, as
 * kube-apiserver names it.
 */
function managerOf(userAgent: string): string {
  return userAgent.split("/")[0] ?? "";
}

/**
 * 404 for a path outside every served API group and version: the real server's HTTP mux answers
 * it in plain text, not with a Status.
 */
function pageNotFound(): Response {
  return new Response("404 page not found\n", {
    status: 404,
    headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff" },
  });
}

/** The answer of an injected fault (see {@link FaultSpec.retryAfterSeconds}). */
function faultResponse(
  media: ServerMedia,
  out: MediaType,
  err: StatusError,
  retryAfterSeconds: number | undefined,
): Response {
  if (retryAfterSeconds === undefined) return media.error(out, err);
  if (err.status.code === 429) {
    return new Response("Too many requests, please try again later.\n", {
      status: 429,
      headers: {
        "content-type": "text/plain; charset=utf-8",
        "x-content-type-options": "nosniff",
        "retry-after": String(retryAfterSeconds),
      },
    });
  }
  const res = media.error(out, err);
  res.headers.set("retry-after", String(retryAfterSeconds));
  return res;
}

interface PendingFault {
  spec: FaultSpec;
  left: number;
}

/**
 * The in-memory API server. Start it with {@link MemoryApiServer.start}; stop it with
 * {@link MemoryApiServer.close} (or `await using`), which ends open watches first.
 */
export class MemoryApiServer {
  readonly #clock: Clock;
  readonly #registry: Registry;
  readonly #hub: WatchHub;
  readonly #closing = new AbortController();
  #server: Deno.HttpServer<Deno.NetAddr> | undefined;
  #url = "";
  #requests: RecordedRequest[] = [];
  #faults: PendingFault[] = [];
  #watchWaiters: { count: number; resolve: () => void }[] = [];
  readonly #compactionIntervalMs: number;
  #compactionTimer: Timer | undefined;
  /** Full lists that paginated answers were cut from, by {@link snapshotKey}. */
  readonly #snapshots = new Map<string, StoredObject[]>();
  readonly #media: ServerMedia;

  /** Use {@link MemoryApiServer.start}; the constructor does no I/O. */
  constructor(options: Omit<MemoryApiServerOptions, "port"> = {}) {
    this.#clock = options.clock ?? realClock;
    this.#registry = new Registry({ clock: this.#clock }, {
      historyLimit: options.historyLimit ?? Infinity,
      initialResourceVersion: options.initialResourceVersion ?? 100,
    });
    this.#hub = new WatchHub({ registry: this.#registry, clock: this.#clock }, {
      bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000,
    });
    this.#compactionIntervalMs = options.compactionIntervalMs ?? 300_000;
    this.#media = new ServerMedia(options.protobuf ?? true);
  }

  /** Starts a server on 127.0.0.1 and resolves once it listens. */
  static async start(options: MemoryApiServerOptions = {}): Promise<MemoryApiServer> {
    const server = new MemoryApiServer(options);
    await server.#listen(options.port ?? 0);
    // As the real compactor, the first run only notes the resourceVersion (no compaction at start).
    server.#scheduleCompaction(0);
    return server;
  }

  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  get url(): string {
    return this.#url;
  }

  /** The current global resourceVersion. */
  get resourceVersion(): string {
    return String(this.#registry.resourceVersion);
  }

  /** Number of open watch streams. */
  get watchCount(): number {
    return this.#hub.size;
  }

  /**
   * A kubeconfig (YAML) pointing at this server over plain HTTP with
   * `insecure-skip-tls-verify: true`, which client-node requires for http:// servers.
   */
  kubeconfig(): string {
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: memory-apiserver",
      "  cluster:",
      `    server: ${this.#url}`,
      "    insecure-skip-tls-verify: true",
      "users:",
      "- name: memory-apiserver",
      "  user: {}",
      "contexts:",
      "- name: memory-apiserver",
      "  context:",
      "    cluster: memory-apiserver",
      "    user: memory-apiserver",
      "current-context: memory-apiserver",
      "",
    ].join("\n");
  }

  /** Every request received since the start or the last {@link clearRequests}, oldest first. */
  get requests(): readonly RecordedRequest[] {
    return [...this.#requests];
  }

  /** Forgets the recorded requests. */
  clearRequests(): void {
    this.#requests = [];
  }

  /**
   * Answers the next matching request(s) with an error and/or a delay.
   *
   * @example
   * ```ts
   * server.failNext({ verb: "patch", resource: "volumeattachments", status: 403 });
   * // PATCH answers 403: volumeattachments.storage.k8s.io "va1" is forbidden: Mock error
   * ```
   * @throws {TypeError} when neither `status` nor `delayMs` is set, or `times` is not positive.
   */
  failNext(spec: FaultSpec): void {
    if (spec.status === undefined && spec.delayMs === undefined) {
      throw new TypeError("failNext: set status and/or delayMs");
    }
    const times = spec.times ?? 1;
    if (!(times > 0)) throw new TypeError(`failNext: times must be positive, got ${times}`);
    const retryAfter = spec.retryAfterSeconds;
    if (retryAfter !== undefined && !(Number.isInteger(retryAfter) && retryAfter >= 0)) {
      throw new TypeError(`failNext: retryAfterSeconds must be a whole number, got ${retryAfter}`);
    }
    this.#faults.push({ spec: { ...spec }, left: times });
  }

  /** Drops every pending fault. */
  clearFaults(): void {
    this.#faults = [];
  }

  /**
   * Stores an object directly, as test setup: unlike a create over HTTP it keeps the given
   * `status`, `deletionTimestamp`, `uid` and `creationTimestamp`. Sets kind, apiVersion and a new
   * resourceVersion and emits ADDED. With `{ seed: false }` it is a client's create instead, with
   * every check and default a create over HTTP has.
   *
   * @throws {StatusError} 409 when it exists, 400 for a namespaced object without namespace; with
   *   `seed: false` whatever a create over HTTP answers.
   */
  create<T extends KubeObject>(res: ResourceRef, obj: T, opts: { seed?: boolean } = {}): T {
    const r = resolveServedResource(res);
    return this.#registry.create(r, obj.metadata.namespace ?? "", obj, {
      seed: opts.seed ?? true,
    }) as T;
  }

  /**
   * A copy of an object.
   *
   * @throws {StatusError} 404 with the real message when missing.
   */
  get<T extends KubeObject>(res: ResourceRef, name: string, namespace = ""): T {
    return this.#registry.get(resolveServedResource(res), namespace, name) as T;
  }

  /** A copy of an object, or undefined. */
  find<T extends KubeObject>(res: ResourceRef, name: string, namespace = ""): T | undefined {
    return this.#registry.find(resolveServedResource(res), namespace, name) as T | undefined;
  }

  /** Copies of the objects of a resource (one namespace, or all). */
  list<T extends KubeObject>(res: ResourceRef, namespace?: string): ObjectList<T> {
    const list = this.#registry.list(resolveServedResource(res), namespace);
    return { items: list.items as T[], resourceVersion: String(list.resourceVersion) };
  }

  /** Replaces an object as a PUT does (same checks, same events). */
  update<T extends KubeObject>(
    res: ResourceRef,
    obj: T,
    opts: { subresource?: "status" } = {},
  ): T {
    return this.#registry.update(
      resolveServedResource(res),
      obj.metadata.namespace ?? "",
      obj.metadata.name,
      obj,
      { subresource: opts.subresource ?? "" },
    ) as T;
  }

  /** Patches an object as a PATCH does (same checks, same events). */
  patch<T extends KubeObject>(
    res: ResourceRef,
    name: string,
    patch: Patch,
    opts: { namespace?: string; subresource?: "status" } = {},
  ): T {
    return this.#registry.patch(resolveServedResource(res), opts.namespace ?? "", name, patch, {
      subresource: opts.subresource ?? "",
    }) as T;
  }

  /**
   * Deletes an object as a DELETE does: with finalizers it only gets a deletionTimestamp.
   * Returns the object's state after the call.
   */
  delete<T extends KubeObject>(res: ResourceRef, name: string, namespace = ""): T {
    return this.#registry.delete(resolveServedResource(res), namespace, name) as T;
  }

  /**
   * Calls `fn` with the resource (plural) of each watch list (`sendInitialEvents=true`) once its
   * last initial event is written: the body is pulled in chunks, so this is when the client has
   * read the list. Returns the unsubscribe function.
   */
  onWatchListSent(fn: (resource: string) => void): () => void {
    return this.#hub.onWatchListSent((request) => fn(request.resource.plural));
  }

  /** Calls `fn` synchronously after every change; returns the unsubscribe function. */
  onEvent(fn: (ev: ApiServerEvent) => void): () => void {
    return this.#registry.subscribe((ev) =>
      fn({
        type: ev.type,
        resource: ev.resource.plural,
        namespace: ev.object.metadata.namespace ?? "",
        name: ev.object.metadata.name,
        resourceVersion: String(ev.resourceVersion),
        object: ev.object,
      })
    );
  }

  /** Sends a BOOKMARK at the current resourceVersion on every watch that allows them. */
  bookmark(): void {
    this.#hub.bookmark();
  }

  /** Ends every open watch stream, as an API server restart or a load balancer would. */
  closeWatches(): void {
    this.#hub.closeAll();
  }

  /** Resolves once at least `count` watch streams are open. */
  whenWatching(count = 1): Promise<void> {
    if (this.#hub.size >= count) return Promise.resolve();
    return new Promise((resolve) => this.#watchWaiters.push({ count, resolve }));
  }

  /** Drops the event history: watches from an older resourceVersion then get 410 Expired. */
  compact(): void {
    this.#registry.compact();
  }

  /** Ends open watches, cancels pending delays and stops the server. */
  async close(): Promise<void> {
    this.#closing.abort(new Error("server closed"));
    this.#compactionTimer?.cancel();
    this.#compactionTimer = undefined;
    this.#hub.dispose();
    for (const w of this.#watchWaiters) w.resolve();
    this.#watchWaiters = [];
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) {
      await server.shutdown();
      await server.finished;
    }
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The next compaction: to `seen`, the resourceVersion of the previous run. */
  #scheduleCompaction(seen: number): void {
    if (!(this.#compactionIntervalMs > 0) || this.#closing.signal.aborted) return;
    this.#compactionTimer = this.#clock.setTimer(this.#compactionIntervalMs, () => {
      const now = this.#registry.resourceVersion;
      this.#registry.compactTo(seen);
      this.#scheduleCompaction(now);
    });
  }

  #listen(port: number): Promise<void> {
    return new Promise((resolve) => {
      this.#server = Deno.serve({
        hostname: "127.0.0.1",
        port,
        onListen: (addr) => {
          this.#url = `http://127.0.0.1:${addr.port}`;
          resolve();
        },
      }, (req) => this.#handle(req));
    });
  }

  async #handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const query = Object.fromEntries(url.searchParams);
    const contentType = (req.headers.get("content-type") ?? "").split(";")[0]?.trim()
      .toLowerCase() ?? "";
    // A protobuf body is read into its JSON form and then decoded as JSON would be. Without the
    // .proto files, only a Lease (the Go sidecar's leader election) is understood; any other
    // protobuf body stays undecodable (415).
    let text: string;
    let bodyType = contentType;
    let protobufError: StatusError | undefined;
    if (contentType === KUBE_PROTOBUF) {
      const bytes = new Uint8Array(await req.arrayBuffer());
      let decoded: Record<string, unknown> | undefined;
      if (this.#media.protobuf && bytes.length > 0) {
        try {
          decoded = this.#media.decodeBody(bytes);
        } catch (err) {
          if (!(err instanceof StatusError)) throw err;
          protobufError = err;
        }
      } else {
        decoded = decodeKubeProtobuf(bytes);
      }
      text = decoded === undefined ? new TextDecoder().decode(bytes) : JSON.stringify(decoded);
      if (decoded !== undefined) bodyType = "application/json";
    } else {
      text = await req.text();
    }
    let body: unknown = undefined;
    let bodyError: unknown = undefined;
    if (text.trim() !== "") {
      try {
        body = JSON.parse(text);
      } catch (err) {
        body = text;
        bodyError = err;
      }
    }
    const path = parsePath(url.pathname);
    const watch = req.method === "GET" && parseListOptions(query).watch;
    const name = path?.name ?? "";
    const record: RecordedRequest = {
      method: req.method,
      path: url.pathname,
      verb: path?.valid ? verbOf(req.method, name, watch) : "",
      resource: path?.plural ?? "",
      name,
      subresource: path?.subresource ?? "",
      namespace: path?.namespace ?? "",
      query,
      contentType,
      body,
      watch,
      userAgent: req.headers.get("user-agent") ?? "",
      accept: req.headers.get("accept") ?? "",
      responseType: "",
    };
    this.#requests.push(record);

    if (path === undefined || !servesGroupVersion(path.group, path.version)) {
      return pageNotFound();
    }
    // Errors are written in the type the Accept negotiates, JSON when none fits.
    let out: MediaType = this.#media.errorType(record.accept);
    try {
      const route = this.#route(path);
      const fault = this.#takeFault(record);
      if (fault?.delayMs !== undefined) {
        await this.#delay(fault.delayMs);
      }
      const injected = fault?.status !== undefined
        ? errorForCode(fault.status, route.resource, route.name, fault.message)
        : undefined;
      if (injected !== undefined && fault?.applyChange !== true) {
        return faultResponse(this.#media, out, injected, fault?.retryAfterSeconds);
      }
      if (req.method === "PATCH" && !PATCH_TYPES.includes(contentType)) {
        // The router refuses a patch type no route consumes before the body is read.
        throw unsupportedPatchType();
      }
      // The router's Accept check, then the handler's negotiation.
      const routerError = this.#media.routerError(
        record.accept,
        req.method === "GET" && route.name === "",
      );
      if (routerError !== undefined) throw routerError;
      out = this.#media.negotiate(record.accept).mediaType;
      record.responseType = out;
      if (req.method === "PATCH" && (bodyError !== undefined || text.trim() === "")) {
        // apiserver endpoints/handlers/patch.go, validateAndTranscodePatch (v1.37): a body that
        // is not JSON is refused before it is decoded as the patch type.
        throw badRequest("invalid JSON patch");
      }
      if (protobufError !== undefined && (req.method === "POST" || req.method === "PUT")) {
        throw protobufError;
      }
      const response = watch ? this.#watch(route, query, record) : await this.#serve(
        out,
        req.method,
        route,
        bodyType,
        { parsed: body, text },
        query,
        query.fieldManager ?? managerOf(record.userAgent),
      );
      if (injected !== undefined) {
        await response.body?.cancel();
        return faultResponse(this.#media, out, injected, fault?.retryAfterSeconds);
      }
      return response;
    } catch (err) {
      if (err instanceof StatusError) {
        return this.#media.negotiable(record.accept)
          ? this.#media.error(out, err)
          : this.#media.rawJsonError(err);
      }
      const message = err instanceof Error ? err.message : String(err);
      return this.#media.respond(
        out,
        500,
        failureStatus(500, "InternalError", `Internal error occurred: ${message}`),
      );
    }
  }

  /** The served resource a path names, or a 404 error. */
  #route(path: ParsedPath | undefined): Route {
    if (path === undefined || !path.valid) throw unknownPath();
    const resource = findServedResource(path.group, path.version, path.plural);
    if (resource === undefined) throw unknownPath();
    if (!resource.namespaced && path.namespace !== "") throw unknownPath();
    let subresource: Route["subresource"] = "";
    if (path.subresource !== "") {
      if (path.subresource !== "status" || !resource.statusSubresource || path.name === "") {
        throw unknownPath();
      }
      subresource = "status";
    }
    return { resource, namespace: path.namespace, name: path.name, subresource };
  }

  #serve(
    out: MediaType,
    method: string,
    route: Route,
    contentType: string,
    request: { parsed: unknown; text: string },
    query: Record<string, string>,
    manager: string,
  ): Response | Promise<Response> {
    const body = request.parsed;
    const { resource: res, namespace, name, subresource } = route;
    const registry = this.#registry;
    if (res.namespaced && namespace === "" && !(method === "GET" && name === "")) {
      throw unknownPath();
    }
    switch (method) {
      case "GET": {
        if (name !== "") return this.#media.respond(out, 200, registry.get(res, namespace, name));
        const opts = parseListOptions(query);
        const causes = validateListOptions(opts);
        if (causes.length > 0) throw invalidListOptions(causes);
        const wanted = opts.resourceVersion;
        if (wanted !== "") {
          const parseError = resourceVersionParseError(wanted);
          if (parseError !== undefined) throw invalidListResourceVersion(parseError);
          if (Number(wanted) > registry.resourceVersion) {
            return this.#reach(Number(wanted)).then((reached) => {
              if (!reached) throw resourceVersionTooLarge(wanted, registry.resourceVersion);
              return this.#listResponse(out, res, namespace, opts);
            });
          }
        }
        return this.#listResponse(out, res, namespace, opts);
      }
      case "POST": {
        if (name !== "") throw methodNotAllowed();
        const decoded = this.#decode(res, contentType, request.text, query);
        return this.#media.respond(
          out,
          201,
          registry.create(res, namespace, decoded.body, { seed: false, manager }),
          decoded.warnings,
        );
      }
      case "PUT": {
        if (name === "") throw methodNotAllowed();
        const decoded = this.#decode(res, contentType, request.text, query);
        return this.#media.respond(
          out,
          200,
          registry.update(res, namespace, name, decoded.body, {
            subresource,
            manager,
            validate: true,
          }),
          decoded.warnings,
        );
      }
      case "PATCH": {
        if (name === "") throw methodNotAllowed();
        let type: "merge" | "json";
        // A strategic merge patch is applied as a JSON merge patch. For the fields of the served
        // resources the two agree except on lists with a patch strategy: SMP merges
        // `metadata.finalizers` and `ownerReferences` by value/key where a merge patch replaces
        // the whole list (and `$patch`/`$deleteFromPrimitiveList` directives are not understood).
        // Clients here send whole lists, so replacing them is an acceptable approximation.
        if (contentType === MERGE_PATCH || contentType === STRATEGIC_MERGE_PATCH) type = "merge";
        else if (contentType === JSON_PATCH) type = "json";
        else throw unsupportedPatchType();
        return this.#media.respond(
          out,
          200,
          registry.patch(res, namespace, name, { type, body }, {
            subresource,
            manager,
            validate: true,
          }),
        );
      }
      case "DELETE":
        if (name === "" || subresource !== "") throw methodNotAllowed();
        return this.#media.respond(out, 200, registry.delete(res, namespace, name));
      default:
        throw methodNotAllowed();
    }
  }

  /**
   * A list of `res` (one namespace, or all when ""), or one page of it with `limit`: then
   * `metadata.continue` names the next page, which is served from the same state (the snapshot
   * is kept until a compaction passes its resourceVersion, then the token gets 410 Expired).
   */
  #listResponse(
    out: MediaType,
    res: ServedResource,
    namespace: string,
    opts: ListOptions,
  ): Response {
    let items: StoredObject[];
    let rv: number;
    let start = "";
    if (opts.continue !== "") {
      const token = decodeContinue(opts.continue);
      rv = token.rv;
      start = token.start;
      if (rv < 0) {
        // The token of a 410 answer: the rest of the list at the latest state.
        const list = this.#registry.list(res, namespace === "" ? undefined : namespace);
        items = list.items;
        rv = list.resourceVersion;
      } else {
        const snapshot = this.#snapshots.get(snapshotKey(res, namespace, rv));
        if (snapshot === undefined || rv < this.#registry.compactedResourceVersion) {
          throw continueExpired(encodeContinue(-1, token.start));
        }
        items = snapshot;
      }
    } else {
      const list = this.#registry.list(res, namespace === "" ? undefined : namespace);
      items = list.items;
      rv = list.resourceVersion;
    }
    const metadata: Record<string, unknown> = { resourceVersion: String(rv) };
    let page = items.filter((item) => objectKey(item) >= start);
    if (opts.limit > 0 && page.length > opts.limit) {
      const rest = page.length - opts.limit;
      page = page.slice(0, opts.limit);
      this.#snapshots.set(snapshotKey(res, namespace, rv), items);
      this.#dropCompactedSnapshots();
      metadata.continue = encodeContinue(rv, objectKey(page.at(-1)!) + "\u0000");
      metadata.remainingItemCount = rest;
    }
    // The real server's list items carry no kind or apiVersion (only the list does).
    return this.#media.respondList(
      out,
      { kind: res.listKind, apiVersion: apiVersionOf(res), metadata },
      page,
    );
  }

  /** Forgets the list snapshots a compaction made unreachable. */
  #dropCompactedSnapshots(): void {
    const compacted = this.#registry.compactedResourceVersion;
    for (const key of this.#snapshots.keys()) {
      if (Number(key.split("/")[0]) < compacted) this.#snapshots.delete(key);
    }
  }

  /**
   * Resolves true once the resourceVersion reaches `rv`, false after 3 s on the server's clock
   * (the real server's wait for a list "not older than" a resourceVersion it has not seen).
   */
  #reach(rv: number): Promise<boolean> {
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const signal = this.#closing.signal;
    const done = (reached: boolean) => {
      unsubscribe();
      timer.cancel();
      signal.removeEventListener("abort", onAbort);
      resolve(reached);
    };
    const onAbort = () => done(false);
    const unsubscribe = this.#registry.subscribe(() => {
      if (this.#registry.resourceVersion >= rv) done(true);
    });
    const timer = this.#clock.setTimer(3000, () => done(false));
    signal.addEventListener("abort", onAbort);
    return promise;
  }

  /**
   * Decoding, field validation and defaulting of a create or update body, as the real server's
   * decoder does ({@link decodeObjectBody}), then the resource's defaults.
   */
  #decode(
    res: ServedResource,
    contentType: string,
    text: string,
    query: Record<string, string>,
  ): DecodedBody {
    const decoded = decodeObjectBody(res, contentType, text, query.fieldValidation ?? "");
    res.applyDefaults?.(decoded.body);
    return decoded;
  }

  #watch(route: Route, query: Record<string, string>, record: RecordedRequest): Response {
    if (route.name !== "") throw methodNotAllowed();
    const parseError = query.timeoutSeconds === undefined
      ? undefined
      : parseIntError(query.timeoutSeconds);
    if (parseError !== undefined) throw badRequest(parseError);
    const timeout = query.timeoutSeconds === undefined ? undefined : Number(query.timeoutSeconds);
    if (timeout !== undefined && !(Number.isInteger(timeout) && timeout >= 0)) {
      throw badRequest(`timeoutSeconds: Invalid value: "${query.timeoutSeconds}"`);
    }
    const opts = parseListOptions(query);
    const causes = validateListOptions(opts);
    if (causes.length > 0) throw invalidListOptions(causes);
    // serveWatch (apiserver endpoints/handlers/watch.go) negotiates the stream form after the
    // options are checked: YAML has none.
    const format = this.#media.negotiate(record.accept, true).mediaType;
    record.responseType = watchContentType(format);
    const encodeLine = this.#media.watchEncoder(format);
    const stream = this.#hub.open({
      resource: route.resource,
      namespace: route.namespace,
      resourceVersion: opts.resourceVersion,
      ...(opts.sendInitialEvents === undefined
        ? {}
        : { sendInitialEvents: opts.sendInitialEvents }),
      allowBookmarks: opts.allowWatchBookmarks,
      timeoutSeconds: timeout,
      ...(encodeLine === undefined ? {} : { encodeLine }),
    });
    this.#notifyWatchWaiters();
    return new Response(stream, {
      status: 200,
      headers: { "content-type": watchContentType(format), "cache-control": "no-cache, private" },
    });
  }

  #notifyWatchWaiters(): void {
    const size = this.#hub.size;
    const ready = this.#watchWaiters.filter((w) => size >= w.count);
    this.#watchWaiters = this.#watchWaiters.filter((w) => size < w.count);
    for (const w of ready) w.resolve();
  }

  #takeFault(record: RecordedRequest): FaultSpec | undefined {
    const i = this.#faults.findIndex(({ spec }) =>
      (spec.verb === undefined || spec.verb === record.verb) &&
      (spec.method === undefined || spec.method.toUpperCase() === record.method) &&
      (spec.resource === undefined || spec.resource === record.resource) &&
      (spec.subresource === undefined || spec.subresource === record.subresource) &&
      (spec.name === undefined || spec.name === record.name) &&
      (spec.namespace === undefined || spec.namespace === record.namespace)
    );
    const fault = this.#faults[i];
    if (fault === undefined) return undefined;
    fault.left -= 1;
    if (fault.left <= 0) this.#faults.splice(i, 1);
    return fault.spec;
  }

  async #delay(ms: number): Promise<void> {
    const signal = this.#closing.signal;
    if (signal.aborted) throw errorForCodeUnavailable();
    const aborted = await this.#clock.sleep(ms, signal).then(() => false, (err: unknown) => {
      if (signal.aborted) return true;
      throw err;
    });
    if (aborted) throw errorForCodeUnavailable();
  }
}

/** 503 while the server shuts down. */
function errorForCodeUnavailable(): StatusError {
  return new StatusError(
    failureStatus(503, "ServiceUnavailable", "the server is shutting down"),
  );
}
