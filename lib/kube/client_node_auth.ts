/**
 * What only `@kubernetes/client-node` does for a connection: `exec` and `auth-provider` (OIDC,
 * cloud) credential plugins, behind the credential seam (a function giving the headers of the
 * next request). `./config.ts` imports this module
 * dynamically, only for a kubeconfig that needs it, because client-node costs tens of MiB once
 * loaded. Only `KubeConfig` is imported, so a bundle keeps just the part of client-node it uses.
 *
 * @module
 */

import { KubeConfig } from "@kubernetes/client-node";

/**
 * Request headers carrying credentials, as `./config.ts` `CredentialHeaders` (the same shape,
 * written here so that this module imports nothing of `./config.ts`, which loads it).
 */
type CredentialHeaders = Record<string, string | string[]>;

/**
 * The credential headers an `exec` or `auth-provider` plugin gives, fresh on each call
 * (client-node caches the token until it expires and runs the plugin again then).
 *
 * @param plugin the user's `exec` or `auth-provider` mapping as the kubeconfig has it, paths
 *   already resolved.
 */
export function pluginCredentials(
  kind: "exec" | "auth-provider",
  plugin: Record<string, unknown>,
): () => Promise<CredentialHeaders> {
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(
    { name: "credentials", server: "http://credentials.invalid", skipTLSVerify: true },
    kind === "exec" ? { name: "plugin", exec: plugin } : { name: "plugin", authProvider: plugin },
  );
  return async () => {
    const opts: { headers?: Record<string, unknown> } = {};
    await kc.applyToHTTPSOptions(opts);
    const out: CredentialHeaders = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (v === undefined) continue;
      out[k] = Array.isArray(v) ? v.map(String) : String(v);
    }
    return out;
  };
}
