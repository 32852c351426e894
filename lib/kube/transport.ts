/**
 * How {@link import("./client.ts").KubeClient} sends its requests: HTTP/1.1 over `Deno.connect` /
 * `Deno.connectTls` (`./http1_transport.ts`); `fetch` with a `Deno.HttpClient` built from the
 * connection's TLS material ({@link FetchTransport}) when a proxy environment variable is set; or,
 * for what neither can do, a `node:https` agent (`./node_transport.ts`, loaded with a dynamic
 * `import()` only then: `node:http` costs megabytes once loaded).
 *
 * @module
 */

import type { ClusterConnection, TlsMaterial } from "./config.ts";
import { Http1Transport } from "../wire/http1/transport.ts";

/** The part of an answer the client reads; `fetch`'s `Response` has this shape. */
export interface TransportResponse {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  /** Errors with the request signal's reason when it aborts while the body is read. */
  readonly body: ReadableStream<Uint8Array> | null;
  /** The whole body as UTF-8 in one read, when the transport has a faster way than `body`. */
  text?(): Promise<string>;
}

/** One request. */
export interface TransportRequest {
  method: string;
  /** Header lines in order; a name may repeat and is then sent as separate lines. */
  headers: [string, string][];
  body?: string;
  /** Aborts the request, or the reading of its body, with the signal's reason. */
  signal: AbortSignal;
}

/** Sends requests over pooled connections. */
export interface Transport {
  /**
   * Counts {@link Transport.renew}s: read it before a request and pass it to `renew` when that
   * request found its connection silent.
   */
  readonly generation: number;
  /** Resolves with the status and headers; rejects with the signal's reason when it aborts. */
  send(url: URL, request: TransportRequest): Promise<TransportResponse>;
  /**
   * The connections of `generation` are suspect (a request on one of them got no answer): later
   * requests go out on new connections. Requests under way keep theirs until they end. Nothing
   * happens when the connections were renewed since `generation`.
   */
  renew(generation: number): void;
  /** Closes the idle connections; later requests fail. */
  close(): void;
}

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

/**
 * The transport for `connection`: HTTP/1.1 over `Deno.connect` / `Deno.connectTls`
 * (`./http1_transport.ts`) unless it needs `node:https`, or `fetch` when a proxy environment
 * variable applies to the server's scheme (`fetch` honours them and `NO_PROXY`, as client-go's
 * `http.ProxyFromEnvironment` does).
 */
export async function createTransport(
  server: URL,
  connection: ClusterConnection,
): Promise<Transport> {
  if (nodeTransportReason(server, connection) === undefined) {
    return proxyVariable(server) === undefined
      ? new Http1Transport(connection.tls)
      : new FetchTransport(connection.tls);
  }
  const { NodeTransport } = await import("./node_transport.ts");
  return await NodeTransport.create(server, connection);
}

/**
 * The proxy environment variable set for `server`'s scheme (`HTTPS_PROXY` or `HTTP_PROXY`, either
 * case, as Go's `httpproxy.FromEnvironment` reads them), or undefined. Without permission to read
 * the environment none is.
 */
export function proxyVariable(
  server: URL,
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): string | undefined {
  const names = server.protocol === "https:"
    ? ["HTTPS_PROXY", "https_proxy"]
    : ["HTTP_PROXY", "http_proxy"];
  for (const name of names) {
    try {
      const value = env(name);
      if (value !== undefined && value !== "") return name;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * `fetch` over one `Deno.HttpClient` at a time (HTTP/1.1 keep-alive, or HTTP/2 when a TLS server
 * offers it by ALPN, as client-go uses it). {@link FetchTransport.renew} closes the client and
 * the next request builds a new one: a pooled or multiplexed connection that went silent is then
 * never used again (aborting a request does not close its connection). client-go gets the same
 * from its HTTP/2 health check (`ReadIdleTimeout` in golang.org/x/net/http2, set by
 * k8s.io/client-go/transport), which closes a connection that stays silent.
 *
 * Closing a `Deno.HttpClient` closes its idle connections; requests under way keep theirs until
 * they end.
 *
 * Used when a proxy environment variable is set (see {@link createTransport}).
 *
 * `caCerts` are added to the runtime's default root certificates: see the README.
 */
export class FetchTransport implements Transport {
  readonly #options: Deno.CreateHttpClientOptions & Partial<Deno.TlsCertifiedKeyPem>;
  #client: Deno.HttpClient | undefined;
  #generation = 0;
  #closed = false;

  /** @throws {TypeError} when only one of the client certificate and key is set. */
  constructor(tls: TlsMaterial) {
    if ((tls.cert === undefined) !== (tls.key === undefined)) {
      throw new TypeError("a client certificate needs both the certificate and its key");
    }
    const decoder = new TextDecoder();
    this.#options = {
      ...(tls.ca !== undefined && { caCerts: [decoder.decode(tls.ca)] }),
      ...(tls.cert !== undefined && tls.key !== undefined &&
        { cert: decoder.decode(tls.cert), key: decoder.decode(tls.key) }),
    };
  }

  get generation(): number {
    return this.#generation;
  }

  send(url: URL, request: TransportRequest): Promise<TransportResponse> {
    if (this.#closed) return Promise.reject(new TypeError("the transport is closed"));
    let client = this.#client;
    if (client === undefined) {
      try {
        client = Deno.createHttpClient(this.#options);
      } catch (err) {
        return Promise.reject(err);
      }
      this.#client = client;
    }
    // The client is handed to fetch synchronously: a renew() later does not affect this request.
    return fetch(url, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      signal: request.signal,
      client,
    });
  }

  renew(generation: number): void {
    if (generation !== this.#generation) return;
    this.#generation++;
    this.#client?.close();
    this.#client = undefined;
  }

  close(): void {
    this.#closed = true;
    this.renew(this.#generation);
  }
}
