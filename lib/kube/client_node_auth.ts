/**
 * What only `@kubernetes/client-node` does for a connection: `exec` and `auth-provider` (OIDC,
 * cloud) credential plugins, and agents through a `proxy-url`. `./config.ts` imports this module
 * dynamically, only for a kubeconfig that needs it, because client-node costs tens of MiB once
 * loaded. Only `KubeConfig` is imported, so a bundle keeps just the part of client-node it uses.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import http from "node:http";
import { KubeConfig } from "@kubernetes/client-node";
import type { CredentialHeaders, TlsMaterial } from "./config.ts";

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

/**
 * The agent that reaches `server` through `proxyUrl` (http, https or socks), with the
 * connection's TLS material.
 *
 * @throws {TypeError} when client-node builds no agent for the proxy.
 */
export async function proxyAgent(
  server: string,
  tls: TlsMaterial,
  proxyUrl: string,
): Promise<http.Agent> {
  const b64 = (b: Uint8Array | undefined) =>
    b === undefined ? undefined : Buffer.from(b).toString("base64");
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(
    {
      name: "proxied",
      server,
      caData: b64(tls.ca),
      skipTLSVerify: tls.insecureSkipTlsVerify,
      tlsServerName: tls.serverName,
      proxyUrl,
    },
    { name: "proxied", certData: b64(tls.cert), keyData: b64(tls.key) },
  );
  const opts: { agent?: unknown } = {};
  await kc.applyToHTTPSOptions(opts);
  if (!(opts.agent instanceof http.Agent)) {
    throw new TypeError(`proxy-url ${proxyUrl}: client-node built no agent`);
  }
  return opts.agent;
}
