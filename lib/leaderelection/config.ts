/**
 * Where the leader election's Lease lives and who this replica is, as csi-lib-utils'
 * `leaderelection` package decides them for the CSI sidecars.
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
