/**
 * KubeClient's transport over TLS: HTTP/1.1 keep-alive through the loopback TCP proxy going
 * silent, and the TLS settings `Deno.connectTls` cannot express, which go through `node:tls`
 * under the same HTTP/1.1 transport (`insecure-skip-tls-verify`, `tls-server-name`).
 * Certificates are made with openssl.
 */

import assert from "node:assert/strict";
import { ApiError, PERSISTENT_VOLUMES } from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import type { ClusterConnection } from "../../lib/kube/config.ts";
import { kubeconfigConnection } from "../../testkit/harness/client_fixtures.ts";
import { Http1Transport } from "../../lib/wire/http1/transport.ts";
import { TcpProxy } from "../../testkit/tcp_proxy.ts";
import { ConnectProxy } from "../../testkit/connect_proxy.ts";
import { hasOpenssl, makePki, type Pki } from "../../testkit/pki.ts";

const PV = { apiVersion: "v1", kind: "PersistentVolume", metadata: { name: "pv1" }, spec: {} };

interface TlsServer extends AsyncDisposable {
  port: number;
  /** Requests answered so far. */
  requests: number;
}

/** A TLS server on 127.0.0.1 (HTTP/2 or HTTP/1.1 by ALPN) answering every request with PV. */
function serveTls(pki: Pki): TlsServer {
  const state = { requests: 0 };
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert: pki.cert, key: pki.key, onListen() {} },
    () => {
      state.requests++;
      return Response.json(PV);
    },
  );
  return {
    port: server.addr.port,
    get requests() {
      return state.requests;
    },
    [Symbol.asyncDispose]: async () => {
      await server.shutdown();
      await server.finished;
    },
  };
}

/** The connection of a one-cluster kubeconfig. */
const connection = (cluster: Record<string, unknown>): Promise<ClusterConnection> =>
  kubeconfigConnection(cluster);

const skip = !hasOpenssl();

Deno.test({
  name:
    "HTTP/1.1 keep-alive over TLS: a request that times out on a silent connection makes the next one open a new connection",
  ignore: skip,
  async fn() {
    const pki = await makePki("IP:127.0.0.1");
    await using server = serveTls(pki);
    await using proxy = await TcpProxy.start({ port: server.port });
    await using client = new KubeClient({
      connection: await connection({
        server: `https://127.0.0.1:${proxy.port}`,
        "certificate-authority-data": btoa(pki.ca),
      }),
    }, { timeoutMs: 500 });
    // Two requests at once need two connections; both are kept and reused after that.
    await Promise.all([1, 2].map(() => client.get(PERSISTENT_VOLUMES, "pv1")));
    for (let i = 0; i < 3; i++) await client.get(PERSISTENT_VOLUMES, "pv1");
    assert.equal(proxy.accepted, 2, "two keep-alive connections");

    proxy.silenceExisting();
    await assert.rejects(
      client.get(PERSISTENT_VOLUMES, "pv1"),
      (err: unknown) => err instanceof ApiError && err.reason === "Timeout",
    );
    // The timed-out request closed its connection; the other pooled one is silent too and must
    // not be reused: without the renewal the next request would time out on it.
    const got = await client.get(PERSISTENT_VOLUMES, "pv1");
    assert.equal(got.metadata.name, "pv1");
    assert.equal(proxy.accepted, 3, "a new connection");
  },
});

Deno.test({
  name:
    "HTTP/1.1 over TLS presents the client certificate to a server that requires one, directly and inside a proxy's tunnel (openssl s_server)",
  ignore: skip,
  async fn() {
    const pki = await makePki("IP:127.0.0.1");
    const dir = await Deno.makeTempDir();
    const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = free.addr.port;
    free.close();
    for (const [name, text] of Object.entries(pki)) {
      await Deno.writeTextFile(`${dir}/${name}`, text);
    }
    // -Verify 1: the handshake fails without a client certificate the CA signed. -www answers
    // every request with a page describing the session, the client certificate included.
    const server = new Deno.Command("openssl", {
      args: [
        ...["s_server", "-accept", `127.0.0.1:${port}`, "-cert", "cert", "-key", "key"],
        ...["-CAfile", "ca", "-Verify", "1", "-www", "-naccept", "3"],
      ],
      cwd: dir,
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const stdout = server.stdout.getReader();
    try {
      // s_server says ACCEPT once it listens.
      let out = "";
      while (!out.includes("ACCEPT")) {
        const next = await stdout.read();
        if (next.done) throw new Error("openssl s_server ended");
        out += new TextDecoder().decode(next.value);
      }
      const url = new URL(`https://127.0.0.1:${port}/`);
      const enc = new TextEncoder();
      const material = { insecureSkipTlsVerify: false, ca: enc.encode(pki.ca) };
      const request = () => ({ method: "GET", headers: [], signal: AbortSignal.timeout(5000) });
      const withCert = {
        ...material,
        cert: enc.encode(pki.clientCert),
        key: enc.encode(pki.clientKey),
      };
      await using tunnel = ConnectProxy.start();
      // Directly (Deno.connectTls), then through a CONNECT tunnel (node:tls: Deno.startTls
      // would send no client certificate).
      for (const options of [{}, { proxy: () => new URL(tunnel.url) }]) {
        const transport = new Http1Transport(withCert, options);
        try {
          const res = await transport.send(url, request());
          assert.equal(res.status, 200);
          assert.match(await res.text!(), /Client certificate[\s\S]*Subject: CN\s?=\s?alice/);
        } finally {
          transport.close();
        }
      }
      assert.equal(tunnel.connects.length, 1);
      const without = new Http1Transport(material);
      try {
        await assert.rejects(
          without.send(url, request()).then((res) => res.text!()),
          /CertificateRequired|certificate/i,
        );
      } finally {
        without.close();
      }
    } finally {
      try {
        server.kill();
      } catch { /* ended */ }
      await stdout.cancel().catch(() => {});
      await server.status;
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "insecure-skip-tls-verify reaches a server whose certificate no configured CA signed (node:tls under HTTP/1.1)",
  ignore: skip,
  async fn() {
    const pki = await makePki("IP:127.0.0.1");
    await using server = serveTls(pki);
    const url = `https://127.0.0.1:${server.port}`;
    const insecure = await connection({ server: url, "insecure-skip-tls-verify": true });
    await using client = new KubeClient({ connection: insecure });
    assert.equal((await client.get(PERSISTENT_VOLUMES, "pv1")).metadata.name, "pv1");

    // The same server without the setting is refused: the certificate is checked.
    await using checked = new KubeClient({ connection: await connection({ server: url }) });
    await assert.rejects(
      checked.get(PERSISTENT_VOLUMES, "pv1"),
      (err: unknown) =>
        err instanceof ApiError && err.reason === "ConnectionError" &&
        /certificate|UnknownIssuer/i.test(err.message),
    );
    assert.equal(server.requests, 1);
  },
});

Deno.test({
  name: "tls-server-name checks the certificate against that name (node:tls under HTTP/1.1)",
  ignore: skip,
  async fn() {
    const pki = await makePki("DNS:kube.test");
    await using server = serveTls(pki);
    const url = `https://127.0.0.1:${server.port}`;
    const cluster = { server: url, "certificate-authority-data": btoa(pki.ca) };
    const named = await connection({ ...cluster, "tls-server-name": "kube.test" });
    await using client = new KubeClient({ connection: named });
    assert.equal((await client.get(PERSISTENT_VOLUMES, "pv1")).metadata.name, "pv1");

    // Without it, the certificate is checked against 127.0.0.1 and refused.
    const plain = await connection(cluster);
    await using unnamed = new KubeClient({ connection: plain });
    await assert.rejects(
      unnamed.get(PERSISTENT_VOLUMES, "pv1"),
      (err: unknown) => err instanceof ApiError && err.reason === "ConnectionError",
    );
    // A wrong name is refused too.
    await using wrong = new KubeClient({
      connection: await connection({ ...cluster, "tls-server-name": "other.test" }),
    });
    await assert.rejects(
      wrong.get(PERSISTENT_VOLUMES, "pv1"),
      (err: unknown) => err instanceof ApiError && err.reason === "ConnectionError",
    );
    assert.equal(server.requests, 1);
  },
});
