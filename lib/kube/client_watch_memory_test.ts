/**
 * A long watch keeps no event it already delivered: memory after a forced GC stays flat over
 * 20,000 events read from one open watch. Needs `--v8-flags=--expose-gc` (the `test` task sets
 * it).
 */

import assert from "node:assert/strict";
import { VOLUME_ATTACHMENTS } from "./api.ts";
import { KubeClient } from "./client.ts";
import { connectionFromKubeconfigs } from "./config.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { VolumeAttachment } from "./types.ts";

const EVENTS = 20_000;
/** Events read before the baseline, so that buffers and caches reached their working size. */
const WARM_UP = 1_000;
/** Padding of every event: ~2 KB, about the size of a real VolumeAttachment event. */
const PADDING = "x".repeat(2_000);

function forcedGc(): () => void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== "function") {
    throw new Error("this test needs --v8-flags=--expose-gc (as `deno task test` runs it)");
  }
  return gc;
}

/** Heap plus the ArrayBuffer memory outside it, after a full collection. */
async function liveBytes(gc: () => void): Promise<number> {
  // Let pending reactions run first, then collect twice (the second pass frees what the
  // first one's finalizers released).
  await new Promise((resolve) => setTimeout(resolve, 0));
  gc();
  gc();
  const usage = Deno.memoryUsage();
  return usage.heapUsed + usage.external;
}

Deno.test({
  name: "KubeClient watch retains no delivered event: memory flat over 20,000 events",
  // The op sanitizer keeps a record of every async op a test starts until the test ends, which
  // would be measured as growth here; the watch is aborted and the server closed below anyway.
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  const gc = forcedGc();
  const server = await MemoryApiServer.start({});
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver.kubeconfig", text: server.kubeconfig() },
  ]);
  const client = new KubeClient({ connection }, { userAgent: "csi-attacher/test" });
  const ac = new AbortController();
  try {
    const created = server.create<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va1" },
      spec: {
        attacher: "csi.example.com",
        nodeName: "node1",
        source: { persistentVolumeName: "pv1" },
      },
    });
    const events = client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: created.metadata.resourceVersion ?? "",
      timeoutSeconds: 3600,
      allowWatchBookmarks: false,
      signal: ac.signal,
    })[Symbol.asyncIterator]();
    let baseline = 0;
    for (let i = 1; i <= EVENTS; i++) {
      // One change, then its event: each event reaches the client as a read of its own.
      server.patch(VOLUME_ATTACHMENTS, "va1", {
        type: "merge",
        body: { metadata: { annotations: { n: String(i), padding: PADDING } } },
      });
      const next = await events.next();
      assert.equal(next.done, false);
      assert.equal(next.value?.type, "MODIFIED");
      assert.equal(next.value?.object.metadata.annotations?.n, String(i));
      // The server's event history is not what is measured.
      if (i % 500 === 0) server.compact();
      if (i === WARM_UP) baseline = await liveBytes(gc);
    }
    const growth = await liveBytes(gc) - baseline;
    // Retaining every event read would be well over 40 MB (19,000 reads of 2 KB and more).
    assert.ok(
      growth < 8 * 1024 * 1024,
      `live memory grew by ${(growth / 1024 / 1024).toFixed(1)} MiB over ${
        EVENTS - WARM_UP
      } watch events while the watch stayed open`,
    );
    ac.abort();
    assert.equal((await events.next()).done, true);
  } finally {
    ac.abort();
    await client.close();
    await server.close();
  }
});
