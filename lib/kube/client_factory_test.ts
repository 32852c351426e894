import assert from "node:assert/strict";
import { PERSISTENT_VOLUMES } from "./api.ts";
import { KubeClient } from "./client.ts";
import { KubeClientFactory } from "./client_factory.ts";
import type { RequestRateLimiter } from "./request_reports.ts";
import { ok, RawHttpServer } from "../../testkit/http1/raw_server.ts";
import { plainConnection } from "../../testkit/harness/client_fixtures.ts";

const PV = { apiVersion: "v1", kind: "PersistentVolume", metadata: { name: "pv1" }, spec: {} };

/** A loopback server answering every request with the PV on a kept connection. */
function pvServer(): RawHttpServer {
  return RawHttpServer.start(async (ex) => {
    await ex.write(ok(JSON.stringify(PV)));
    return "keep";
  });
}

/** Waits (real time, bounded) until the server has seen `count` connections closed by the client. */
async function clientClosed(server: RawHttpServer, count: number): Promise<void> {
  for (let i = 0; i < 400 && server.clientClosed < count; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
}

Deno.test("two clients of one factory send over one connection, two separate clients over two", async () => {
  await using server = pvServer();
  const factory = new KubeClientFactory({ connection: plainConnection(server.url) });
  const a = factory.create();
  const b = factory.create();
  await a.get(PERSISTENT_VOLUMES, "pv1");
  await b.get(PERSISTENT_VOLUMES, "pv1");
  await a.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(server.requests.length, 3);
  assert.equal(server.connections, 1, "the second client reused the first one's connection");
  await a.close();
  await b.close();

  // Without a factory each client has a pool of its own: the count above is the pool's.
  const c = new KubeClient({ connection: plainConnection(server.url) });
  const d = new KubeClient({ connection: plainConnection(server.url) });
  await c.get(PERSISTENT_VOLUMES, "pv1");
  await d.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(server.connections, 3, "one new connection per client");
  await c.close();
  await d.close();
});

Deno.test("the shared pool stays open until the last client closes, then a new client starts one", async () => {
  await using server = pvServer();
  const factory = new KubeClientFactory({ connection: plainConnection(server.url) });
  const a = factory.create();
  const b = factory.create();
  assert.equal(factory.clients, 2);
  await a.get(PERSISTENT_VOLUMES, "pv1");
  await a.close();
  assert.equal(factory.clients, 1);
  await a.close(); // a second close lets go of nothing more
  assert.equal(factory.clients, 1);
  await assert.rejects(a.get(PERSISTENT_VOLUMES, "pv1"), /closed/);
  await b.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(server.connections, 1, "b still sends over the connection a opened");
  assert.equal(server.clientClosed, 0, "closing a did not close the pool");

  await b.close();
  assert.equal(factory.clients, 0);
  await clientClosed(server, 1);
  assert.equal(server.clientClosed, 1, "the last close closed the pooled connection");

  const c = factory.create();
  await c.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(server.connections, 2, "a client made after the last close opens a new pool");
  await c.close();
  await clientClosed(server, 2);
  assert.equal(server.clientClosed, 2);
});

Deno.test("each client of a factory waits for a rate limiter of its own", async () => {
  await using server = pvServer();
  const takes: number[] = [];
  const factory = new KubeClientFactory({
    connection: plainConnection(server.url),
    rateLimiter: (): RequestRateLimiter => {
      const id = takes.push(0) - 1;
      return { take: () => Promise.resolve(void takes[id]!++) };
    },
  });
  const a = factory.create();
  const b = factory.create();
  await a.get(PERSISTENT_VOLUMES, "pv1");
  await a.get(PERSISTENT_VOLUMES, "pv1");
  await b.get(PERSISTENT_VOLUMES, "pv1");
  assert.deepEqual(takes, [2, 1], "a limiter per client, each taken by its own client only");
  await a.close();
  await b.close();
});

Deno.test("a client the factory cannot make holds no share of the pool", () => {
  const factory = new KubeClientFactory({ connection: plainConnection("ftp://127.0.0.1:1") });
  assert.throws(() => factory.create(), TypeError);
  assert.equal(factory.clients, 0);
});
