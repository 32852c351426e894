import assert from "node:assert/strict";
import { connectTls, type TcpConnect } from "./tls_connect.ts";
import { tlsSettings } from "./tls_settings.ts";
import { Http1Transport } from "./transport.ts";
import { isTransportError } from "./errors.ts";
import { hasOpenssl, makePki, type Pki } from "../../../testkit/pki.ts";

const ignore = !hasOpenssl();
const PKI: Pki | undefined = ignore ? undefined : await makePki("IP:127.0.0.1");
const enc = new TextEncoder();

/** A TLS server on loopback answering every request `200 ok` and closing. */
function serve(pki: Pki): { port: number; close(): void } {
  const listener = Deno.listenTls({
    hostname: "127.0.0.1",
    port: 0,
    cert: pki.cert,
    key: pki.key,
    alpnProtocols: ["http/1.1"],
  });
  (async () => {
    for await (const conn of listener) {
      (async () => {
        try {
          const buf = new Uint8Array(4096);
          await conn.read(buf);
          await conn.write(enc.encode("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        } catch {
          // the client went away
        } finally {
          conn.close();
        }
      })();
    }
  })();
  return { port: listener.addr.port, close: () => listener.close() };
}

/** `Deno.connect`, noting each `setNoDelay` call on the connections it made. */
function watchedConnect(calls: (boolean | undefined)[]): TcpConnect {
  return async (hostname, port) => {
    const tcp = await Deno.connect({ hostname, port });
    const setNoDelay = tcp.setNoDelay.bind(tcp);
    tcp.setNoDelay = (noDelay?: boolean) => {
      calls.push(noDelay);
      setNoDelay(noDelay);
    };
    return tcp;
  };
}

Deno.test({
  name: "connectTls without a client certificate: TLS over the TCP connection, TCP_NODELAY set",
  ignore,
  async fn() {
    const server = serve(PKI!);
    try {
      const calls: (boolean | undefined)[] = [];
      const tls = tlsSettings({ insecureSkipTlsVerify: false, ca: enc.encode(PKI!.ca) });
      const { conn, protocol } = await connectTls(
        "127.0.0.1",
        server.port,
        tls,
        ["http/1.1"],
        watchedConnect(calls),
      );
      conn.close();
      assert.deepEqual(calls, [true]);
      assert.equal(protocol, "http/1.1");
    } finally {
      server.close();
    }
  },
});

Deno.test({
  name: "Http1Transport: an https: server without a client certificate is dialled by its connect",
  ignore,
  async fn() {
    const server = serve(PKI!);
    const calls: (boolean | undefined)[] = [];
    const transport = new Http1Transport(
      { insecureSkipTlsVerify: false, ca: enc.encode(PKI!.ca) },
      { connect: watchedConnect(calls) },
    );
    try {
      const res = await transport.send(new URL(`https://127.0.0.1:${server.port}/`), {
        method: "GET",
        headers: [],
        signal: AbortSignal.timeout(5000),
      });
      assert.equal(res.status, 200);
      assert.equal(await res.text!(), "ok");
      assert.deepEqual(calls, [true]);
    } finally {
      transport.close();
      server.close();
    }
  },
});

Deno.test({
  name: "connectTls: no connection is connect, a certificate not of the CA is tls",
  ignore,
  async fn() {
    const server = serve(PKI!);
    const other = await makePki("IP:127.0.0.1");
    try {
      const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const closedPort = free.addr.port;
      free.close();
      const tls = tlsSettings({ insecureSkipTlsVerify: false, ca: enc.encode(PKI!.ca) });
      await assert.rejects(
        connectTls("127.0.0.1", closedPort, tls, ["http/1.1"]),
        (err) => isTransportError(err, "connect"),
      );
      const wrongCa = tlsSettings({ insecureSkipTlsVerify: false, ca: enc.encode(other.ca) });
      await assert.rejects(
        connectTls("127.0.0.1", server.port, wrongCa, ["http/1.1"]),
        (err) => isTransportError(err, "tls") && /certificate/i.test((err as Error).message),
      );
    } finally {
      server.close();
    }
  },
});
