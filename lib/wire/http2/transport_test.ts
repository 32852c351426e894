import assert from "node:assert/strict";
import { Http2Transport } from "./transport.ts";
import { Http1Transport } from "../http1/transport.ts";
import type { TlsMaterial, TransportRequest } from "../http1/api.ts";
import { TransportError } from "../http1/errors.ts";
import { FencedError } from "../../lease_fence.ts";
import { hasOpenssl, makePki } from "../../../testkit/pki.ts";
import { type NodeH2Server, startNodeH2Server } from "../../../testkit/h2/node_h2_server.ts";
import { F, frame, goAway, T } from "../../../testkit/h2/frame_codec.ts";
import { headers, type PeerConn, startRawPeer } from "../../../testkit/h2/raw_peer.ts";

const ignore = !hasOpenssl();
const PKI = ignore ? undefined : await makePki("DNS:localhost,IP:127.0.0.1");

function tlsOf(server: NodeH2Server): TlsMaterial {
  return { ca: new TextEncoder().encode(server.pki.ca), insecureSkipTlsVerify: false };
}

function get(signal = new AbortController().signal, extra: Partial<TransportRequest> = {}) {
  return {
    method: "GET",
    headers: [["Accept", "application/json"]],
    signal,
    ...extra,
  } as TransportRequest;
}

async function withTransport(
  options: { http1Only?: boolean; maxConcurrentStreams?: number },
  fn: (t: Http2Transport, server: NodeH2Server, fallback: Http1Transport) => Promise<void>,
) {
  const server = await startNodeH2Server({ ...options, pki: PKI });
  const fallback = new Http1Transport(tlsOf(server));
  const t = new Http2Transport(tlsOf(server), { fallback });
  try {
    await fn(t, server, fallback);
  } finally {
    t.close();
    await server.close();
  }
}

async function stats(t: Http2Transport, server: NodeH2Server) {
  const r = await t.send(new URL(`${server.url}/stats`), get());
  return JSON.parse(await r.text!()) as { sessions: number; streams: number };
}

Deno.test({
  name: "http2 transport: requests and watches share one TLS connection (ALPN h2)",
  ignore,
  async fn() {
    await withTransport({}, async (t, server) => {
      const echo = await t.send(new URL(`${server.url}/echo`), get());
      assert.equal(echo.status, 200);
      assert.equal(JSON.parse(await echo.text!()).protocol, "2.0");
      const watches = await Promise.all(
        [0, 1, 2].map(() => t.send(new URL(`${server.url}/watch`), get())),
      );
      const texts = await Promise.all(
        Array.from({ length: 10 }, () => t.send(new URL(`${server.url}/text`), get())),
      );
      for (const r of texts) assert.equal(await r.text!(), "hello");
      for (const w of watches) {
        const chunks = w.chunks!();
        const first = await chunks.next();
        assert.match(new TextDecoder().decode(first![0]), /"type":"ADDED"/);
        chunks.cancel();
      }
      assert.equal(t.connections, 1);
      assert.equal((await stats(t, server)).sessions, 1);
    });
  },
});

Deno.test({
  name: "http2 transport: a second connection once SETTINGS_MAX_CONCURRENT_STREAMS are open",
  ignore,
  async fn() {
    await withTransport({ maxConcurrentStreams: 2 }, async (t, server) => {
      const a = await t.send(new URL(`${server.url}/watch`), get());
      const b = await t.send(new URL(`${server.url}/watch`), get());
      const s = await stats(t, server);
      assert.equal(s.sessions, 2);
      assert.equal(t.connections, 2);
      a.chunks!().cancel();
      b.chunks!().cancel();
    });
  },
});

Deno.test({
  name: "http2 transport: a body over maxBodyBytes fails too-large; a POST carries its body",
  ignore,
  async fn() {
    await withTransport({}, async (t, server) => {
      const r = await t.send(
        new URL(`${server.url}/bytes?n=100000`),
        get(undefined, {
          maxBodyBytes: 1000,
        }),
      );
      const err = await r.text!().then(() => undefined, (e) => e);
      assert.ok(err instanceof TransportError && err.kind === "too-large", String(err));
      assert.equal(err.message, "the answer's body is over 1000 bytes");
      const big = await t.send(new URL(`${server.url}/bytes?n=300000`), get());
      assert.equal((await big.text!()).length, 300000);
      const post = await t.send(new URL(`${server.url}/echo`), {
        method: "PATCH",
        headers: [["Content-Type", "application/merge-patch+json"]],
        body: '{"a":"é"}',
        signal: new AbortController().signal,
      });
      assert.deepEqual(JSON.parse(await post.text!()), {
        method: "PATCH",
        type: "application/merge-patch+json",
        body: '{"a":"é"}',
        protocol: "2.0",
      });
    });
  },
});

Deno.test({
  name: "http2 transport: a header list over the 64 KiB announced fails, the next request works",
  ignore,
  async fn() {
    await withTransport({}, async (t, server) => {
      const err = await t.send(new URL(`${server.url}/headers?n=70000`), get()).then(
        () => undefined,
        (e) => e,
      );
      // nghttp2 honours our SETTINGS_MAX_HEADER_LIST_SIZE: it resets the stream instead.
      assert.ok(err instanceof TransportError && err.kind === "reset", String(err));
      assert.match(err.message, /FRAME_SIZE_ERROR/);
      const ok = await t.send(new URL(`${server.url}/headers?n=100`), get());
      assert.equal(await ok.text!(), "ok");
    });
  },
});

Deno.test({
  name: "http2 transport: after GOAWAY new requests go out on a new connection",
  ignore,
  async fn() {
    await withTransport({}, async (t, server) => {
      const bye = await t.send(new URL(`${server.url}/goaway`), get());
      assert.equal(await bye.text!(), "bye");
      for (let i = 0; i < 5; i++) {
        const r = await t.send(new URL(`${server.url}/text`), get());
        assert.equal(await r.text!(), "hello");
      }
      assert.equal((await stats(t, server)).sessions, 2);
    });
  },
});

Deno.test({
  name: "http2 transport: renew takes new requests to a new connection, a watch keeps its own",
  ignore,
  async fn() {
    await withTransport({}, async (t, server) => {
      const watch = await t.send(new URL(`${server.url}/watch`), get());
      const chunks = watch.chunks!();
      await chunks.next();
      t.renew(t.generation);
      assert.equal((await stats(t, server)).sessions, 2);
      assert.ok(await chunks.next(), "the watch goes on on its connection");
      chunks.cancel();
    });
  },
});

Deno.test({
  name: "http2 transport: an abort ends a watch's read with the signal's reason",
  ignore,
  async fn() {
    await withTransport({}, async (t, server) => {
      const controller = new AbortController();
      const watch = await t.send(new URL(`${server.url}/watch`), get(controller.signal));
      const reader = watch.body!.getReader();
      await reader.read();
      const reason = new Error("stop");
      controller.abort(reason);
      const err = await (async () => {
        for (;;) await reader.read();
      })().then(() => undefined, (e) => e);
      assert.equal(err, reason);
      const r = await t.send(new URL(`${server.url}/text`), get());
      assert.equal(await r.text!(), "hello");
      assert.equal((await stats(t, server)).sessions, 1);
    });
  },
});

Deno.test({
  name: "http2 transport: a server whose ALPN picks http/1.1 is spoken to over HTTP/1.1",
  ignore,
  async fn() {
    await withTransport({ http1Only: true }, async (t, server) => {
      for (let i = 0; i < 3; i++) {
        const r = await t.send(new URL(`${server.url}/echo`), get());
        assert.equal(JSON.parse(await r.text!()).protocol, "1.1");
      }
      assert.equal(t.connections, 0);
    });
  },
});

Deno.test({
  name: "http2 transport: an untrusted certificate fails tls; a closed port connect",
  ignore,
  async fn() {
    await withTransport({}, async (_t, server) => {
      const other = await makePki("DNS:localhost");
      const tls = { ca: new TextEncoder().encode(other.ca), insecureSkipTlsVerify: false };
      const t = new Http2Transport(tls, { fallback: new Http1Transport(tls) });
      const err = await t.send(new URL(`${server.url}/text`), get()).then(() => 0, (e) => e);
      assert.ok(err instanceof TransportError && err.kind === "tls", String(err));
      const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = listener.addr.port;
      listener.close();
      const refused = await t.send(new URL(`https://localhost:${port}/`), get()).then(
        () => 0,
        (e) => e,
      );
      assert.ok(refused instanceof TransportError && refused.kind === "connect", String(refused));
      t.close();
    });
  },
});

/** A transport whose "TLS" connections go to a scripted peer that says it picked `h2`. */
async function rawTransport(script: (peer: PeerConn, index: number) => Promise<void>) {
  const server = await startRawPeer(script);
  let dials = 0;
  const tls = { insecureSkipTlsVerify: false };
  const t = new Http2Transport(tls, {
    fallback: new Http1Transport(tls),
    connectTls: async () => {
      dials++;
      const conn = await Deno.connect({ transport: "unix", path: server.address });
      return { conn, protocol: "h2" };
    },
  });
  return { t, server, dials: () => dials };
}

Deno.test("http2 transport: a stream GOAWAY left unprocessed is sent again on a new connection", async () => {
  const { t, server, dials } = await rawTransport(async (peer, index) => {
    await peer.handshake();
    const req = await peer.readRequest();
    assert.ok(req);
    if (index === 0) {
      await peer.send(goAway(0, 0));
      await peer.untilEof(2000);
      return;
    }
    assert.equal(new TextDecoder().decode(req.body), '{"x":1}');
    await peer.send(headers(req.streamId, [[":status", "201"]]));
    await peer.send(frame(T.DATA, F.END_STREAM, req.streamId, new TextEncoder().encode("made")));
    await peer.untilEof(2000);
  });
  try {
    const r = await t.send(new URL("https://apiserver.test/apis/x"), {
      method: "POST",
      headers: [["Content-Type", "application/json"]],
      body: '{"x":1}',
      signal: new AbortController().signal,
    });
    assert.equal(r.status, 201);
    assert.equal(await r.text!(), "made");
    assert.equal(dials(), 2);
  } finally {
    t.close();
    await server.close();
  }
});

Deno.test("http2 transport: a connection lost under a request fails it reset (the client retries GETs)", async () => {
  const { t, server } = await rawTransport(async (peer) => {
    await peer.handshake();
    await peer.readRequest();
    peer.close();
  });
  try {
    const err = await t.send(new URL("https://apiserver.test/api/v1/nodes"), get()).then(
      () => undefined,
      (e) => e,
    );
    assert.ok(err instanceof TransportError && err.kind === "reset", String(err));
  } finally {
    t.close();
    await server.close();
  }
});

Deno.test("http2 transport: a write whose fence has closed is never sent; the next request is", async () => {
  const bodies: string[] = [];
  const { t, server } = await rawTransport(async (peer) => {
    await peer.handshake();
    for (;;) {
      const req = await peer.readRequest();
      if (req === undefined) return;
      bodies.push(new TextDecoder().decode(req.body));
      await peer.send(headers(req.streamId, [[":status", "200"]]));
      await peer.send(frame(T.DATA, F.END_STREAM, req.streamId, new TextEncoder().encode("{}")));
    }
  });
  const patch = (body: string, fence?: { valid(): boolean }): TransportRequest => ({
    method: "PATCH",
    headers: [["Content-Type", "application/merge-patch+json"]],
    body,
    signal: new AbortController().signal,
    ...(fence === undefined ? {} : { fence }),
  });
  try {
    let asked = 0;
    const closed = {
      valid: () => {
        asked++;
        return false;
      },
    };
    await assert.rejects(
      t.send(new URL("https://apiserver.test/apis/x"), patch('{"refused":1}', closed)),
      FencedError,
    );
    assert.ok(asked >= 1, "asked before the bytes were written");
    const ok = await t.send(
      new URL("https://apiserver.test/apis/x"),
      patch('{"sent":1}', { valid: () => true }),
    );
    assert.equal(ok.status, 200);
    assert.equal(await ok.text!(), "{}");
    assert.deepEqual(bodies, ['{"sent":1}']);
  } finally {
    t.close();
    await server.close();
  }
});
