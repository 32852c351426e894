import assert from "node:assert/strict";
import { TcpProxy } from "./tcp_proxy.ts";

/** An echo server on loopback; stops with the returned function. */
function echoServer(): { port: number; stop: () => Promise<void> } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const serving = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      (async () => {
        const buf = new Uint8Array(1024);
        try {
          for (;;) {
            const n = await conn.read(buf);
            if (n === null) break;
            await conn.write(buf.subarray(0, n));
          }
        } catch {
          // closed
        }
        conns.delete(conn);
        try {
          conn.close();
        } catch {
          // closed
        }
      })();
    }
  })();
  return {
    port: listener.addr.port,
    stop: async () => {
      listener.close();
      for (const c of conns) c.close();
      await serving.catch(() => {});
    },
  };
}

async function roundTrip(conn: Deno.Conn, text: string): Promise<string> {
  await conn.write(new TextEncoder().encode(text));
  const buf = new Uint8Array(1024);
  const n = await conn.read(buf);
  return n === null ? "<closed>" : new TextDecoder().decode(buf.subarray(0, n));
}

Deno.test("tcp proxy: a hold keeps every byte and delivers it in order on release", async () => {
  const echo = echoServer();
  await using proxy = await TcpProxy.start({ port: echo.port });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.port });
  assert.equal(await roundTrip(conn, "a"), "a");
  proxy.hold();
  assert.ok(proxy.held);
  await conn.write(new TextEncoder().encode("bc"));
  const buf = new Uint8Array(16);
  const reading = conn.read(buf);
  // Nothing arrives while held: the read is still pending after the proxy had time to forward.
  const raced = await Promise.race([
    reading.then(() => "read"),
    new Promise<string>((r) => setTimeout(() => r("pending"), 200)),
  ]);
  assert.equal(raced, "pending");
  // A connection made during the hold is accepted and held too.
  const late = await Deno.connect({ hostname: "127.0.0.1", port: proxy.port });
  await late.write(new TextEncoder().encode("z"));
  proxy.release();
  const n = await reading;
  assert.equal(new TextDecoder().decode(buf.subarray(0, n ?? 0)), "bc");
  const lateBuf = new Uint8Array(16);
  const m = await late.read(lateBuf);
  assert.equal(new TextDecoder().decode(lateBuf.subarray(0, m ?? 0)), "z");
  conn.close();
  late.close();
  await proxy.close();
  await echo.stop();
});

Deno.test("tcp proxy: a delay holds back the target's bytes by that long, order kept", async () => {
  const echo = echoServer();
  await using proxy = await TcpProxy.start({ port: echo.port });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.port });
  proxy.setDelay(300);
  const t0 = performance.now();
  assert.equal(await roundTrip(conn, "slow"), "slow");
  const took = performance.now() - t0;
  assert.ok(took >= 290, `answered after ${took} ms`);
  proxy.setDelay(0);
  assert.equal(await roundTrip(conn, "fast"), "fast");
  conn.close();
  await proxy.close();
  await echo.stop();
});

Deno.test("tcp proxy: resetAll closes open connections, refuseNew closes new ones", async () => {
  const echo = echoServer();
  await using proxy = await TcpProxy.start({ port: echo.port });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.port });
  assert.equal(await roundTrip(conn, "x"), "x");
  proxy.refuseNew(true);
  proxy.resetAll();
  const buf = new Uint8Array(16);
  assert.equal(await conn.read(buf).catch(() => null), null);
  conn.close();
  const refused = await Deno.connect({ hostname: "127.0.0.1", port: proxy.port });
  await assert.rejects(async () => {
    await refused.write(new TextEncoder().encode("y"));
    const n = await refused.read(buf);
    if (n === null) throw new Error("closed");
  });
  refused.close();
  assert.equal(proxy.resets, 2);
  proxy.refuseNew(false);
  const again = await Deno.connect({ hostname: "127.0.0.1", port: proxy.port });
  assert.equal(await roundTrip(again, "ok"), "ok");
  again.close();
  await proxy.close();
  await echo.stop();
});

Deno.test("tcp proxy: close ends a held connection's pumps", async () => {
  const echo = echoServer();
  const proxy = await TcpProxy.start({ port: echo.port });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.port });
  assert.equal(await roundTrip(conn, "a"), "a");
  proxy.hold();
  await conn.write(new TextEncoder().encode("held"));
  await proxy.close();
  assert.equal(proxy.open, 0);
  conn.close();
  await echo.stop();
});
