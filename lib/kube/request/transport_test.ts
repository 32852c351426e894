import assert from "node:assert/strict";
import { createTransport, DISABLE_HTTP2, ENABLE_HTTP2, http2Enabled } from "./transport.ts";
import type { ClusterConnection } from "../config.ts";
import { Http1Transport } from "../../wire/http1/transport.ts";
import { Http2Transport } from "../../wire/http2/transport.ts";
import { hasOpenssl } from "../../../testkit/pki.ts";
import { startNodeH2Server } from "../../../testkit/h2/node_h2_server.ts";

function connection(server: string, ca?: string): ClusterConnection {
  return {
    server,
    tls: {
      insecureSkipTlsVerify: false,
      ...(ca !== undefined && { ca: new TextEncoder().encode(ca) }),
    },
    headers: () => Promise.resolve({}),
  };
}

Deno.test("DISABLE_HTTP2 set to anything non-empty turns HTTP/2 off, as in client-go", () => {
  assert.equal(http2Enabled({ [ENABLE_HTTP2]: "1" }), true);
  assert.equal(http2Enabled({ [ENABLE_HTTP2]: "1", [DISABLE_HTTP2]: "true" }), false);
  assert.equal(http2Enabled({ [ENABLE_HTTP2]: "1", [DISABLE_HTTP2]: "" }), true);
  assert.ok(
    createTransport(connection("https://a"), { [DISABLE_HTTP2]: "x" }) instanceof Http1Transport,
  );
  assert.ok(
    createTransport(connection("https://a"), { [ENABLE_HTTP2]: "1" }) instanceof Http2Transport,
  );
});

Deno.test({
  name: "with HTTP/2 on, a proxied server is spoken to over HTTP/1.1, a direct one over h2",
  ignore: !hasOpenssl(),
  async fn() {
    const server = await startNodeH2Server();
    try {
      const conn = connection(server.url, server.pki.ca);
      const direct = createTransport(conn, { [ENABLE_HTTP2]: "1" });
      const signal = new AbortController().signal;
      const r = await direct.send(new URL(`${server.url}/echo`), {
        method: "GET",
        headers: [],
        signal,
      });
      assert.equal(JSON.parse(await r.text!()).protocol, "2.0");
      direct.close();
      // A proxy that refuses: the request went the HTTP/1.1 way, through it.
      const proxy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const refusing = (async () => {
        for await (const c of proxy) {
          await c.write(
            new TextEncoder().encode("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"),
          );
          c.close();
        }
      })();
      const proxied = createTransport(conn, {
        [ENABLE_HTTP2]: "1",
        HTTPS_PROXY: `http://127.0.0.1:${proxy.addr.port}`,
      });
      // Not localhost, which Go's proxy rules never proxy; over h2 it would fail `connect`.
      const err = await proxied.send(new URL("https://apiserver.test:6443/echo"), {
        method: "GET",
        headers: [],
        signal,
      })
        .then(() => undefined, (e) => e);
      assert.equal(err?.kind, "proxy", String(err));
      proxied.close();
      proxy.close();
      await refusing.catch(() => {});
    } finally {
      await server.close();
    }
  },
});
