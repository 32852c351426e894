/**
 * Where the leader election's Lease lives, what it is called and who this replica is, as csi-lib-utils'
 * `leaderelection` package decides them for the CSI sidecars; and the timing client-go's
 * `NewLeaderElector` accepts.
 *
 * @module
 */

import { sanitizeDriverName } from "../driver_name.ts";

/** The file holding the pod's namespace in a pod with a mounted service-account token. */
export const SERVICE_ACCOUNT_NAMESPACE_FILE =
  "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/** Where {@link leaderElectionNamespace} looks for the Lease namespace. */
export interface NamespaceSources {
  /** `--leader-election-namespace`; "" when not set. */
  flag: string;
  /** The `POD_NAMESPACE` environment variable, if set. */
  podNamespaceEnv?: string;
  /**
   * Reads {@link SERVICE_ACCOUNT_NAMESPACE_FILE}; returns undefined when it cannot be read.
   * Called only when the flag and the environment variable are empty.
   */
  readServiceAccountNamespace?: () => string | undefined;
}

/**
 * The Lease namespace, in csi-lib-utils' order: the flag, else `POD_NAMESPACE`, else the
 * trimmed service-account namespace file, else `default`. Empty values are skipped.
 *
 * @example
 * ```ts
 * leaderElectionNamespace({ flag: "", podNamespaceEnv: "kube-system" }); // "kube-system"
 * leaderElectionNamespace({ flag: "", readServiceAccountNamespace: () => "ns1\n" }); // "ns1"
 * leaderElectionNamespace({ flag: "" }); // "default"
 * ```
 */
export function leaderElectionNamespace(sources: NamespaceSources): string {
  if (sources.flag !== "") return sources.flag;
  if (sources.podNamespaceEnv !== undefined && sources.podNamespaceEnv !== "") {
    return sources.podNamespaceEnv;
  }
  const fromFile = sources.readServiceAccountNamespace?.()?.trim();
  if (fromFile !== undefined && fromFile !== "") return fromFile;
  return "default";
}

/**
 * This replica's identity: the hostname with every character outside `[a-zA-Z0-9-]` replaced
 * by `-` and an `X` appended after a trailing `-` (csi-lib-utils' `sanitizeName`, the same rule
 * as for driver names). An empty hostname gives "", which {@link LeaderElector} rejects.
 *
 * @example
 * ```ts
 * leaderIdentity("node-1.example.com"); // "node-1-example-com"
 * ```
 */
export function leaderIdentity(hostname: string): string {
  return hostname === "" ? "" : sanitizeDriverName(hostname);
}

/**
 * The Lease name for `driver`: `external-attacher-leader-<driver>`, sanitized whole
 * (external-attacher `cmd/csi-attacher/main.go`: `"external-attacher-leader-" + csiAttacher`,
 * through csi-lib-utils' `leaderelection.NewLeaderElection`, which sanitizes the lock name).
 */
export function leaseName(driver: string): string {
  return sanitizeDriverName(`external-attacher-leader-${driver}`);
}

/** client-go's `JitterFactor`: acquire attempts are spread over 1–2.2 retry periods. */
export const JITTER_FACTOR = 1.2;

/**
 * Checks the timing as client-go's `NewLeaderElector` does.
 *
 * @throws {RangeError} when a duration is not a positive finite number, when
 *   `leaseDurationMs <= renewDeadlineMs`, or when `renewDeadlineMs <= 1.2 × retryPeriodMs`.
 */
export function checkTiming(
  opts: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number },
): void {
  for (const key of ["leaseDurationMs", "renewDeadlineMs", "retryPeriodMs"] as const) {
    if (!Number.isFinite(opts[key])) {
      throw new RangeError(`Cannot create leader elector: ${key} must be a finite number`);
    }
  }
  if (opts.leaseDurationMs <= opts.renewDeadlineMs) {
    throw new RangeError("leaseDuration must be greater than renewDeadline");
  }
  if (opts.renewDeadlineMs <= JITTER_FACTOR * opts.retryPeriodMs) {
    throw new RangeError("renewDeadline must be greater than retryPeriod*JitterFactor");
  }
  if (opts.leaseDurationMs < 1) throw new RangeError("leaseDuration must be greater than zero");
  if (opts.renewDeadlineMs < 1) throw new RangeError("renewDeadline must be greater than zero");
  if (opts.retryPeriodMs < 1) throw new RangeError("retryPeriod must be greater than zero");
}
