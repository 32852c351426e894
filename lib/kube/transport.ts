/**
 * How {@link import("./client.ts").KubeClient} sends its requests: HTTP/1.1 over `Deno.connect` /
 * `Deno.connectTls` (`../wire/http1/transport.ts`); `fetch` with a `Deno.HttpClient` built from the
 * connection's TLS material (`./fetch_transport.ts`) when a proxy environment variable is set; or,
 * for what neither can do, a `node:https` agent (`./node_transport.ts`, loaded with a dynamic
 * `import()` only then: `node:http` costs megabytes once loaded).
 *
 * The transport contract and its error type belong to the HTTP/1.1 transport
 * (`../wire/http1/api.ts`, `../wire/http1/errors.ts`); the other two map their failures to the
 * same {@link import("../wire/http1/errors.ts").TransportError} kinds.
 *
 * @module
 */

import type { ClusterConnection } from "./config.ts";
import type { Transport } from "../wire/http1/api.ts";
import { Http1Transport } from "../wire/http1/transport.ts";
import { FetchTransport } from "./fetch_transport.ts";

export type {
  RequestUrl,
  TlsMaterial,
  Transport,
  TransportRequest,
  TransportResponse,
} from "../wire/http1/api.ts";

/**
 * Why a connection needs the `node:https` transport, or undefined when `fetch` can carry it.
 * `Deno.createHttpClient` has no option to skip the server certificate check or to check it
 * against another name than the URL's host, and a `proxy-url` goes through client-node's agent.
 */
export function nodeTransportReason(
  server: URL,
  connection: ClusterConnection,
): "proxy-url" | "insecure-skip-tls-verify" | "tls-server-name" | undefined {
  if (connection.proxyAgent !== undefined) return "proxy-url";
  // Neither setting means anything for plain HTTP.
  if (server.protocol !== "https:") return undefined;
  if (connection.tls.insecureSkipTlsVerify) return "insecure-skip-tls-verify";
  if (connection.tls.serverName !== undefined && connection.tls.serverName !== "") {
    return "tls-server-name";
  }
  return undefined;
}

/** The environment variables that name a proxy, in the order Go's `httpproxy.FromEnvironment` reads them. */
export const PROXY_VARIABLES: readonly string[] = Object.freeze([
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
]);

/**
 * The proxy variables of the process environment, by name ({@link PROXY_VARIABLES}); `main.ts`
 * reads them, nothing in `lib/` reads the environment.
 */
export type ProxyEnvironment = Readonly<Record<string, string | undefined>>;

/**
 * The transport for `connection`: HTTP/1.1 over `Deno.connect` / `Deno.connectTls`
 * (`../wire/http1/transport.ts`) unless it needs `node:https`, or `fetch` when a proxy variable of
 * `proxyEnvironment` applies to the server's scheme (`fetch` honours them and `NO_PROXY`, as
 * client-go's `http.ProxyFromEnvironment` does).
 */
export async function createTransport(
  server: URL,
  connection: ClusterConnection,
  proxyEnvironment: ProxyEnvironment = {},
): Promise<Transport> {
  if (nodeTransportReason(server, connection) === undefined) {
    return proxyVariable(server, (name) => proxyEnvironment[name]) === undefined
      ? new Http1Transport(connection.tls)
      : new FetchTransport(connection.tls);
  }
  const { NodeTransport } = await import("./node_transport.ts");
  return await NodeTransport.create(server, connection);
}

/**
 * The proxy variable set for `server`'s scheme (`HTTPS_PROXY` or `HTTP_PROXY`, either case, as
 * Go's `httpproxy.FromEnvironment` reads them) according to `lookup`, or undefined. A lookup that
 * throws (no permission to read the environment) finds none.
 */
export function proxyVariable(
  server: URL,
  lookup: (name: string) => string | undefined,
): string | undefined {
  const names = server.protocol === "https:"
    ? PROXY_VARIABLES.slice(0, 2)
    : PROXY_VARIABLES.slice(2);
  for (const name of names) {
    try {
      const value = lookup(name);
      if (value !== undefined && value !== "") return name;
    } catch {
      return undefined;
    }
  }
  return undefined;
}
