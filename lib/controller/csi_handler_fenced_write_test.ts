/**
 * The CSI handler's API writes are fenced at the last synchronous moment: a status write that
 * waits for the client's rate limiter (seconds at the default `--kube-api-qps=5` with work
 * queued) while the lease could pass is never sent. The handler runs on the real KubeClient
 * against MemoryApiServer, so what reaches the server is what the wire carried.
 */

import assert from "node:assert/strict";
import { CsiHandler } from "./csi_handler.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../kube/api.ts";
import { KubeClient } from "../kube/client.ts";
import { connectionFromKubeconfigs } from "../kube/config.ts";
import type { CsiClient } from "../csi/api.ts";
import type { LeaseFence } from "../lease_fence.ts";
import { nullLogger } from "../observe/logger.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";

const DRIVER = "csi.example.com";

/** Hands out tokens at once until `gated`; then each take waits for {@link release}. */
class GatedLimiter {
  gated = false;
  #waiting: (() => void)[] = [];
  take(): Promise<void> {
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

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 2));
  assert.ok(check(), what);
}

Deno.test("CsiHandler: a status patch waiting on the rate limiter while the fence closes is never sent", async () => {
  const server = await MemoryApiServer.start();
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const limiter = new GatedLimiter();
  const kube = new KubeClient({ connection, rateLimiter: limiter }, { userAgent: "test" });
  try {
    const pv = server.create<PersistentVolume>(PERSISTENT_VOLUMES, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pv1" },
      spec: { accessModes: ["ReadWriteOnce"], csi: { driver: DRIVER, volumeHandle: "vol1" } },
    });
    const va = server.create<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va1" },
      spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv1" } },
    });
    const csiNode = server.create<CsiNode>(CSI_NODES, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "node1" },
      spec: { drivers: [{ name: DRIVER, nodeID: "node-1" }] },
    });
    let open = true;
    const fence: LeaseFence = { valid: () => open };
    const publishes: string[] = [];
    const csi = {
      controllerPublishVolume(req: { volumeId: string }) {
        publishes.push(req.volumeId);
        // From here on the handler's next write waits for its token.
        limiter.gated = true;
        return Promise.resolve({ publishContext: {} });
      },
    } as unknown as CsiClient;
    const handler = new CsiHandler({
      kube,
      csi,
      log: nullLogger,
      stores: {
        volumeAttachments: new FakeInformer([va]),
        persistentVolumes: new FakeInformer([pv]),
        csiNodes: new FakeInformer([csiNode]),
      },
      memory: new AttachmentMemory({ backoff: { forget() {} } }),
      fence,
    }, {
      driverName: DRIVER,
      timeoutMs: 1000,
      supportsPublishReadOnly: false,
      supportsSingleNodeMultiWriter: false,
      defaultFsType: "ext4",
      attachErrorCodes: false,
    });
    const sync = handler.syncVolumeAttachment(va, new AbortController().signal);
    await until(() => limiter.waiting === 1, "the status write waits for its token");
    assert.deepEqual(publishes, ["vol1"]);
    server.clearRequests();
    open = false; // the lease could have passed while the write waited
    limiter.release();
    assert.equal(await sync, "stopped");
    assert.deepEqual(
      server.requests.map((r) => `${r.method} ${r.path}`),
      [],
      "neither the status write nor an attachError write was sent",
    );
    const stored = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
    assert.equal(stored.status?.attached ?? false, false, "left for the next leader");
  } finally {
    await kube.close();
    await server.close();
  }
});
