/**
 * An informer over KubeClient whose protobuf watch breaks (a frame length of 4 GiB after an
 * event): the watch ends with InvalidResponse, the informer keeps the event before it and
 * watches again from its resourceVersion, as after any broken watch.
 */

import assert from "node:assert/strict";
import { VOLUME_ATTACHMENTS } from "./api.ts";
import { KubeClient } from "./client.ts";
import { connectionFromKubeconfigs } from "./config.ts";
import { Informer } from "./informer.ts";
import type { VolumeAttachment } from "./types.ts";
import { lengthFrame, writeObject, writeWatchEvent } from "../../testkit/kube_protobuf_writer.ts";
import { volumeAttachment } from "../../testkit/kube_protobuf_fixtures.ts";

const PROTOBUF = "application/vnd.kubernetes.protobuf";

function va(name: string, rv: string): Record<string, unknown> {
  const obj = volumeAttachment(name);
  (obj.metadata as Record<string, unknown>).resourceVersion = rv;
  return obj;
}

Deno.test("Informer: a broken protobuf watch is watched again from the last resourceVersion", async () => {
  const watches: URLSearchParams[] = [];
  const secondWatch = Promise.withResolvers<void>();
  const closed = new AbortController();
  const listening = Promise.withResolvers<number>();
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: (addr) => listening.resolve(addr.port),
  }, (req) => {
    const query = new URL(req.url).searchParams;
    if (query.get("watch") !== "true") {
      const { kind: _k, apiVersion: _a, ...item } = va("a", "10");
      const list = writeObject({
        kind: "VolumeAttachmentList",
        apiVersion: "storage.k8s.io/v1",
        metadata: { resourceVersion: "10" },
        items: [item],
      });
      return new Response(list as Uint8Array<ArrayBuffer>, {
        headers: { "content-type": PROTOBUF },
      });
    }
    watches.push(query);
    const first = watches.length === 1;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        if (first) {
          controller.enqueue(lengthFrame(writeWatchEvent("ADDED", writeObject(va("b", "11")))));
          controller.enqueue(Uint8Array.of(0xff, 0xff, 0xff, 0xff));
          controller.close();
          return;
        }
        controller.enqueue(lengthFrame(writeWatchEvent("MODIFIED", writeObject(va("b", "12")))));
        secondWatch.resolve();
        closed.signal.addEventListener("abort", () => controller.close());
      },
    });
    return new Response(body, { headers: { "content-type": `${PROTOBUF};stream=watch` } });
  });
  const port = await listening.promise;
  const text = JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server: `http://127.0.0.1:${port}` } }],
    users: [{ name: "u", user: {} }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
    "current-context": "ctx",
  });
  const connection = await connectionFromKubeconfigs([{ file: "/test/kubeconfig", text }]);
  const client = new KubeClient({ connection });
  const informer = new Informer<VolumeAttachment>(
    { kube: client, random: () => 0 },
    { resource: VOLUME_ATTACHMENTS, resyncMs: 0 },
  );
  const stop = new AbortController();
  const running = informer.run(stop.signal);
  try {
    await secondWatch.promise;
    for (let i = 0; i < 100 && informer.get("b")?.metadata.resourceVersion !== "12"; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.deepStrictEqual(informer.list().map((o) => o.metadata.name).sort(), ["a", "b"]);
    assert.equal(informer.get("b")?.metadata.resourceVersion, "12");
    assert.deepStrictEqual(watches.map((q) => q.get("resourceVersion")), ["10", "11"]);
  } finally {
    stop.abort();
    closed.abort();
    await running.catch(() => {});
    await client.close();
    await server.shutdown();
  }
});
