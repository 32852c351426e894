/**
 * A write's lease fence in KubeClient: asked after the wait for the rate limiter, before every
 * retry, and by the transport right before the bytes are written, so a write that waited while
 * the lease could have passed is never sent. Against MemoryApiServer: every request is real HTTP.
 */

import assert from "node:assert/strict";
import { PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "./api.ts";
import { KubeClient } from "./client.ts";
import { connectionFromKubeconfigs } from "./config.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { PersistentVolume, VolumeAttachment } from "./types.ts";
import { FencedError, type LeaseFence } from "../lease_fence.ts";
import { RecordingKubeObserver } from "../../testkit/fakes/recording_kube_observer.ts";

/** A rate limiter whose tokens the test hands out one at a time; `onTake` runs at each take. */
class GatedLimiter {
  takes = 0;
  onTake: (() => void) | undefined;
  #waiting: (() => void)[] = [];
  /** While true every take waits for {@link release}. */
  gated = false;

  take(_signal?: AbortSignal): Promise<void> {
    this.takes++;
    this.onTake?.();
    if (!this.gated) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  release(): void {
    this.#waiting.shift()?.();
  }
}

/** A fence the test closes by hand; counts the questions. */
function handFence(): LeaseFence & { open: boolean; asked: number } {
  const f = {
    open: true,
    asked: 0,
    valid: () => {
      f.asked++;
      return f.open;
    },
  };
  return f;
}

function va(name: string): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name, finalizers: ["external-attacher/csi-test"] },
    spec: { attacher: "csi/test", nodeName: "node1", source: { persistentVolumeName: "pv1" } },
  };
}

async function env() {
  const server = await MemoryApiServer.start();
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const limiter = new GatedLimiter();
  const observer = new RecordingKubeObserver();
  const client = new KubeClient({ connection, rateLimiter: limiter, observer }, {
    userAgent: "csi-attacher/test",
  });
  return {
    server,
    client,
    limiter,
    observer,
    [Symbol.asyncDispose]: async () => {
      await client.close();
      await server.close();
    },
  };
}

/** Lets the request under way reach its next wait. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
}

const patches = (server: MemoryApiServer) =>
  server.requests.filter((r) => r.method === "PATCH").length;

Deno.test("KubeClient: a status patch waiting on the rate limiter while the fence closes is never sent", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  const fence = handFence();
  e.limiter.gated = true;
  const pending = e.client.patch(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: { status: { attached: false } },
  }, { subresource: "status", fence });
  await settle();
  assert.equal(e.limiter.waiting, 1, "the patch waits for its token");
  fence.open = false; // the lease could have passed while it waited (a pause, a long queue)
  e.limiter.release();
  await assert.rejects(pending, FencedError);
  assert.equal(patches(e.server), 0, "no byte of the patch reached the server");
  assert.equal(e.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1").status, undefined);
  assert.equal(fence.asked, 1, "asked once the token was there, not again below");
  assert.equal(e.observer.tries.length, 0, "a request never sent is not a try in the metrics");
  assert.equal(e.observer.retries.length, 0);
});

Deno.test("KubeClient: the fence is asked again before every retry", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  const fence = handFence();
  // The first try is answered 429 with Retry-After: 0; its retry takes a second token, and the
  // fence closes while it waits for it.
  e.server.failNext({ method: "PATCH", status: 429, retryAfterSeconds: 0 });
  e.limiter.onTake = () => {
    if (e.limiter.takes === 2) fence.open = false;
  };
  await assert.rejects(
    e.client.patch(VOLUME_ATTACHMENTS, "va1", {
      type: "merge",
      body: { metadata: { finalizers: null } },
    }, { fence }),
    FencedError,
  );
  assert.equal(patches(e.server), 1, "the first try went out, the retry did not");
  assert.deepEqual(
    e.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1").metadata.finalizers,
    ["external-attacher/csi-test"],
  );
});

Deno.test("KubeClient: a write with an open fence, and reads and writes without one, go out", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  const fence = handFence();
  await e.client.patch(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: { status: { attached: true } },
  }, { subresource: "status", fence });
  // After the limiter and right before the bytes: two questions for one try.
  assert.equal(fence.asked, 2);
  fence.open = false;
  // A read, and a write that needs no lease (an Event, a Lease renewal), carry no fence.
  await e.client.get(VOLUME_ATTACHMENTS, "va1");
  const pv: PersistentVolume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv1" },
    spec: { csi: { driver: "csi/test", volumeHandle: "h1" } },
  };
  await e.client.create(PERSISTENT_VOLUMES, pv);
  assert.equal(fence.asked, 2);
  assert.equal(
    e.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1").status?.attached,
    true,
  );
});
