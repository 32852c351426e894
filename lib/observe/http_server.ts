/**
 * The sidecar's HTTP endpoint (`--http-endpoint`, or the deprecated `--metrics-address`) on
 * `Deno.serve`: Prometheus metrics at `--metrics-path`, csi-lib-utils' leader-election health
 * check at `/healthz/leader-election`, a health check at `/healthz`, and the z-pages
 * `/statusz` and `/flagz` (`./zpages.ts`).
 *
 * @module
 */

import type { Logger } from "./logger.ts";
import { errorText } from "../errors.ts";
import { acceptsPlainText, flagzText, statuszText } from "./zpages.ts";

/** The path of the leader-election health check (csi-lib-utils' `HealthCheckerAddress`). */
export const LEADER_ELECTION_HEALTH_PATH = "/healthz/leader-election";

/** The path of the health check (an addition: the Go attacher has none). */
export const HEALTH_PATH = "/healthz";

/** The path of the status page (KEP-4827). */
export const STATUSZ_PATH = "/statusz";

/** The path of the flags page (KEP-4828). */
export const FLAGZ_PATH = "/flagz";

/** What the z-pages show (see `./zpages.ts`). */
export interface ZPagesSource {
  /** The component's name, e.g. `csi-attacher`. */
  component: string;
  binaryVersion: string;
  runtimeVersion: string;
  /** Wall-clock start of the process, ms since the epoch. */
  startTimeMs: number;
  /** Time since the start, ms, from the monotonic clock. */
  uptimeMs(): number;
  /** Every flag with its value as text, credentials already masked. */
  flags: readonly { name: string; value: string }[];
}

/** The metrics as {@link startHttpServer} serves them (see `createMetrics()`). */
export interface MetricsSource {
  /** Content type of the exposition. */
  readonly contentType: string;
  /** The text exposition. */
  metricsText(): Promise<string>;
}

/** Options of {@link startHttpServer}. */
export interface HttpServerOptions {
  /**
   * A Go listen address, `host:port`: `:8080` (every interface), `127.0.0.1:0` (loopback, a
   * free port), `[::1]:9000`, `localhost:8080`. The port must be a number.
   */
  address: string;
  /** The flag that gave {@link address} (`--http-endpoint`), named when it cannot be bound. */
  flag?: string;
  /** Path of the metrics, `--metrics-path` (e.g. `/metrics`); must start with `/`. */
  metricsPath: string;
  /** The metrics to serve at {@link metricsPath}; without them the path is not served. */
  metrics?: MetricsSource;
  /**
   * The leader-election health check (e.g. `() => elector.healthCheck()`); the path
   * {@link LEADER_ELECTION_HEALTH_PATH} is served only when it is given, as in csi-lib-utils
   * (`--leader-election` with `--http-endpoint`).
   */
  leaderHealth?: () => Error | undefined;
  /**
   * The health check of {@link HEALTH_PATH}: undefined when healthy, else why not. Always
   * healthy when absent.
   */
  health?: () => string | undefined;
  /** The z-pages: {@link STATUSZ_PATH} and {@link FLAGZ_PATH} are served only when given. */
  zpages?: ZPagesSource;
  log: Logger;
}

/** A running server. */
export interface RunningHttpServer {
  /** The port listened on (the chosen one when the address asked for port 0). */
  readonly port: number;
  /** The address listened on, e.g. `127.0.0.1` or `::`. */
  readonly hostname: string;
  /** Stops accepting connections and resolves once in-flight requests are answered. */
  close(): Promise<void>;
}

/** A Go listen address split into what `Deno.serve` takes. */
export interface ListenAddress {
  /** "" when the address names no host (listen on every interface). */
  hostname: string;
  port: number;
}

/**
 * Splits a Go listen address as `net.SplitHostPort` does: `host:port`, `[ipv6]:port`, or
 * `:port` for every interface.
 *
 * @throws {TypeError} when the port is missing or not a number from 0 to 65535, or the host
 *   is malformed; the message reads like Go's (`address 8080: missing port in address`).
 */
export function parseListenAddress(address: string): ListenAddress {
  let host: string;
  let port: string;
  if (address.startsWith("[")) {
    const end = address.indexOf("]");
    if (end < 0) throw new TypeError(`address ${address}: missing ']' in address`);
    host = address.slice(1, end);
    const rest = address.slice(end + 1);
    if (rest === "") throw new TypeError(`address ${address}: missing port in address`);
    if (!rest.startsWith(":") || rest.indexOf(":", 1) >= 0) {
      throw new TypeError(`address ${address}: unexpected characters after ']' in address`);
    }
    port = rest.slice(1);
  } else {
    const colon = address.lastIndexOf(":");
    if (colon < 0) throw new TypeError(`address ${address}: missing port in address`);
    host = address.slice(0, colon);
    if (host.includes(":")) throw new TypeError(`address ${address}: too many colons in address`);
    port = address.slice(colon + 1);
  }
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) {
    throw new TypeError(`address ${address}: invalid port "${port}"`);
  }
  return { hostname: host, port: Number(port) };
}

/**
 * Starts the HTTP server. Routes (exact paths, any method):
 *
 * - `metricsPath`: the metrics' text exposition (500 if producing it fails);
 * - `/healthz/leader-election` (only with `leaderHealth`): 200 `ok`, or 500
 *   `internal server error: <message>` and a newline, as csi-lib-utils' handler writes it;
 * - `/healthz`: 200 `ok` when healthy, else 500 `unhealthy: <why>` and a newline;
 * - `/statusz`, `/flagz` (only with `zpages`): the z-pages as text, or 406 when the `Accept`
 *   header excludes `text/plain`, as component-base answers;
 * - anything else: 404 `404 page not found`, as Go's `ServeMux`.
 *
 * An address without a host listens on every interface: IPv6 and IPv4 (`::`), or IPv4 only
 * (`0.0.0.0`) where IPv6 is unavailable, as Go's `net.Listen` does.
 *
 * @throws {TypeError} for a malformed address or a metrics path not starting with `/`.
 * @throws {Error} when the address cannot be bound, naming the flag and the address as Go's
 *   `net.Listen` words it: `--http-endpoint=:8080: listen tcp :8080: bind: address already in
 *   use`; the sidecar exits 1 then.
 *
 * @example
 * ```ts
 * import { nullLogger } from "./logger.ts";
 * const server = await startHttpServer({
 *   address: "127.0.0.1:0",
 *   metricsPath: "/metrics",
 *   log: nullLogger,
 * });
 * const res = await fetch(`http://127.0.0.1:${server.port}/healthz`);
 * await res.text(); // "ok"
 * await server.close();
 * ```
 */
export function startHttpServer(opts: HttpServerOptions): Promise<RunningHttpServer> {
  // Every failure, even a synchronous one (bad address, port in use), becomes a rejection.
  try {
    return Promise.resolve(listen(opts));
  } catch (err) {
    return Promise.reject(listenError(opts, err));
  }
}

/**
 * A listen failure named as the Go sidecar's `net.Listen` names it (`listen tcp <address>:
 * bind: <reason>`), after the flag that gave the address; other errors unchanged.
 */
function listenError(opts: HttpServerOptions, err: unknown): unknown {
  const reason = err instanceof Deno.errors.AddrInUse
    ? "address already in use"
    : err instanceof Deno.errors.PermissionDenied
    ? "permission denied"
    : err instanceof Deno.errors.AddrNotAvailable
    ? "cannot assign requested address"
    : undefined;
  if (reason === undefined) return err;
  return new Error(
    `${
      opts.flag ?? "--http-endpoint"
    }=${opts.address}: listen tcp ${opts.address}: bind: ${reason}`,
  );
}

/** Binds and starts serving; throws when it cannot. */
function listen(opts: HttpServerOptions): RunningHttpServer {
  const { hostname, port } = parseListenAddress(opts.address);
  if (!opts.metricsPath.startsWith("/")) {
    throw new TypeError(`Cannot serve metrics at "${opts.metricsPath}": path must start with "/"`);
  }
  const log = opts.log;
  const handler = (req: Request): Promise<Response> => route(opts, req);
  const serveOptions = {
    port,
    onListen: () => {},
    onError: (err: unknown) => {
      log.error(err, "HTTP request failed");
      return text(500, "internal server error\n");
    },
  };

  let server: Deno.HttpServer<Deno.NetAddr>;
  if (hostname !== "") {
    server = Deno.serve({ ...serveOptions, hostname }, handler);
  } else {
    try {
      server = Deno.serve({ ...serveOptions, hostname: "::" }, handler);
    } catch (err) {
      if (err instanceof Deno.errors.AddrInUse) throw err;
      // No IPv6 on this host: listen on every IPv4 interface instead.
      log.v(2).info("Cannot listen on IPv6, falling back to IPv4", { err: String(err) });
      server = Deno.serve({ ...serveOptions, hostname: "0.0.0.0" }, handler);
    }
  }
  const addr = server.addr;
  log.info("Serving HTTP", { address: opts.address, port: addr.port });
  let closing: Promise<void> | undefined;
  return {
    port: addr.port,
    hostname: addr.hostname,
    close(): Promise<void> {
      closing ??= server.shutdown().then(() => server.finished);
      return closing;
    },
  };
}

async function route(opts: HttpServerOptions, req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  if (opts.metrics && path === opts.metricsPath) {
    let body: string;
    try {
      body = await opts.metrics.metricsText();
    } catch (err) {
      opts.log.error(err, "Cannot gather metrics");
      return text(500, `An error has occurred while gathering metrics:\n\n${errorText(err)}\n`);
    }
    return new Response(body, {
      status: 200,
      headers: { "content-type": opts.metrics.contentType },
    });
  }
  if (opts.leaderHealth && path === LEADER_ELECTION_HEALTH_PATH) {
    const err = opts.leaderHealth();
    if (err) return text(500, `internal server error: ${err.message}\n`);
    return text(200, "ok");
  }
  if (path === HEALTH_PATH) {
    const why = opts.health?.();
    return why === undefined ? text(200, "ok") : text(500, `unhealthy: ${why}\n`);
  }
  if (opts.zpages && (path === STATUSZ_PATH || path === FLAGZ_PATH)) {
    if (!acceptsPlainText(req.headers.get("accept"))) {
      return text(406, "media type not acceptable, must be: text/plain\n");
    }
    const z = opts.zpages;
    return text(
      200,
      path === FLAGZ_PATH ? flagzText(z.component, z.flags) : statuszText({
        component: z.component,
        startTimeMs: z.startTimeMs,
        uptimeMs: z.uptimeMs(),
        binaryVersion: z.binaryVersion,
        runtimeVersion: z.runtimeVersion,
        paths: servedPaths(opts),
      }),
    );
  }
  return text(404, "404 page not found\n");
}

/** The paths {@link route} answers for `opts`. */
function servedPaths(opts: HttpServerOptions): string[] {
  return [
    ...(opts.metrics ? [opts.metricsPath] : []),
    ...(opts.leaderHealth ? [LEADER_ELECTION_HEALTH_PATH] : []),
    HEALTH_PATH,
    ...(opts.zpages ? [STATUSZ_PATH, FLAGZ_PATH] : []),
  ];
}

/** A plain-text answer with the headers Go's `http.Error` sets. */
function text(status: number, body: string): Response {
  return new Response(body, {
    status,
    headers: {
      "content-type": "text/plain; charset=utf-8",
      "x-content-type-options": "nosniff",
    },
  });
}
