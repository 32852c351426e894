/**
 * What each end-to-end scenario gets: the cluster, the node names that have a CSINode for the
 * driver, and a way to start attacher replicas that are stopped when the scenario ends.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type AttacherOptions, startAttacher } from "./attacher_process.ts";
import { DEFAULT_KUBERNETES, type KubernetesRelease } from "./binaries.ts";
import type { LocalCluster } from "./cluster.ts";
import { ScenarioKit } from "./kit.ts";
import type { ManagedProcess } from "./process.ts";
import {
  countRepeatedUnpublishes,
  describeRepublishes,
  findRepublishes,
  type ReplicaLog,
  type Republish,
  type RepublishCause,
} from "./publish_analysis.ts";

/** Options of a {@link ScenarioContext}. */
export interface ScenarioContextOptions {
  /** Name prefix of everything the scenario creates. */
  prefix: string;
  /** Nodes with a CSINode listing the driver. */
  nodes: readonly string[];
  /** Program the attachers run (main.ts or a bundle). */
  attacherEntry?: string;
  /**
   * Causes of repeated publishes that are reported as warnings instead of failures (known
   * attacher issues, see `E2E_TOLERATE`).
   */
  tolerate?: ReadonlySet<RepublishCause>;
  /** The Kubernetes release the cluster runs; default {@link DEFAULT_KUBERNETES}. */
  kubernetes?: KubernetesRelease;
}

/** One scenario's resources. Call {@link ScenarioContext.close} at the end, also on failure. */
export class ScenarioContext {
  readonly cluster: LocalCluster;
  readonly kit: ScenarioKit;
  readonly nodes: readonly string[];
  /** The Kubernetes release the cluster runs (where its controllers' behaviour differs). */
  readonly kubernetes: KubernetesRelease;
  readonly #entry: string | undefined;
  readonly #attachers: ManagedProcess[] = [];
  readonly #prefix: string;
  readonly #tolerate: ReadonlySet<RepublishCause>;

  constructor(cluster: LocalCluster, options: ScenarioContextOptions) {
    this.#tolerate = options.tolerate ?? new Set();
    this.cluster = cluster;
    this.nodes = options.nodes;
    this.kubernetes = options.kubernetes ?? DEFAULT_KUBERNETES;
    this.#prefix = options.prefix;
    this.#entry = options.attacherEntry;
    this.kit = new ScenarioKit(cluster, options.prefix);
  }

  /** The node ID the driver accepts (the mock driver serves one node, named as the driver). */
  get nodeId(): string {
    return this.cluster.info.driverName;
  }

  /**
   * Starts an attacher replica named `<prefix>-<name>`; it is stopped by {@link close}. It runs
   * the suite's attacher program unless `options.entry` names another (e.g. the Go csi-attacher).
   */
  startAttacher(
    name: string,
    options: Omit<AttacherOptions, "name"> = {},
  ): ManagedProcess {
    const process = startAttacher(this.cluster.info, {
      ...options,
      name: `${this.#prefix}-${name}`,
      entry: options.entry ?? this.#entry,
      ownerPid: this.cluster.ownerPid,
    });
    this.#attachers.push(process);
    return process;
  }

  /** The logs of every attacher replica started so far. */
  async attacherLogs(): Promise<ReplicaLog[]> {
    return await Promise.all(
      this.#attachers.map(async (p) => ({ replica: p.spec.name, text: await p.output() })),
    );
  }

  /**
   * Repeated ControllerPublishVolume calls of this scenario's VolumeAttachments (by default those
   * named with its prefix; the attach/detach controller's are `csi-…`), explained.
   */
  async republishes(vaPrefix = `${this.#prefix}-`): Promise<Republish[]> {
    return findRepublishes(await this.attacherLogs(), vaPrefix);
  }

  /**
   * Fails when a VolumeAttachment was published more than once for a cause outside `allowed`
   * (tolerated causes only print a warning). Returns the repeated publishes accepted, so driver
   * call counts can be checked against them.
   */
  async checkRepublishes(
    allowed: readonly RepublishCause[],
    what: string,
    vaPrefix?: string,
  ): Promise<Republish[]> {
    const all = await this.republishes(vaPrefix);
    const tolerated = all.filter((r) => !allowed.includes(r.cause) && this.#tolerate.has(r.cause));
    for (const line of describeRepublishes(tolerated)) {
      console.log(`    WARNING (tolerated, E2E_TOLERATE): repeated publish, ${line}`);
    }
    const failing = all.filter((r) => !allowed.includes(r.cause) && !this.#tolerate.has(r.cause));
    assert.deepEqual(describeRepublishes(failing), [], what);
    return all.filter((r) => !failing.includes(r));
  }

  /**
   * One line for the suite's output: this scenario's repeated ControllerPublishVolume calls, by
   * cause, and repeated ControllerUnpublishVolume calls, as the attachers logged them.
   */
  async repeatedCallsSummary(): Promise<string> {
    const logs = await this.attacherLogs();
    const republishes = findRepublishes(logs, `${this.#prefix}-`);
    const causes = new Map<string, number>();
    for (const r of republishes) causes.set(r.cause, (causes.get(r.cause) ?? 0) + 1);
    const byCause = [...causes].map(([cause, n]) => `${cause} ${n}`).join(", ");
    const unpublishes = countRepeatedUnpublishes(logs, `${this.#prefix}-`);
    return `repeated publishes: ${republishes.length}${byCause ? ` (${byCause})` : ""}; ` +
      `repeated unpublishes: ${unpublishes}`;
  }

  /** True while any attacher of this scenario runs. */
  get attacherRunning(): boolean {
    return this.#attachers.some((p) => p.exitStatus === undefined);
  }

  /** Cleans up the scenario's objects (detaching through a running attacher), then stops attachers. */
  async close(): Promise<void> {
    try {
      await this.kit.cleanup(this.attacherRunning);
    } finally {
      // Also those that exited: their group may still hold the watchdog shell.
      for (const p of this.#attachers) await p.stop(20_000);
    }
  }
}
