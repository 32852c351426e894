/**
 * How the HTTP/1.1 transport opens a connection to a server: directly, or through an HTTP proxy's
 * tunnel (`CONNECT`, RFC 9110 section 9.3.6, as Go's `net/http` `Transport.dialConn` opens it),
 * then TLS for an `https:` server.
 *
 * TLS goes through the runtime's own TLS when its public API can say what is asked: a direct
 * connection whose certificate is checked against the URL's host (`./tls_connect.ts`, which also
 * says why the TCP connection gets `TCP_NODELAY` where it can). Three cases it cannot
 * say go through `node:tls` (`./node_tls.ts`, loaded with a dynamic `import()` only for them):
 * `tls-server-name` (a name other than the host), `insecure-skip-tls-verify` (no check at all;
 * `unsafelyDisableHostnameVerification` still checks the chain) and TLS inside a proxy's tunnel
 * (`Deno.startTls` sends no client certificate). Everything above the byte stream (the pool,
 * idle reads, retries, limits) is the same on every path.
 *
 * @module
 */

import type { RequestUrl } from "./api.ts";
import type { TlsSettings } from "./tls_settings.ts";
import { TransportError } from "./errors.ts";
import { errorText } from "../../errors.ts";
import { type ByteStream, Connection } from "./connection.ts";
import { readHead } from "./response.ts";
import { redactedProxy } from "./proxy.ts";
import { connectTls, type TcpConnect } from "./tls_connect.ts";

export type { TcpConnect };

/** What {@link dial} needs besides the URL. */
export interface DialOptions {
  tls: TlsSettings;
  /** The proxy of a target URL, undefined for a direct connection (`./proxy.ts`). */
  proxy?: (target: URL) => URL | undefined;
  connect: TcpConnect;
}

/** `./node_tls.ts`'s side: a stream TLS can start on later, and TLS on it. */
interface NodeNet {
  connect(hostname: string, port: number): Promise<ByteStream>;
  startTls(stream: ByteStream, name: string, tls: TlsSettings): Promise<ByteStream>;
}

/** The `host:port` a URL names, brackets removed from an IPv6 host, the scheme's port filled in. */
function endpoint(url: { protocol: string; hostname: string; port: string }) {
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  return { hostname, port, authority: `${url.hostname}:${port}` };
}

/**
 * A connection to `url`'s server, through its proxy when `options.proxy` names one, TLS
 * established for `https:`. `signal` closes what is open so far; the caller races it.
 *
 * Failures: `connect` (no TCP connection to the server or proxy), `proxy` (the tunnel was not
 * opened: see {@link openTunnel}), `tls` (the handshake failed).
 */
export async function dial(
  url: RequestUrl,
  options: DialOptions,
  signal: AbortSignal,
): Promise<ByteStream> {
  const target = endpoint(url);
  const proxy = options.proxy?.(new URL(url.href));
  if (proxy !== undefined && proxy.protocol !== "http:") {
    throw new TransportError(
      "proxy",
      `proxy ${redactedProxy(proxy)}: the scheme ${proxy.protocol} is not supported (http: only)`,
    );
  }
  const https = url.protocol === "https:";
  const tls = options.tls;
  const viaNode = https && (proxy !== undefined || tls.insecure || tls.serverName !== undefined);
  // The runtime's TLS; the caller closes a connection that comes late.
  if (https && !viaNode) {
    return (await connectTls(target.hostname, target.port, tls, ["http/1.1"], options.connect))
      .conn;
  }
  const node: NodeNet | undefined = viaNode ? (await import("./node_tls.ts")).nodeNet : undefined;
  const first = proxy === undefined ? target : endpoint(proxy);
  let stream: ByteStream | undefined;
  const onAbort = () => stream?.close();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    try {
      stream = await (node?.connect ?? options.connect)(first.hostname, first.port);
    } catch (err) {
      throw new TransportError("connect", errorText(err), { cause: err });
    }
    signal.throwIfAborted();
    if (proxy !== undefined) await openTunnel(stream, proxy, target.authority);
    if (node === undefined) return stream;
    const plain = stream;
    stream = undefined;
    return await node.startTls(plain, tls.serverName ?? target.hostname, tls);
  } catch (err) {
    stream?.close();
    throw err;
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/**
 * Asks the proxy on `stream` for a tunnel to `authority` (`host:port`): `CONNECT authority
 * HTTP/1.1` with `Host` and, when the proxy URL has a user, `Proxy-Authorization: Basic` (as Go's
 * transport sends them). The tunnel is open on a `200` answer (Go accepts no other status); the
 * answer's head is bounded as any head is (`MAX_HEAD_BYTES`), and bytes after it, which no server
 * sends before the client speaks, are refused.
 *
 * @throws {TransportError} `proxy` for any other answer, an answer that is not HTTP/1.x, or a
 *   connection the proxy closed or broke before answering; the message names the proxy (its
 *   password hidden) and the target, never the credentials.
 */
export async function openTunnel(stream: ByteStream, proxy: URL, authority: string): Promise<void> {
  const where = `proxy ${redactedProxy(proxy)}: CONNECT ${authority}`;
  let head = `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n`;
  if (proxy.username !== "" || proxy.password !== "") {
    const user = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
    const bytes = new TextEncoder().encode(user);
    head += `Proxy-Authorization: Basic ${btoa(String.fromCharCode(...bytes))}\r\n`;
  }
  const conn = new Connection(stream, authority, 0);
  let status: number;
  try {
    await conn.write(new TextEncoder().encode(`${head}\r\n`));
    status = (await readHead(conn)).status;
  } catch (err) {
    throw new TransportError("proxy", `${where}: ${errorText(err)}`, { cause: err });
  }
  if (status !== 200) {
    throw new TransportError("proxy", `${where}: the proxy answered ${status}, not 200`);
  }
  if (conn.hasUnread) {
    throw new TransportError("proxy", `${where}: the proxy sent bytes after its answer`);
  }
}
