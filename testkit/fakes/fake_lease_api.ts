/**
 * An in-memory fake of the {@link KubeApi} calls leader election makes: get, create and update
 * of Leases, and create of Events. One {@link FakeLeaseStore} holds the objects; each replica
 * under test gets its own {@link FakeLeaseApi} client on it, so faults can be injected per
 * replica.
 *
 * Storage semantics follow the API server: every write bumps `metadata.resourceVersion`; an
 * update whose resourceVersion is stale fails with 409 Conflict; creating an existing Lease
 * fails with 409 AlreadyExists; getting a missing one fails with 404 NotFound; a Lease time that
 * is not a MicroTime with exactly six fraction digits fails with 400 BadRequest.
 *
 * @module
 */

import {
  ApiError,
  EVENTS,
  type KubeApi,
  LEASES,
  type ObjectList,
  type ObjectOptions,
  type Resource,
  type WatchEvent,
} from "../../attacher/kube/api.ts";
import type { KubeObject, Lease } from "../../attacher/kube/types.ts";

/** One request a {@link FakeLeaseApi} received. */
export interface FakeRequest {
  verb: "get" | "create" | "update";
  /** Plural resource name: `leases` or `events`. */
  resource: string;
  namespace: string;
  name: string;
  /** A copy of the body of create and update. */
  body?: KubeObject;
}

/** What {@link FakeLeaseApi.onRequest} decides for a request. */
export type FakeOutcome =
  /** Serve it from the store. */
  | undefined
  /** Fail it with this error (the store is not touched). */
  | Error
  /** Hold it until its signal aborts (then it rejects with the signal's reason). */
  | "hang";

const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The shared objects: Leases by namespace and name, and every Event created. */
export class FakeLeaseStore {
  #leases = new Map<string, Lease>();
  #rv = 100;
  #uid = 0;
  /** Every Event created, oldest first. */
  readonly events: KubeObject[] = [];

  /** A new client on this store. */
  client(): FakeLeaseApi {
    return new FakeLeaseApi(this);
  }

  /** A copy of the Lease, or undefined. */
  lease(namespace: string, name: string): Lease | undefined {
    const lease = this.#leases.get(key(namespace, name));
    return lease === undefined ? undefined : structuredClone(lease);
  }

  /**
   * Writes `lease` unconditionally, as another writer would, and returns the stored copy with
   * its new resourceVersion.
   */
  putLease(lease: Lease): Lease {
    const namespace = lease.metadata.namespace ?? "";
    const old = this.#leases.get(key(namespace, lease.metadata.name));
    const stored = structuredClone(lease);
    stored.metadata.uid = old?.metadata.uid ?? `uid-${++this.#uid}`;
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#leases.set(key(namespace, lease.metadata.name), stored);
    return structuredClone(stored);
  }

  /** Serves a get. */
  get(namespace: string, name: string): Lease {
    const lease = this.lease(namespace, name);
    if (lease === undefined) {
      throw new ApiError(404, "NotFound", `leases.coordination.k8s.io "${name}" not found`);
    }
    return lease;
  }

  /** Serves a create. */
  create(namespace: string, lease: Lease): Lease {
    const name = lease.metadata.name;
    if (this.#leases.has(key(namespace, name))) {
      throw new ApiError(
        409,
        "AlreadyExists",
        `leases.coordination.k8s.io "${name}" already exists`,
      );
    }
    validateTimes(lease);
    return this.putLease({ ...lease, metadata: { ...lease.metadata, namespace } });
  }

  /** Serves an update (PUT), optimistic on resourceVersion when one is given. */
  update(namespace: string, lease: Lease): Lease {
    const name = lease.metadata.name;
    const old = this.#leases.get(key(namespace, name));
    if (old === undefined) {
      throw new ApiError(404, "NotFound", `leases.coordination.k8s.io "${name}" not found`);
    }
    const rv = lease.metadata.resourceVersion;
    if (rv !== undefined && rv !== "" && rv !== old.metadata.resourceVersion) {
      throw new ApiError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on leases.coordination.k8s.io "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    validateTimes(lease);
    return this.putLease({ ...lease, metadata: { ...lease.metadata, namespace } });
  }

  /** Serves an Event create. */
  createEvent(namespace: string, event: KubeObject): KubeObject {
    const stored = structuredClone(event);
    stored.metadata.namespace = namespace;
    stored.metadata.resourceVersion = String(++this.#rv);
    this.events.push(stored);
    return structuredClone(stored);
  }
}

/**
 * A {@link KubeApi} client of a {@link FakeLeaseStore}. Only get, create and update of Leases
 * and create of Events are supported; anything else throws TypeError.
 */
export class FakeLeaseApi implements KubeApi {
  #store: FakeLeaseStore;
  #hung = new Set<(err: unknown) => void>();
  /** Every request received, in order (failed and hung ones included). */
  readonly requests: FakeRequest[] = [];
  /** Decides the fate of each request before the store sees it; undefined serves everything. */
  onRequest: ((req: FakeRequest) => FakeOutcome) | undefined;

  constructor(store: FakeLeaseStore) {
    this.#store = store;
  }

  /** How many requests are hanging now. */
  get hanging(): number {
    return this.#hung.size;
  }

  /** Rejects every hanging request with `err`. */
  releaseHung(err: unknown = new ApiError(0, "", "connection closed")): void {
    for (const reject of [...this.#hung]) reject(err);
  }

  /** The requests received since the last call, as `verb resource/name`. */
  takeRequests(): string[] {
    const taken = this.requests.splice(0).map((r) => `${r.verb} ${r.resource}/${r.name}`);
    return taken;
  }

  get<T extends KubeObject>(res: Resource, name: string, opts?: ObjectOptions): Promise<T> {
    const req: FakeRequest = { verb: "get", resource: res.plural, namespace: ns(opts), name };
    return this.#serve(req, opts?.signal, () => {
      onlyLeases(res, "get");
      return this.#store.get(req.namespace, name) as KubeObject as T;
    });
  }

  create<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions): Promise<T> {
    const req: FakeRequest = {
      verb: "create",
      resource: res.plural,
      namespace: ns(opts),
      name: obj.metadata.name,
      body: structuredClone(obj),
    };
    return this.#serve(req, opts?.signal, () => {
      if (res === EVENTS) return this.#store.createEvent(req.namespace, obj) as T;
      onlyLeases(res, "create");
      return this.#store.create(req.namespace, obj as KubeObject as Lease) as KubeObject as T;
    });
  }

  update<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions): Promise<T> {
    const req: FakeRequest = {
      verb: "update",
      resource: res.plural,
      namespace: ns(opts),
      name: obj.metadata.name,
      body: structuredClone(obj),
    };
    return this.#serve(req, opts?.signal, () => {
      onlyLeases(res, "update");
      return this.#store.update(req.namespace, obj as KubeObject as Lease) as KubeObject as T;
    });
  }

  list<T extends KubeObject>(): Promise<ObjectList<T>> {
    return Promise.reject(new TypeError("FakeLeaseApi does not support list"));
  }

  watch<T extends KubeObject>(): AsyncIterable<WatchEvent<T>> {
    throw new TypeError("FakeLeaseApi does not support watch");
  }

  patch<T extends KubeObject>(): Promise<T> {
    return Promise.reject(new TypeError("FakeLeaseApi does not support patch"));
  }

  delete(): Promise<void> {
    return Promise.reject(new TypeError("FakeLeaseApi does not support delete"));
  }

  /** Records `req`, applies {@link onRequest}, then serves it on a later microtask. */
  #serve<T>(req: FakeRequest, signal: AbortSignal | undefined, serve: () => T): Promise<T> {
    this.requests.push(req);
    if (signal?.aborted) return Promise.reject(signal.reason);
    const outcome = this.onRequest?.(req);
    if (outcome instanceof Error) return Promise.reject(outcome);
    if (outcome === "hang") {
      return new Promise<T>((_resolve, reject) => {
        const settle = (err: unknown) => {
          this.#hung.delete(settle);
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        };
        const onAbort = () => settle(signal?.reason);
        this.#hung.add(settle);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    }
    return Promise.resolve().then(serve);
  }
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function ns(opts: ObjectOptions | undefined): string {
  return opts?.namespace ?? "";
}

function onlyLeases(res: Resource, verb: string): void {
  if (res !== LEASES) throw new TypeError(`FakeLeaseApi does not support ${verb} of ${res.plural}`);
}

/** The API server's MicroTime parsing: exactly six fraction digits, or a 400. */
function validateTimes(lease: Lease): void {
  for (const field of ["acquireTime", "renewTime"] as const) {
    const value = lease.spec?.[field];
    if (value !== undefined && value !== null && !MICRO_TIME.test(value)) {
      throw new ApiError(
        400,
        "BadRequest",
        `Lease in version "v1" cannot be handled as a Lease: parsing time "${value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse`,
      );
    }
  }
}
