/**
 * The Kubernetes client through an HTTP proxy (`testkit/connect_proxy.ts`, on loopback): chosen
 * from `HTTPS_PROXY` / `NO_PROXY` or from a kubeconfig `proxy-url`, TLS to the API server inside
 * the tunnel, and the named errors of a proxy that refuses `CONNECT` or closes the tunnel in the
 * middle of an answer. The API server is named `kube.test`: the proxy routes that name to a
 * loopback port, and loopback addresses themselves are never proxied by the environment's rules.
 */

import assert from "node:assert/strict";
import { ApiError, PERSISTENT_VOLUMES } from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import type { ClusterConnection } from "../../lib/kube/config.ts";
import { kubeconfigConnection } from "../../testkit/harness/client_fixtures.ts";
import { Http1Transport } from "../../lib/wire/http1/transport.ts";
import { proxyFunc, proxySettings } from "../../lib/wire/http1/proxy.ts";
import { isTransportError } from "../../lib/wire/http1/errors.ts";
import type { Clock } from "../../lib/clock.ts";
import { realClock } from "../../lib/clock.ts";
import { ConnectProxy } from "../../testkit/connect_proxy.ts";
import { hasOpenssl, makePki, type Pki } from "../../testkit/pki.ts";

const PV = { apiVersion: "v1", kind: "PersistentVolume", metadata: { name: "pv1" }, spec: {} };
const skip = !hasOpenssl();

/** Retry waits of no length: a retried GET shows its last failure at once. */
const quickRetries: Clock = {
  ...realClock,
  sleep: (_ms, signal) => signal?.aborted ? Promise.reject(signal.reason) : Promise.resolve(),
};

/** An API server on 127.0.0.1 (TLS when `pki` is given) answering every request with PV. */
function serve(pki?: Pki): Deno.HttpServer<Deno.NetAddr> & { authorizations: string[] } {
  const authorizations: string[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {}, ...(pki && { cert: pki.cert, key: pki.key }) },
    (req) => {
      authorizations.push(req.headers.get("authorization") ?? "");
      return Response.json(PV);
    },
  );
  return Object.assign(server, { authorizations });
}

/** The connection of a one-cluster kubeconfig with a token. */
function connection(cluster: Record<string, unknown>): Promise<ClusterConnection> {
  return kubeconfigConnection(cluster, "t0k");
}

/** The ApiError of a failed call, with its transport cause. */
async function failure(call: Promise<unknown>): Promise<ApiError> {
  const err = await call.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof ApiError, String(err));
  assert.equal(err.reason, "ConnectionError", err.message);
  return err;
}

Deno.test({
  name: "HTTPS_PROXY with a NO_PROXY that does not match: TLS to the API server inside the tunnel",
  ignore: skip,
  async fn() {
    const pki = await makePki("DNS:kube.test");
    await using server = serve(pki);
    await using proxy = ConnectProxy.start({ route: () => server.addr.port });
    await using client = new KubeClient({
      connection: await connection({
        server: "https://kube.test:6443",
        "certificate-authority-data": btoa(pki.ca),
      }),
    }, {
      proxyEnvironment: { https_proxy: proxy.url, NO_PROXY: "other.test,.kube.test,10.0.0.0/8" },
    });
    assert.equal((await client.get(PERSISTENT_VOLUMES, "pv1")).metadata.name, "pv1");
    assert.equal((await client.get(PERSISTENT_VOLUMES, "pv1")).metadata.name, "pv1");
    // One tunnel, kept alive for the second request; the proxy saw no credentials.
    assert.deepEqual(proxy.connects, [{ authority: "kube.test:6443", proxyAuthorization: null }]);
    assert.deepEqual(server.authorizations, ["Bearer t0k", "Bearer t0k"]);
  },
});

Deno.test("HTTP_PROXY with a NO_PROXY that matches the API server: a direct connection", async () => {
  await using server = serve();
  await using proxy = ConnectProxy.start({ route: () => server.addr.port });
  const dialed: string[] = [];
  const transport = (noProxy: string) =>
    new Http1Transport({ insecureSkipTlsVerify: false }, {
      proxy: proxyFunc(
        proxySettings((name) => ({ HTTP_PROXY: proxy.url, NO_PROXY: noProxy })[name]),
      ),
      // kube.test is this loopback server, for a direct connection too.
      connect: (hostname, port) => {
        dialed.push(`${hostname}:${port}`);
        const to = hostname === "kube.test" ? server.addr.port : port;
        return Deno.connect({ hostname: "127.0.0.1", port: to });
      },
    });
  const get = async (t: Http1Transport) => {
    try {
      const res = await t.send(new URL("http://kube.test:8080/api/v1/persistentvolumes/pv1"), {
        method: "GET",
        headers: [],
        signal: AbortSignal.timeout(5_000),
      });
      return JSON.parse(await res.text!()).metadata.name;
    } finally {
      t.close();
    }
  };
  assert.equal(await get(transport("other.test, kube.test:8080")), "pv1");
  assert.deepEqual(dialed, ["kube.test:8080"]);
  assert.equal(proxy.connects.length, 0);
  // Not matching (another port): through the proxy, whose own address is dialed.
  assert.equal(await get(transport("kube.test:443")), "pv1");
  assert.deepEqual(proxy.connects.map((c) => c.authority), ["kube.test:8080"]);
  assert.equal(dialed[1], `127.0.0.1:${new URL(proxy.url).port}`);
});

Deno.test({
  name: "a kubeconfig proxy-url carries its user as Proxy-Authorization and wins over HTTPS_PROXY",
  ignore: skip,
  async fn() {
    const pki = await makePki("DNS:kube.test");
    await using server = serve(pki);
    await using proxy = ConnectProxy.start({ route: () => server.addr.port });
    const proxyUrl = new URL(proxy.url);
    proxyUrl.username = "alice";
    proxyUrl.password = "s3cret";
    await using client = new KubeClient({
      connection: await connection({
        server: "https://kube.test:6443",
        "certificate-authority-data": btoa(pki.ca),
        "proxy-url": proxyUrl.href,
      }),
    }, { proxyEnvironment: { HTTPS_PROXY: "http://127.0.0.1:9" } });
    assert.equal((await client.get(PERSISTENT_VOLUMES, "pv1")).metadata.name, "pv1");
    assert.deepEqual(proxy.connects, [{
      authority: "kube.test:6443",
      proxyAuthorization: `Basic ${btoa("alice:s3cret")}`,
    }]);
  },
});

Deno.test("a proxy that refuses CONNECT fails the request with a 'proxy' transport error, password hidden", async () => {
  await using proxy = ConnectProxy.start({ behaviour: "refuse" });
  const proxyUrl = new URL(proxy.url);
  proxyUrl.username = "alice";
  proxyUrl.password = "s3cret";
  await using client = new KubeClient({
    connection: await connection({ server: "http://kube.test:8080", "proxy-url": proxyUrl.href }),
    clock: quickRetries,
  });
  const err = await failure(client.get(PERSISTENT_VOLUMES, "pv1"));
  assert.ok(isTransportError(err.cause, "proxy"), String(err.cause));
  assert.match(err.message, /CONNECT kube\.test:8080: the proxy answered 403, not 200/);
  assert.match(err.message, /alice:xxxxx@127\.0\.0\.1/);
  assert.doesNotMatch(err.message, /s3cret/);
  // A refused tunnel is no broken connection: the GET was not retried.
  assert.equal(proxy.connects.length, 1);
});

Deno.test("a proxy that closes the tunnel in the middle of the answer fails the request with 'eof'", async () => {
  await using server = serve();
  await using proxy = ConnectProxy.start({
    route: () => server.addr.port,
    behaviour: "close-mid-tunnel",
    closeAfterBytes: 12, // "HTTP/1.1 200" and no more
  });
  await using client = new KubeClient({
    connection: await connection({ server: "http://kube.test:8080", "proxy-url": proxy.url }),
    clock: quickRetries,
  });
  const err = await failure(client.get(PERSISTENT_VOLUMES, "pv1"));
  assert.ok(isTransportError(err.cause, "eof"), String(err.cause));
  assert.ok(proxy.connects.length >= 1);
});

Deno.test("a proxy that closes before answering CONNECT, and a proxy URL of another scheme, are 'proxy' errors", async () => {
  // A listener that accepts and closes at once.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepting = (async () => {
    for await (const conn of listener) conn.close();
  })();
  try {
    for (const proxyUrl of [`http://127.0.0.1:${listener.addr.port}`, "https://127.0.0.1:9"]) {
      const transport = new Http1Transport({ insecureSkipTlsVerify: false }, {
        proxy: () => new URL(proxyUrl),
      });
      try {
        const sent = transport.send(new URL("http://kube.test:8080/"), {
          method: "GET",
          headers: [],
          signal: AbortSignal.timeout(5_000),
        });
        await assert.rejects(sent, (e) => isTransportError(e, "proxy"), proxyUrl);
      } finally {
        transport.close();
      }
    }
  } finally {
    listener.close();
    await accepting.catch(() => {});
  }
});
