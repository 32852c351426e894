/**
 * How long a new TLS connection to an API server takes: `Deno.connectTls` (Nagle's algorithm on)
 * against `Deno.connect` with `setNoDelay(true)` and `Deno.startTls`, the path
 * `lib/wire/http1/tls_connect.ts` takes without a client certificate. Each round opens one
 * connection each way, handshake done, and closes it; the kubeconfig's CA checks the server, and
 * its client certificate (when it has one) is presented by `Deno.connectTls` only (`Deno.startTls`
 * cannot present one, so that column is a handshake without it, as a bearer token's is).
 *
 * Usage, against the end-to-end cluster (`deno task cluster`):
 * `deno run -A bench/tls_handshake.ts --kubeconfig=$HOME/.cache/csi-attacher-e2e/cluster/admin.kubeconfig --rounds=20`
 *
 * @module
 */

import { parseArgs } from "node:util";
import { loadConnection } from "../lib/kube/config.ts";
import { tlsSettings } from "../lib/wire/http1/tls_settings.ts";
import { median } from "./stats.ts";

async function time(open: () => Promise<Deno.Conn>): Promise<number> {
  const started = performance.now();
  const conn = await open();
  const ms = performance.now() - started;
  conn.close();
  return ms;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { kubeconfig: { type: "string" }, rounds: { type: "string", default: "20" } },
  });
  if (values.kubeconfig === undefined) {
    console.error("usage: bench/tls_handshake.ts --kubeconfig=FILE [--rounds=20]");
    Deno.exit(2);
  }
  const connection = await loadConnection({ kubeconfigPath: values.kubeconfig });
  const url = new URL(connection.server);
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || 443);
  const tls = tlsSettings(connection.tls);
  const caCerts = tls.caCerts;
  const withCert = tls.cert !== undefined && tls.key !== undefined;
  const nagle: number[] = [];
  const noDelay: number[] = [];
  for (let i = 0; i < Number(values.rounds); i++) {
    nagle.push(
      await time(async () => {
        const conn = await Deno.connectTls({
          hostname,
          port,
          alpnProtocols: ["http/1.1"],
          ...(caCerts !== undefined && { caCerts }),
          ...(withCert && { cert: tls.cert!, key: tls.key! }),
        });
        await conn.handshake();
        return conn;
      }),
    );
    noDelay.push(
      await time(async () => {
        const tcp = await Deno.connect({ hostname, port });
        tcp.setNoDelay(true);
        const conn = await Deno.startTls(tcp, {
          hostname,
          alpnProtocols: ["http/1.1"],
          ...(caCerts !== undefined && { caCerts }),
        });
        await conn.handshake();
        return conn;
      }),
    );
  }
  const range = (xs: number[]) =>
    `${median(xs).toFixed(1)} ms (${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})`;
  console.log(`server ${connection.server}, ${values.rounds} rounds, medians (min-max):`);
  console.log(
    `  Deno.connectTls${withCert ? " with the client certificate" : ""}: ${range(nagle)}`,
  );
  console.log(`  Deno.connect + setNoDelay(true) + Deno.startTls: ${range(noDelay)}`);
}
