/**
 * The Lease the election reads and writes, client-go's `resourcelock.LeaseLock`
 * (`tools/leaderelection/resourcelock/leaselock.go`: `Get`, `Create`, `Update`, `RecordEvent`):
 * it keeps the Lease object last returned by the API server, whose `resourceVersion` makes the
 * next update optimistic (409 Conflict when another replica wrote since).
 *
 * @module
 */

import { type KubeApi, LEASES } from "../kube/api.ts";
import type { Lease, ObjectReference } from "../kube/types.ts";
import { type LeaderElectionRecord, recordOf, specOf } from "./record.ts";

/** Where the Lease lives, and the labels merged into it on every write. */
export interface LeaseLockOptions {
  name: string;
  namespace: string;
  /** Merged into `metadata.labels` on every create and update; none when undefined. */
  labels: Record<string, string> | undefined;
}

/** One Lease, read and written through {@link KubeApi}; see the module doc. */
export class LeaseLock {
  #kube: KubeApi;
  #name: string;
  #namespace: string;
  #labels: Record<string, string> | undefined;
  /** The Lease object last returned by the server, the base of the next update. */
  #lease: Lease | undefined;

  constructor(kube: KubeApi, opts: LeaseLockOptions) {
    this.#kube = kube;
    this.#name = opts.name;
    this.#namespace = opts.namespace;
    this.#labels = opts.labels;
  }

  /** True once a get or create returned the Lease: an update has a base. */
  get initialized(): boolean {
    return this.#lease !== undefined;
  }

  /**
   * Reads the Lease and keeps it as the base of the next update.
   *
   * @returns its election record
   * @throws the API error (NotFound when it does not exist)
   */
  async get(signal: AbortSignal): Promise<LeaderElectionRecord> {
    const lease = await this.#kube.get<Lease>(LEASES, this.#name, {
      namespace: this.#namespace,
      signal,
    });
    this.#lease = lease;
    return recordOf(lease);
  }

  /**
   * Creates the Lease with `record` as its spec.
   *
   * @throws the API error (409 AlreadyExists when another replica created it first)
   */
  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    const body: Lease = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: this.#name,
        namespace: this.#namespace,
        ...(this.#labels ? { labels: { ...this.#labels } } : {}),
      },
      spec: specOf(record),
    };
    this.#lease = await this.#kube.create<Lease>(LEASES, body, {
      namespace: this.#namespace,
      signal,
    });
  }

  /**
   * PUT of the last Lease read with `record` as its spec.
   *
   * @throws {Error} when no Lease was read or created yet; the API error (409 Conflict when
   *   someone wrote since)
   */
  async update(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    const base = this.#lease;
    if (base === undefined) throw new Error("Lease not initialized: call get or create first");
    const metadata = { ...base.metadata };
    if (this.#labels) metadata.labels = { ...(base.metadata.labels ?? {}), ...this.#labels };
    const body: Lease = {
      ...base,
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata,
      spec: specOf(record),
    };
    this.#lease = await this.#kube.update<Lease>(LEASES, body, {
      namespace: this.#namespace,
      signal,
    });
  }

  /** The reference an Event about the Lease carries; undefined before the Lease was seen. */
  reference(): ObjectReference | undefined {
    const lease = this.#lease;
    if (lease === undefined) return undefined;
    return {
      kind: "Lease",
      apiVersion: "coordination.k8s.io/v1",
      namespace: this.#namespace,
      name: this.#name,
      uid: lease.metadata.uid,
      resourceVersion: lease.metadata.resourceVersion,
    };
  }
}
