/**
 * An in-memory fake of the {@link KubeApi} calls leader election makes: get, create and update
 * of Leases, and create of Events. One {@link FakeLeaseStore} holds the objects; each replica
 * under test gets its own {@link FakeLeaseApi} client on it, so faults can be injected per
 * replica.
 *
 * The objects live in an in-memory API server (`testkit/apiserver`), so storage follows the API
 * server: every write bumps `metadata.resourceVersion`; an update whose resourceVersion is stale
 * fails with 409 Conflict; creating an existing Lease fails with 409 AlreadyExists; getting a
 * missing one fails with 404 NotFound; a Lease time that is not a MicroTime with exactly six
 * fraction digits fails with 400 BadRequest.
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
} from "../../lib/kube/api.ts";
import type { KubeObject, Lease } from "../../lib/kube/types.ts";
import { MemoryApiServer } from "../apiserver/server.ts";

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

/**
 * The shared objects: Leases and Events in an in-memory API server, whose storage rules (the
 * resourceVersion on every write, 409 for a stale update or an existing name, 404, MicroTime
 * validation) are the ones the HTTP tests check against kube-apiserver.
 */
export class FakeLeaseStore {
  readonly #server = new MemoryApiServer();

  /** Every Event created, oldest first. */
  get events(): KubeObject[] {
    return this.#server.list<KubeObject>(EVENTS).items.sort((a, b) =>
      Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion)
    );
  }

  /** A new client on this store. */
  client(): FakeLeaseApi {
    return new FakeLeaseApi(this);
  }

  /** A copy of the Lease, or undefined. */
  lease(namespace: string, name: string): Lease | undefined {
    return this.#server.find<Lease>(LEASES, name, namespace);
  }

  /**
   * Writes `lease` unconditionally, as another writer would, and returns the stored copy with
   * its new resourceVersion.
   */
  putLease(lease: Lease): Lease {
    const namespace = lease.metadata.namespace ?? "";
    const old = this.lease(namespace, lease.metadata.name);
    if (old === undefined) {
      return this.#server.create<Lease>(LEASES, { ...lease, metadata: { ...lease.metadata } });
    }
    return this.#server.update<Lease>(LEASES, {
      ...lease,
      metadata: {
        ...lease.metadata,
        uid: old.metadata.uid,
        resourceVersion: old.metadata.resourceVersion,
      },
    });
  }

  /** Serves a get. */
  get(namespace: string, name: string): Lease {
    return this.#server.get<Lease>(LEASES, name, namespace);
  }

  /** Serves a create. */
  create(namespace: string, lease: Lease): Lease {
    return this.#server.create<Lease>(
      LEASES,
      { ...lease, metadata: { ...lease.metadata, namespace } },
      { seed: false },
    );
  }

  /** Serves an update (PUT), optimistic on resourceVersion. */
  update(namespace: string, lease: Lease): Lease {
    return this.#server.update<Lease>(LEASES, {
      ...lease,
      metadata: { ...lease.metadata, namespace },
    });
  }

  /** Serves an Event create. */
  createEvent(namespace: string, event: KubeObject): KubeObject {
    return this.#server.create<KubeObject>(
      EVENTS,
      { ...event, metadata: { ...event.metadata, namespace } },
      { seed: false },
    );
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

function ns(opts: ObjectOptions | undefined): string {
  return opts?.namespace ?? "";
}

function onlyLeases(res: Resource, verb: string): void {
  if (res !== LEASES) throw new TypeError(`FakeLeaseApi does not support ${verb} of ${res.plural}`);
}
