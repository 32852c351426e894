/**
 * How {@link import("../client.ts").KubeClient} sends its requests: one transport per
 * configuration, as client-go has one `http.Transport` per configuration. With HTTP/2 on
 * ({@link http2Enabled}), an `https:` server that picks `h2` in its TLS handshake gets one HTTP/2
 * connection for every request and watch (`../../wire/http2/transport.ts`), as client-go's; HTTP/1.1
 * (`../../wire/http1/transport.ts`) carries the rest, where client-go keeps HTTP/1.1 too: proxies,
 * `http:` servers, servers without `h2`, and TLS settings only `node:tls` can express. Metrics and
 * request logs are the client's, the same over both.
 *
 * The proxy is the kubeconfig cluster's `proxy-url` when it has one (client-go's `rest.Config.Proxy`
 * set from it by `clientcmd`), else the environment's, by the rules of Go's
 * `http.ProxyFromEnvironment` (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, either case; client-go's
 * `SetTransportDefaults` installs it). Those rules are `../../wire/http1/proxy.ts`'s.
 *
 * @module
 */

import type { ClusterConnection } from "../config.ts";
import type { Transport } from "../../wire/http1/api.ts";
import { Http1Transport } from "../../wire/http1/transport.ts";
import { Http2Transport } from "../../wire/http2/transport.ts";
import { PROXY_ENVIRONMENT_VARIABLES, proxyFunc, proxySettings } from "../../wire/http1/proxy.ts";

export type {
  RequestUrl,
  TlsMaterial,
  Transport,
  TransportRequest,
  TransportResponse,
} from "../../wire/http1/api.ts";

/** The environment variables that choose a proxy (`../../wire/http1/proxy.ts`). */
export const PROXY_VARIABLES: readonly string[] = PROXY_ENVIRONMENT_VARIABLES;

/**
 * client-go's switch: set to anything non-empty, HTTP/1.1 only (`utilnet.SetTransportDefaults`
 * in k8s.io/apimachinery/pkg/util/net/http.go reads `DISABLE_HTTP2`).
 */
export const DISABLE_HTTP2 = "DISABLE_HTTP2";
/** Set to anything non-empty (and {@link DISABLE_HTTP2} unset): HTTP/2 where it is offered. */
export const ENABLE_HTTP2 = "ENABLE_HTTP2";
/** Whether HTTP/2 is tried when neither variable is set. */
export const HTTP2_BY_DEFAULT = false;

/** Every variable {@link createTransport} reads: the proxy ones and the HTTP/2 switches. */
export const TRANSPORT_VARIABLES: readonly string[] = [
  ...PROXY_ENVIRONMENT_VARIABLES,
  DISABLE_HTTP2,
  ENABLE_HTTP2,
];

/** True when `environment` lets the client try HTTP/2 (see {@link DISABLE_HTTP2}). */
export function http2Enabled(environment: ProxyEnvironment): boolean {
  if ((environment[DISABLE_HTTP2] ?? "") !== "") return false;
  if ((environment[ENABLE_HTTP2] ?? "") !== "") return true;
  return HTTP2_BY_DEFAULT;
}

/**
 * The variables of the process environment the transport reads, by name
 * ({@link TRANSPORT_VARIABLES}); `main.ts` reads them, nothing in `lib/` reads the environment.
 */
export type ProxyEnvironment = Readonly<Record<string, string | undefined>>;

/**
 * The transport for `connection`: through `connection.proxyUrl` when set, else through the proxy
 * `proxyEnvironment` names for each request's URL (HTTP/1.1), else directly; HTTP/2 where the
 * server offers it when {@link http2Enabled}.
 */
export function createTransport(
  connection: ClusterConnection,
  proxyEnvironment: ProxyEnvironment = {},
): Transport {
  const fixed = connection.proxyUrl;
  const proxy = fixed !== undefined
    ? () => fixed
    : proxyFunc(proxySettings((name) => proxyEnvironment[name]));
  const http1 = new Http1Transport(connection.tls, { proxy });
  if (!http2Enabled(proxyEnvironment)) return http1;
  return new Http2Transport(connection.tls, { fallback: http1, proxy });
}
