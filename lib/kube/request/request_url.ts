/**
 * Request URLs built as strings from the API server's URL, parsed once: a `new URL` per request,
 * with its `pathname` and `search` set and a `URLSearchParams` for the query, was 2.4-3.1 % of
 * the attacher's busy CPU at N=20 000 (`op_url_reparse` and the URL objects; issue 27).
 *
 * The result reads as the `URL` it replaces: `href` is the server's origin, its path (trailing
 * slashes dropped), the resource path and the query, where path segments are encoded with
 * `encodeURIComponent` and the query as `URLSearchParams` serializes it
 * (`application/x-www-form-urlencoded`, WHATWG URL standard section 5.2: every byte but
 * `*-._` and ASCII alphanumerics percent-encoded, a space as `+`). A user name or password in the
 * server URL is not carried over (client-go does not send them either; they are no credential
 * kubeconfig defines).
 *
 * @module
 */

import type { RequestUrl } from "../../wire/http1/api.ts";

/** The parts of the API server's URL every request URL shares. */
export interface ServerUrl {
  readonly protocol: string;
  readonly host: string;
  readonly hostname: string;
  readonly port: string;
  /** `protocol//host`. */
  readonly origin: string;
  /** The server URL's path without trailing slashes: "" or e.g. `/k8s/clusters/c-1`. */
  readonly basePath: string;
}

/** The shared parts of `server` (an `http:` or `https:` URL). */
export function serverUrl(server: URL): ServerUrl {
  return {
    protocol: server.protocol,
    host: server.host,
    hostname: server.hostname,
    port: server.port,
    origin: `${server.protocol}//${server.host}`,
    basePath: server.pathname.replace(/\/+$/, ""),
  };
}

const FORM_EXTRA = /[!'()~]/g;

/**
 * One query name or value as `URLSearchParams.toString()` encodes it (a lone surrogate as U+FFFD,
 * as a `USVString` conversion makes it).
 */
export function formEncode(text: string): string {
  return encodeURIComponent(text.toWellFormed())
    .replace(FORM_EXTRA, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replaceAll("%20", "+");
}

/**
 * The URL of `path` (below the server's base path, already encoded, starting with `/`) with
 * `query` in insertion order.
 */
export function requestUrl(
  server: ServerUrl,
  path: string,
  query?: Readonly<Record<string, string>>,
): RequestUrl {
  let search = "";
  if (query !== undefined) {
    for (const name in query) {
      search += `${search === "" ? "?" : "&"}${formEncode(name)}=${formEncode(query[name]!)}`;
    }
  }
  const pathname = server.basePath + path;
  return {
    href: server.origin + pathname + search,
    protocol: server.protocol,
    host: server.host,
    hostname: server.hostname,
    port: server.port,
    pathname,
    search,
  };
}
