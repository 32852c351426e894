/**
 * The cluster chaos run's workload: a stream of VolumeAttachment lifecycles, each with its own
 * driver volume and PV: create the volume, the PV and the VolumeAttachment, wait until it is
 * attached, hold it a moment, delete the VolumeAttachment and wait until it is gone, delete the
 * PV and wait until it is gone (our finalizer on it goes once no VolumeAttachment names it).
 * The states are read by one poller (a list of each every 500 ms), and every request is retried
 * while kube-apiserver or the driver restarts.
 *
 * @module
 */

import type { PersistentVolume, VolumeAttachment } from "../../../lib/kube/types.ts";
import type { Prng } from "../../chaos/prng.ts";
import type { DriverClient } from "../driver_client.ts";
import { sleep } from "../kit.ts";
import { PATHS, persistentVolume, volumeAttachment } from "../objects.ts";
import type { RawApi } from "../raw_api.ts";
import type { LifecycleRecord } from "./checker.ts";

/** What the workload runs against. */
export interface WorkloadOptions {
  api: RawApi;
  /** The suite's driver client (a new one after each driver restart). */
  driver: () => DriverClient;
  driverName: string;
  nodes: readonly string[];
  /** Name prefix of the objects. */
  prefix: string;
  /** Choices of node and hold time. */
  prng: Prng;
  /** Lifecycles in flight at most. */
  maxInFlight: number;
  /** A new lifecycle starts at most this often, ms. */
  startEveryMs: number;
}

const POLL_MS = 500;
const RETRY_MS = 300;

/** Runs lifecycles; {@link Workload.lifecycles} holds what happened to each. */
export class Workload {
  readonly lifecycles: LifecycleRecord[] = [];
  readonly #options: WorkloadOptions;
  /** VolumeAttachments of the last successful poll, and whether each is attached. */
  #vas = new Map<string, boolean>();
  #pvs = new Set<string>();
  /** Number of successful polls so far. */
  #polls = 0;
  #deadline = 0;

  constructor(options: WorkloadOptions) {
    this.#options = options;
  }

  /** The VolumeAttachments of the last poll (name → attached). */
  get volumeAttachments(): ReadonlyMap<string, boolean> {
    return this.#vas;
  }

  /**
   * Starts lifecycles until `stopStartingAt`, then waits for those in flight; gives up on a
   * lifecycle at `deadline` (ms since the epoch). Resolves when every lifecycle has ended.
   */
  async run(stopStartingAt: number, deadline: number): Promise<void> {
    this.#deadline = deadline;
    let running = true;
    const poller = (async () => {
      while (running) {
        await this.#poll();
        await sleep(POLL_MS);
      }
    })();
    const inFlight = new Set<Promise<void>>();
    try {
      for (let i = 0; Date.now() < stopStartingAt; i++) {
        while (inFlight.size >= this.#options.maxInFlight && Date.now() < stopStartingAt) {
          await Promise.race([...inFlight, sleep(POLL_MS)]);
        }
        if (Date.now() >= stopStartingAt) break;
        const p = this.#lifecycle(i).finally(() => inFlight.delete(p));
        inFlight.add(p);
        await sleep(this.#options.startEveryMs);
      }
      await Promise.all(inFlight);
    } finally {
      running = false;
      await poller;
    }
  }

  async #poll(): Promise<void> {
    const { api, prefix } = this.#options;
    try {
      const vas = await api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
      const pvs = await api.getOk<{ items: PersistentVolume[] }>(PATHS.persistentVolumes);
      this.#vas = new Map(
        vas.items.filter((va) => va.metadata.name.startsWith(prefix))
          .map((va) => [va.metadata.name, va.status?.attached === true]),
      );
      this.#pvs = new Set(pvs.items.map((pv) => pv.metadata.name));
      this.#polls++;
    } catch {
      // kube-apiserver restarting: the next poll reads again.
    }
  }

  async #retry<T>(what: string, fn: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (Date.now() >= this.#deadline) {
          throw new Error(`${what}: ${err instanceof Error ? err.message : err}`);
        }
        await sleep(RETRY_MS);
      }
    }
  }

  /** Waits until `test` holds for a poll made after this call; false at the deadline. */
  async #until(test: () => boolean): Promise<boolean> {
    const after = this.#polls;
    while (Date.now() < this.#deadline) {
      if (this.#polls > after && test()) return true;
      await sleep(100);
    }
    return false;
  }

  async #lifecycle(i: number): Promise<void> {
    const { api, prng, prefix, driverName, nodes } = this.#options;
    const name = `${prefix}-${i}`;
    const node = prng.pick(nodes);
    const holdMs = prng.int(1_000);
    const record: LifecycleRecord = { va: name, pv: name, volumeId: "" };
    this.lifecycles.push(record);
    const create = async (path: string, obj: unknown) => {
      const res = await api.request("POST", path, { body: obj });
      if (res.status !== 201 && res.status !== 409) {
        throw new Error(`POST ${path}: HTTP ${res.status}`);
      }
    };
    try {
      // CreateVolume is idempotent by name: a retry after a lost answer gets the same volume.
      record.volumeId = await this.#retry(
        "CreateVolume",
        () => this.#options.driver().createVolume(name, 5_000),
      );
      await this.#retry(
        "create PV",
        () => create(PATHS.persistentVolumes, persistentVolume(name, driverName, record.volumeId)),
      );
      await this.#retry(
        "create VolumeAttachment",
        () => create(PATHS.volumeAttachments, volumeAttachment(name, driverName, node, name)),
      );
      if (!await this.#until(() => this.#vas.get(name) === true)) {
        throw new Error("not attached by the deadline");
      }
      record.attachedAt = Date.now();
      await sleep(holdMs);
      await this.#retry(
        "delete VolumeAttachment",
        () => api.deleteOk(`${PATHS.volumeAttachments}/${name}`),
      );
      if (!await this.#until(() => !this.#vas.has(name))) {
        throw new Error("VolumeAttachment not gone by the deadline");
      }
      await this.#retry("delete PV", () => api.deleteOk(`${PATHS.persistentVolumes}/${name}`));
      if (!await this.#until(() => !this.#pvs.has(name))) {
        throw new Error("PV not gone by the deadline");
      }
      record.goneAt = Date.now();
    } catch (err) {
      record.error = err instanceof Error ? err.message : String(err);
    }
  }
}
