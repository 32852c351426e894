/**
 * What a benchmark run needs from its surroundings (an API server with the run's objects and a CSI
 * driver), independent of whether they are the in-memory fakes or a real cluster.
 *
 * @module
 */

import type { FixtureSpec } from "./fixtures.ts";
import type { RequestCounts } from "./request_counts.ts";
import type { TimelineReport, WaitAnswer, WaitTarget } from "./timeline.ts";

/**
 * An API server and a CSI driver, seeded with one run's CSINodes, PVs and volumes. Every method
 * works on the objects of {@link BenchEnvironment.spec}; one environment serves one run.
 */
export interface BenchEnvironment {
  /** Short description for the report, e.g. `fake (MemoryApiServer + ExampleDriver)`. */
  readonly description: string;
  /** The run's objects. */
  readonly spec: FixtureSpec;
  /** A kubeconfig file for the attacher. */
  readonly kubeconfigPath: string;
  /** The driver's CSI endpoint (a unix socket path). */
  readonly csiAddress: string;
  /** Creates the canary VolumeAttachment. */
  createCanary(): Promise<void>;
  /** Creates every measured VolumeAttachment at once. */
  startAttach(): Promise<void>;
  /** Deletes every measured VolumeAttachment at once. */
  startDetach(): Promise<void>;
  /** Creates the detach flood's probe VolumeAttachment (`FLOOD_PROBE`). */
  createFloodProbe(): Promise<void>;
  /** Resolves when the target is reached or after `timeoutMs` (then `done` is false). */
  wait(target: WaitTarget, timeoutMs: number): Promise<WaitAnswer>;
  /** API requests made by anyone but the benchmark since the last call, then forgets them. */
  takeRequests(): Promise<RequestCounts>;
  /** CSI calls received by the driver since the last call, by method; then forgets them. */
  takeCsiCalls(): Promise<Record<string, number>>;
  /** Per-object latencies and phase times as the API server saw them. */
  timeline(): Promise<TimelineReport>;
  /** Every change of a Lease's holder so far, oldest first (environments that record them). */
  leaseHolders?(): Promise<LeaseHolderChange[]>;
  /**
   * Every watch list (`sendInitialEvents=true`) whose last initial event the API server has
   * written, oldest first (environments that record them).
   */
  watchListsSent?(): Promise<WatchListSent[]>;
  /** The environment's own processes (API server, driver) by role, for context figures. */
  helperPids(): Record<string, number>;
  /** Stops everything the environment started and removes its files. */
  close(): Promise<void>;
}

/** A Lease got a new holder ("" when released) at `at` (epoch ms, the API server's view). */
export interface LeaseHolderChange {
  lease: string;
  holder: string;
  at: number;
}

/** A watch list of `resource` (plural) written to the end at `at` (epoch ms, the server's). */
export interface WatchListSent {
  resource: string;
  at: number;
}

/**
 * Makes a fresh environment for one run. The environment picks the driver name (the one its CSI
 * driver reports); the resulting {@link BenchEnvironment.spec} has it.
 */
export type EnvironmentFactory = (
  params: Omit<FixtureSpec, "driver">,
) => Promise<BenchEnvironment>;
