/**
 * The Lease as each replica's leader elector reaches it in a chaos schedule: the
 * {@link MemoryApiServer}'s own Lease, read and written in-process (answered on the next
 * microtask, no faults), so the real `LeaderElector` runs on the replica's clock against the same
 * server the attacher's other requests go to. A killed replica's requests fail, as a dead
 * process's would never arrive.
 *
 * @module
 */

import {
  ApiError,
  type KubeApi,
  LEASES,
  type ObjectList,
  type ObjectOptions,
  type Patch,
  type Resource,
  type WatchEvent,
  type WatchOptions,
} from "../../lib/kube/api.ts";
import type { KubeObject, Lease } from "../../lib/kube/types.ts";
import type { Clock } from "../../lib/clock.ts";
import type { MemoryApiServer } from "../../testkit/apiserver/server.ts";

/** See the module doc. Only Leases; anything else is a test bug. */
export class LeaseApi implements KubeApi {
  readonly #server: MemoryApiServer;
  readonly #clock: Clock;
  readonly #identity: string;
  #dead = false;
  /**
   * When (the replica's clock) the last successful write naming this replica as holder was
   * sent: what the elector's fence counts from.
   */
  lastHeldWriteAt = -Infinity;

  constructor(server: MemoryApiServer, clock: Clock, identity: string) {
    this.#server = server;
    this.#clock = clock;
    this.#identity = identity;
  }

  /** The replica is gone: its requests fail from now on. */
  kill(): void {
    this.#dead = true;
  }

  get<T extends KubeObject>(res: Resource, name: string, opts: ObjectOptions = {}): Promise<T> {
    return this.#do(res, opts, () => this.#server.get<T>(LEASES, name, opts.namespace ?? ""));
  }

  create<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    const namespace = opts.namespace ?? obj.metadata.namespace;
    const sentAt = this.#clock.now();
    return this.#do(res, opts, () =>
      this.#held(
        this.#server.create<T>(LEASES, { ...obj, metadata: { ...obj.metadata, namespace } }, {
          seed: false,
        }),
        sentAt,
      ));
  }

  update<T extends KubeObject>(res: Resource, obj: T, opts: ObjectOptions = {}): Promise<T> {
    const namespace = opts.namespace ?? obj.metadata.namespace;
    const sentAt = this.#clock.now();
    return this.#do(res, opts, () =>
      this.#held(
        this.#server.update<T>(LEASES, { ...obj, metadata: { ...obj.metadata, namespace } }),
        sentAt,
      ));
  }

  list<T extends KubeObject>(): Promise<ObjectList<T>> {
    throw new Error("LeaseApi: the elector does not list");
  }

  watch<T extends KubeObject>(_res: Resource, _opts: WatchOptions): AsyncIterable<WatchEvent<T>> {
    throw new Error("LeaseApi: the elector does not watch");
  }

  patch<T extends KubeObject>(_res: Resource, _name: string, _patch: Patch): Promise<T> {
    throw new Error("LeaseApi: the elector does not patch");
  }

  delete(): Promise<void> {
    throw new Error("LeaseApi: the elector does not delete");
  }

  /** Records a stored Lease naming this replica. */
  #held<T extends KubeObject>(stored: T, sentAt: number): T {
    if ((stored as unknown as Lease).spec?.holderIdentity === this.#identity) {
      this.lastHeldWriteAt = Math.max(this.lastHeldWriteAt, sentAt);
    }
    return stored;
  }

  /** Runs `op` on the next microtask; the server's StatusErrors are ApiErrors already. */
  #do<T>(res: Resource, opts: ObjectOptions, op: () => T): Promise<T> {
    if (res.plural !== LEASES.plural) throw new Error(`LeaseApi: not a Lease: ${res.plural}`);
    if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);
    if (this.#dead) {
      return Promise.reject(new ApiError(0, "ConnectionError", "the replica is not running"));
    }
    return Promise.resolve().then(op);
  }
}
