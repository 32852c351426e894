/**
 * The narrow seam between the attacher and the Kubernetes API server.
 *
 * Production uses {@link import("./client.ts").KubeClient} (REST over the HTTP/1.1 transport of
 * `../wire/http1/`, with the connection `./config.ts` loads); tests use the same client against
 * the in-memory API server of the test kit, so every request is real HTTP.
 *
 * @module
 */

import type { LeaseFence } from "../lease_fence.ts";
import type { KubeObject } from "./types.ts";

/** Where a kind of object lives in the API. */
export interface Resource {
  /** API group, "" for the core group. */
  group: string;
  version: string;
  /** Plural resource name as in the URL, e.g. `volumeattachments`. */
  plural: string;
  /** Singular name, used in client-go style messages (`persistentvolume "pv1" not found`). */
  singular: string;
  namespaced: boolean;
}

/** VolumeAttachments, `storage.k8s.io/v1`. */
export const VOLUME_ATTACHMENTS: Resource = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "volumeattachments",
  singular: "volumeattachment",
  namespaced: false,
};
/** PersistentVolumes, core `v1`. */
export const PERSISTENT_VOLUMES: Resource = {
  group: "",
  version: "v1",
  plural: "persistentvolumes",
  singular: "persistentvolume",
  namespaced: false,
};
/** CSINodes, `storage.k8s.io/v1`. */
export const CSI_NODES: Resource = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "csinodes",
  singular: "csinode",
  namespaced: false,
};
/** Secrets, core `v1`. */
export const SECRETS: Resource = {
  group: "",
  version: "v1",
  plural: "secrets",
  singular: "secret",
  namespaced: true,
};
/** Leases, `coordination.k8s.io/v1`. */
export const LEASES: Resource = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  singular: "lease",
  namespaced: true,
};
/** Events, core `v1`. */
export const EVENTS: Resource = {
  group: "",
  version: "v1",
  plural: "events",
  singular: "event",
  namespaced: true,
};

/** `plural.group`, or `plural` for the core group: the name used in API error messages. */
export function qualifiedResource(res: Resource): string {
  return res.group === "" ? res.plural : `${res.plural}.${res.group}`;
}

/** A patch and its content type. */
export type Patch =
  /** JSON merge patch (RFC 7386), `application/merge-patch+json`. */
  | { type: "merge"; body: unknown }
  /** JSON patch (RFC 6902), `application/json-patch+json`. */
  | { type: "json"; body: JsonPatchOp[] };

/** One RFC 6902 operation. */
export interface JsonPatchOp {
  op: "add" | "remove" | "replace" | "test" | "move" | "copy";
  path: string;
  value?: unknown;
  from?: string;
}

/** A page of a list. */
export interface ObjectList<T> {
  items: T[];
  /** `metadata.resourceVersion` of the list. */
  resourceVersion: string;
  /** `metadata.continue`: the token of the next page; absent or "" on the last page. */
  continue?: string;
}

/** Options of {@link KubeApi.list}. */
export interface ListOptions extends ObjectOptions {
  resourceVersion?: string;
  /** Page size (`limit`); unset or 0: the whole list in one answer. */
  limit?: number;
  /** The `continue` token of the previous page. */
  continue?: string;
}

/** One watch event; BOOKMARK objects carry only `metadata.resourceVersion`. */
export type WatchEvent<T> =
  | { type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK"; object: T }
  | { type: "ERROR"; object: import("./types.ts").Status };

/** Options of a request on one object. */
export interface ObjectOptions {
  namespace?: string;
  signal?: AbortSignal;
  /**
   * The lease fence of a write made for the leader (create, update, patch, delete): asked after
   * the wait for the rate limiter and again immediately before each write of the request's bytes
   * to a connection, every retry included. When it says no the request is not sent (or not
   * finished: its connection is closed before the last byte) and the call rejects with
   * {@link import("../lease_fence.ts").FencedError}. Writes that need no lease (Lease renewals,
   * Events) and reads carry none.
   */
  fence?: LeaseFence;
}

/** Options of {@link KubeApi.watch}. */
export interface WatchOptions {
  namespace?: string;
  resourceVersion: string;
  /** Server-side timeout of the watch (`timeoutSeconds`). */
  timeoutSeconds: number;
  allowWatchBookmarks: boolean;
  /** Aborting ends the iteration without an error. */
  signal: AbortSignal;
  /**
   * Liveness: a watch that delivered neither an event nor a bookmark (nor its response headers)
   * for this long is closed and ends without an error, as if the server had closed it, so that
   * the caller resumes from its last resourceVersion on a new connection. Unset: no limit.
   */
  idleTimeoutMs?: number;
  /**
   * A watch list: the current objects as ADDED events first, ended by a BOOKMARK annotated
   * `k8s.io/initial-events-end: "true"` (sends `sendInitialEvents=true` and
   * `resourceVersionMatch=NotOlderThan`; needs `allowWatchBookmarks`).
   */
  sendInitialEvents?: boolean;
}

/** The calls the attacher makes. Every method rejects with {@link ApiError} on an HTTP error. */
export interface KubeApi {
  list<T extends KubeObject>(res: Resource, opts?: ListOptions): Promise<ObjectList<T>>;
  /**
   * Streams the events of a watch until the server closes it, the signal aborts, or the
   * connection fails (which rejects). An `ERROR` event (e.g. 410 Gone) is yielded as is.
   */
  watch<T extends KubeObject>(res: Resource, opts: WatchOptions): AsyncIterable<WatchEvent<T>>;
  get<T extends KubeObject>(res: Resource, name: string, opts?: ObjectOptions): Promise<T>;
  create<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions): Promise<T>;
  /** PUT of the whole object; optimistic on `metadata.resourceVersion` (409 on conflict). */
  update<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions): Promise<T>;
  patch<T extends KubeObject>(
    res: Resource,
    name: string,
    patch: Patch,
    opts?: ObjectOptions & { subresource?: "status" },
  ): Promise<T>;
  delete(res: Resource, name: string, opts?: ObjectOptions): Promise<void>;
}

/**
 * An error answer of the API server. `message` is the server's `Status.message`
 * (e.g. `secrets "s1" not found`), which is exactly what client-go's `err.Error()` gives, so error
 * texts saved into `attachError` match the Go attacher's.
 */
export class ApiError extends Error {
  /** HTTP status code; 0 when no answer came (connection error, timeout). */
  readonly code: number;
  /** `Status.reason`, e.g. `NotFound`, `Conflict`, `Expired`. */
  readonly reason: string;

  constructor(code: number, reason: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ApiError";
    this.code = code;
    this.reason = reason;
  }
}

/** True when `err` is an {@link ApiError} with HTTP status 404. */
export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.code === 404;
}

/** The NotFound error a cache lookup gives, worded as client-go's listers word it. */
export function notFoundError(res: Resource, name: string): ApiError {
  const what = res.group === "" ? res.singular : `${res.singular}.${res.group}`;
  return new ApiError(404, "NotFound", `${what} "${name}" not found`);
}
