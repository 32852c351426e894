/**
 * How {@link import("./client.ts").KubeClient} sends its requests: the one HTTP/1.1 transport
 * (`../wire/http1/transport.ts`) for every connection, direct or through a proxy, whatever its
 * TLS settings, as client-go has one `http.Transport` per configuration.
 *
 * The proxy is the kubeconfig cluster's `proxy-url` when it has one (client-go's `rest.Config.Proxy`
 * set from it by `clientcmd`), else the environment's, by the rules of Go's
 * `http.ProxyFromEnvironment` (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, either case; client-go's
 * `SetTransportDefaults` installs it). Those rules are `../wire/http1/proxy.ts`'s.
 *
 * @module
 */

import type { ClusterConnection } from "./config.ts";
import type { Transport } from "../wire/http1/api.ts";
import { Http1Transport } from "../wire/http1/transport.ts";
import { PROXY_ENVIRONMENT_VARIABLES, proxyFunc, proxySettings } from "../wire/http1/proxy.ts";

export type {
  RequestUrl,
  TlsMaterial,
  Transport,
  TransportRequest,
  TransportResponse,
} from "../wire/http1/api.ts";

/** The environment variables that choose a proxy (`../wire/http1/proxy.ts`). */
export const PROXY_VARIABLES: readonly string[] = PROXY_ENVIRONMENT_VARIABLES;

/**
 * The proxy variables of the process environment, by name ({@link PROXY_VARIABLES}); `main.ts`
 * reads them, nothing in `lib/` reads the environment.
 */
export type ProxyEnvironment = Readonly<Record<string, string | undefined>>;

/**
 * The transport for `connection`: through `connection.proxyUrl` when set, else through the proxy
 * `proxyEnvironment` names for each request's URL, else directly.
 */
export function createTransport(
  connection: ClusterConnection,
  proxyEnvironment: ProxyEnvironment = {},
): Transport {
  const fixed = connection.proxyUrl;
  const proxy = fixed !== undefined
    ? () => fixed
    : proxyFunc(proxySettings((name) => proxyEnvironment[name]));
  return new Http1Transport(connection.tls, { proxy });
}
