/**
 * A TLS connection to a server the runtime's public API can check (`./dial.ts` says which),
 * with `TCP_NODELAY` set wherever that API allows it, for the HTTP/1.1 transport and the HTTP/2
 * one alike.
 *
 * Why `TCP_NODELAY`: Go sets it on every TCP connection (`net/tcpsock.go`, "The default is true
 * (no delay)"), so client-go writes each TLS handshake flight at once. `Deno.connectTls` leaves
 * Nagle's algorithm on (RFC 896, RFC 1122 section 4.2.3.4), and the handshake's second client
 * flight (Certificate, CertificateVerify when there is a client certificate, Finished: more than
 * one write) then waits for the ACK of its first segment, which the server delays (40 ms on
 * Linux) because it has nothing to send until the flight is complete. Measured against
 * kube-apiserver v1.37.2 on loopback: 43-44 ms per handshake with `Deno.connectTls`, with or
 * without a client certificate, against 1.0-1.4 ms over `Deno.connect` with `setNoDelay(true)`
 * and `Deno.startTls`. A new leader opens a connection per watch, so this was paid before its
 * caches could sync.
 *
 * `Deno.startTls` presents no client certificate (its options have none, and a certificate
 * passed anyway is not sent: the server then sees an anonymous client). So:
 * - no client certificate (a bearer token, as a pod's service account has, or no credentials):
 *   {@link TcpConnect} (`Deno.connect` by default), `setNoDelay(true)`, then `Deno.startTls`;
 * - a client certificate: `Deno.connectTls`, Nagle's algorithm and its delay included. HTTP/2
 *   pays it once per connection, HTTP/1.1 once per pooled connection.
 *
 * Failures: `connect` (no TCP connection), `tls` (the handshake failed, a certificate error
 * included).
 *
 * @module
 */

import type { TlsSettings } from "./tls_settings.ts";
import { TransportError } from "./errors.ts";
import { errorText } from "../../errors.ts";

/**
 * Opens a TCP connection with `Deno.connect` (a test may map names to loopback, or watch the
 * options set on it).
 */
export type TcpConnect = (hostname: string, port: number) => Promise<Deno.TcpConn>;

/** `Deno.connect` itself. */
export const denoConnect: TcpConnect = (hostname, port) => Deno.connect({ hostname, port });

/** A TLS connection, its handshake done, and the ALPN protocol the server picked (or null). */
export interface TlsConnected {
  conn: Deno.Conn;
  protocol: string | null;
}

/**
 * A TLS connection to `hostname:port` offering `protocols` (ALPN), its certificate checked
 * against `hostname` and `tls.caCerts` (added to the runtime's roots), the client certificate of
 * `tls` presented when it has one.
 *
 * @throws {TransportError} `connect` or `tls`.
 */
export async function connectTls(
  hostname: string,
  port: number,
  tls: TlsSettings,
  protocols: string[],
  connect: TcpConnect = denoConnect,
): Promise<TlsConnected> {
  let conn: Deno.TlsConn;
  if (tls.cert !== undefined && tls.key !== undefined) {
    try {
      conn = await Deno.connectTls({
        hostname,
        port,
        alpnProtocols: protocols,
        ...(tls.caCerts !== undefined && { caCerts: tls.caCerts }),
        cert: tls.cert,
        key: tls.key,
      });
    } catch (err) {
      throw new TransportError("connect", errorText(err), { cause: err });
    }
  } else {
    let tcp: Deno.TcpConn;
    try {
      tcp = await connect(hostname, port);
    } catch (err) {
      throw new TransportError("connect", errorText(err), { cause: err });
    }
    try {
      tcp.setNoDelay(true);
      conn = await Deno.startTls(tcp, {
        hostname,
        alpnProtocols: protocols,
        ...(tls.caCerts !== undefined && { caCerts: tls.caCerts }),
      });
    } catch (err) {
      tcp.close();
      throw new TransportError("tls", errorText(err), { cause: err });
    }
  }
  try {
    // Deno.TlsHandshakeInfo.alpnProtocol: the protocol the server picked, null for none.
    const { alpnProtocol } = await conn.handshake();
    return { conn, protocol: alpnProtocol };
  } catch (err) {
    conn.close();
    throw new TransportError("tls", errorText(err), { cause: err });
  }
}
