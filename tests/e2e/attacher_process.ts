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
  /**
   * Program to run; default the repository's `main.ts`. `.ts`/`.js` files run with
   * `deno run -A` (a bundle works the same); anything else is executed as is (e.g. the Go
   * csi-attacher, to compare).
   */
  entry?: string;
  /** `--v`; default 5 (gRPC calls are logged). */
  verbosity?: number;
  /** Kill the attacher once this process is gone. */
  ownerPid?: number;
  /** `--kubeconfig`; default the attacher user's (e.g. one pointing through a proxy). */
  kubeconfig?: string;
  /**
   * Runs the program in its own UTS namespace (`unshare -u`) with `name` as its host name: the Go
   * csi-attacher takes its leader-election identity from the host name, not from `HOSTNAME`
   * (csi-lib-utils `leaderelection`, `defaultLeaderElectionIdentity`), so two Go replicas on one
   * machine need this to be told apart. Needs CAP_SYS_ADMIN.
   */
  ownHostname?: boolean;
}

/** The repository's entry point. */
export const MAIN_TS = new URL("../../main.ts", import.meta.url).pathname;

/**
 * Starts one attacher replica: `--kubeconfig` of the attacher user, `--csi-address` of the
 * driver socket, short retry intervals, and the reconciler slowed down (the mock driver's
 * ListVolumes reports every volume as published, which would trigger forced re-publishes).
 */
export function startAttacher(cluster: ClusterInfo, options: AttacherOptions): ManagedProcess {
  const entry = options.entry ?? MAIN_TS;
  const flags = [
    `--kubeconfig=${options.kubeconfig ?? cluster.attacherKubeconfig}`,
    `--csi-address=${cluster.driverSocket}`,
    `--v=${options.verbosity ?? 5}`,
    "--retry-interval-start=500ms",
    "--retry-interval-max=5s",
    "--reconcile-sync=10m",
    ...(options.args ?? []),
  ];
  const script = /\.(ts|js|mjs)$/.test(entry);
  let cmd = script ? Deno.execPath() : entry;
  let args = script ? ["run", "-A", "--quiet", entry, ...flags] : flags;
  if (options.ownHostname) {
    // unshare execs sh (no --fork), sh execs the program: the pid stays the program's.
    args = ["-u", "sh", "-c", 'hostname "$0" && exec "$@"', options.name, cmd, ...args];
    cmd = "unshare";
  }
  return ManagedProcess.start({
    name: `attacher ${options.name}`,
    cmd,
    args,
    env: { HOSTNAME: options.name, NO_COLOR: "1" },
    logFile: `${cluster.dir}/logs/attacher-${options.name}.log`,
    ownerPid: options.ownerPid,
  });
}
