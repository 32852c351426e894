/**
 * Where the API server connection comes from: an explicit kubeconfig file (`--kubeconfig`), the
 * in-cluster service account, or the usual default locations. The result is a client-node
 * `KubeConfig`, used by {@link import("./client.ts").KubeClient} for configuration and
 * authentication only.
 *
 * Nothing here reads the environment: `main.ts` passes the values it read.
 *
 * @module
 */

import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { isIPv6 } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";

/** Where the service account files are mounted in a pod. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** The in-cluster API server address, from `KUBERNETES_SERVICE_HOST` / `_PORT`. */
export interface InClusterEnv {
  host: string;
  port: string;
  /** Directory with `ca.crt`, `token` and `namespace`; default {@link SERVICE_ACCOUNT_DIR}. */
  serviceAccountDir?: string;
}

/** Inputs of {@link loadKubeConfig}. */
export interface LoadKubeConfigOptions {
  /** `--kubeconfig`: when set, only this file is used. */
  kubeconfigPath?: string;
  /** Set when `KUBERNETES_SERVICE_HOST` is set: in-cluster configuration. */
  inCluster?: InClusterEnv;
  /** `KUBECONFIG` (a path list), for the default loading. */
  kubeconfigEnv?: string;
  /** `HOME`, for the default loading (`$HOME/.kube/config`). */
  home?: string;
}

/**
 * Loads the connection configuration, in the order client-go's callers use:
 * 1. `kubeconfigPath` set → that file (relative certificate paths resolved against its folder);
 * 2. `inCluster` set → the service account token (re-read by client-node every 60 s, so rotated
 *    projected tokens are picked up) and CA, server `https://host:port`, as `rest.InClusterConfig`;
 * 3. otherwise the files of `kubeconfigEnv` (merged, first one wins) or `home/.kube/config`.
 *
 * @throws {Error} when no configuration is found or it has no current cluster; the message names
 *   the file, never its content.
 */
export function loadKubeConfig(options: LoadKubeConfigOptions): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfigPath !== undefined && options.kubeconfigPath !== "") {
    loadFile(kc, options.kubeconfigPath);
  } else if (options.inCluster !== undefined && options.inCluster.host !== "") {
    loadInCluster(kc, options.inCluster);
  } else {
    const files = (options.kubeconfigEnv ?? "").split(delimiter).filter((f) => f !== "");
    if (files.length === 0 && options.home !== undefined && options.home !== "") {
      const file = join(options.home, ".kube", "config");
      if (existsSync(file)) files.push(file);
    }
    const [first, ...more] = files;
    if (first === undefined) {
      throw new Error(
        "no Kubernetes configuration: not running in a cluster (KUBERNETES_SERVICE_HOST is " +
          "not set), no --kubeconfig, no KUBECONFIG and no ~/.kube/config",
      );
    }
    loadFile(kc, first);
    for (const file of more) {
      const other = new KubeConfig();
      loadFile(other, file);
      kc.mergeConfig(other, true);
    }
  }
  if (kc.getCurrentCluster() === null) {
    throw new Error(`kubeconfig has no current cluster (current context "${kc.currentContext}")`);
  }
  return kc;
}

/** Loads one kubeconfig file, wrapping read and parse errors with the file name. */
function loadFile(kc: KubeConfig, file: string): void {
  try {
    kc.loadFromFile(file);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load kubeconfig ${file}: ${reason}`, { cause: err });
  }
}

/**
 * The in-cluster configuration, as client-node's `loadFromCluster` builds it but from the given
 * values instead of the process environment.
 */
function loadInCluster(kc: KubeConfig, env: InClusterEnv): void {
  const dir = env.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const host = isIPv6(env.host) ? `[${env.host}]` : env.host;
  if (env.port === "") {
    throw new Error(
      "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and " +
        "KUBERNETES_SERVICE_PORT must be defined",
    );
  }
  kc.loadFromClusterAndUser(
    {
      name: "inCluster",
      server: `https://${host}:${env.port}`,
      caFile: join(dir, "ca.crt"),
      skipTLSVerify: false,
    },
    {
      name: "inClusterUser",
      authProvider: { name: "tokenFile", config: { tokenFile: join(dir, "token") } },
    },
  );
}
