/**
 * Our attacher as users run it: `deno run -A main.ts` (or a bundle) as a child process against the
 * local cluster, authenticated as the attacher's own user.
 *
 * @module
 */

import type { ClusterInfo } from "./cluster.ts";
import { ManagedProcess } from "./process.ts";

/** Options of {@link startAttacher}. */
export interface AttacherOptions {
  /** Distinguishes replicas: the log file name and the leader-election identity (`HOSTNAME`). */
  name: string;
  /** Extra command-line flags. */
  args?: string[];
  /** Program to run; default the repository's `main.ts`. A `.js` bundle works the same. */
  entry?: string;
  /** `--v`; default 5 (gRPC calls are logged). */
  verbosity?: number;
  /** Kill the attacher once this process is gone. */
  ownerPid?: number;
}

/** The repository's entry point. */
export const MAIN_TS = new URL("../../main.ts", import.meta.url).pathname;

/**
 * Starts one attacher replica: `--kubeconfig` of the attacher user, `--csi-address` of the
 * driver socket, short retry intervals, and the reconciler slowed down (the mock driver's
 * ListVolumes reports every volume as published, which would trigger forced re-publishes).
 */
export function startAttacher(cluster: ClusterInfo, options: AttacherOptions): ManagedProcess {
  return ManagedProcess.start({
    name: `attacher ${options.name}`,
    cmd: Deno.execPath(),
    args: [
      "run",
      "-A",
      "--quiet",
      options.entry ?? MAIN_TS,
      `--kubeconfig=${cluster.attacherKubeconfig}`,
      `--csi-address=${cluster.driverSocket}`,
      `--v=${options.verbosity ?? 5}`,
      "--retry-interval-start=500ms",
      "--retry-interval-max=5s",
      "--reconcile-sync=10m",
      ...(options.args ?? []),
    ],
    env: { HOSTNAME: options.name, NO_COLOR: "1" },
    logFile: `${cluster.dir}/logs/attacher-${options.name}.log`,
    ownerPid: options.ownerPid,
  });
}
