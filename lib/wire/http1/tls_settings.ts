/**
 * The TLS settings of a server as the connection code uses them: the PEM texts of
 * {@link TlsMaterial} decoded once, and the two settings that change how the certificate is
 * checked.
 *
 * @module
 */

import type { TlsMaterial } from "./api.ts";

/** The TLS settings of {@link TlsMaterial}, decoded once. */
export interface TlsSettings {
  caCerts?: string[];
  cert?: string;
  key?: string;
  /** `tls-server-name`: the name the certificate is checked against (and sent as SNI). */
  serverName?: string;
  /** `insecure-skip-tls-verify`. */
  insecure: boolean;
}

/**
 * The settings of `tls`.
 *
 * @throws {TypeError} when only one of the client certificate and key is set.
 */
export function tlsSettings(tls: TlsMaterial): TlsSettings {
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new TypeError("a client certificate needs both the certificate and its key");
  }
  const decoder = new TextDecoder();
  return {
    insecure: tls.insecureSkipTlsVerify,
    ...(tls.ca !== undefined && { caCerts: [decoder.decode(tls.ca)] }),
    ...(tls.cert !== undefined && tls.key !== undefined &&
      { cert: decoder.decode(tls.cert), key: decoder.decode(tls.key) }),
    ...(tls.serverName !== undefined && tls.serverName !== "" && { serverName: tls.serverName }),
  };
}
