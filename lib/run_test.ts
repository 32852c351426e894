/**
 * runAttacher() in-process against the in-memory API server (dummy mode: no driver): it owns the
 * API clients it builds and closes every one of them on every way out, and at exit it posts the
 * Events still queued (the leader's "stopped leading").
 */

import assert from "node:assert/strict";
import { MemoryApiServer } from "../testkit/apiserver/server.ts";
import { parseOptions } from "./cli/options.ts";
import { EVENTS } from "./kube/api.ts";
import { KubeClient } from "./kube/client.ts";
import { type ClusterConnection, connectionFromKubeconfigs } from "./kube/config.ts";
import type { KubeObject } from "./kube/types.ts";
import { nullLogger } from "./observe/logger.ts";
import { runAttacher } from "./run.ts";

/** A KubeClient that counts its close() calls. */
class CountedClient extends KubeClient {
  closed = 0;
  override close(): Promise<void> {
    this.closed++;
    return super.close();
  }
}

async function setUp() {
  const server = await MemoryApiServer.start();
  const connection: ClusterConnection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const clients: CountedClient[] = [];
  return {
    server,
    clients,
    kube: () => {
      const client = new CountedClient({ connection }, {});
      clients.push(client);
      return client;
    },
    async [Symbol.asyncDispose]() {
      for (const client of clients) await client.close();
      await server.close();
    },
  };
}

function options(args: string[]) {
  const parsed = parseOptions(["--dummy", ...args]);
  assert.ok(parsed.ok);
  return parsed.options;
}

Deno.test("runAttacher() closes every API client it built when it stops, after posting the queued Events", async () => {
  await using t = await setUp();
  const stop = new AbortController();
  await runAttacher(options(["--leader-election", "--leader-election-namespace=default"]), {
    log: nullLogger,
    signal: stop.signal,
    kube: t.kube,
    env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
    onReady: () => stop.abort(),
  });
  assert.equal(t.clients.length, 3, "the informers', the Events' and the Lease's clients");
  assert.deepEqual(t.clients.map((c) => c.closed), [1, 1, 1]);
  const messages = t.server.list<KubeObject & { message: string }>(EVENTS, "default").items
    .map((e) => e.message).sort();
  assert.deepEqual(messages, ["r1 became leader", "r1 stopped leading"]);
});

Deno.test("runAttacher() closes the API clients it built when startup fails", async () => {
  await using t = await setUp();
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const stop = new AbortController();
  await assert.rejects(
    runAttacher(options([`--http-endpoint=127.0.0.1:${taken.addr.port}`]), {
      log: nullLogger,
      signal: stop.signal,
      kube: t.kube,
      env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
    }),
  );
  assert.ok(t.clients.length >= 1);
  assert.deepEqual(t.clients.map((c) => c.closed), t.clients.map(() => 1));
});
