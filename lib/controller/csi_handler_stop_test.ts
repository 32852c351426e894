/**
 * The CSI handler when the attacher stops: a sync that has not called the driver ends where it is
 * (the API request it waits for ends with the stop signal), records nothing and reports
 * `stopped`; a sync past the driver call completes, its status write included.
 */

import assert from "node:assert/strict";
import type {
  CallOptions,
  ControllerPublishVolumeRequest,
  ControllerUnpublishVolumeRequest,
  CsiClient,
} from "../csi/api.ts";
import type { EventSink } from "../events/recorder.ts";
import {
  type KubeApi,
  type ObjectOptions,
  type Patch,
  PERSISTENT_VOLUMES,
  type Resource,
  SECRETS,
} from "../kube/api.ts";
import type {
  CsiNode,
  KubeObject,
  PersistentVolume,
  Secret,
  VolumeAttachment,
} from "../kube/types.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { CsiHandler } from "./csi_handler.ts";
import { finalizerName } from "./names.ts";

const DRIVER = "csi.example.com";
const FIN = finalizerName(DRIVER);

/** One API request the fake received: what, and the signal it was given. */
interface ApiCall {
  what: string;
  signal: AbortSignal | undefined;
}

/**
 * A KubeApi whose patch and get answer at once, except those `hold` names: they wait until their
 * signal aborts (then reject with its reason) or until {@link release}.
 */
class FakeKube implements KubeApi {
  calls: ApiCall[] = [];
  /** What a patch of `<plural>/<name>` answers (the object as stored); else a bare object. */
  objects = new Map<string, KubeObject>();
  hold = new Set<string>();
  #held: Array<() => void> = [];

  release(): void {
    for (const resolve of this.#held.splice(0)) resolve();
  }

  #answer<T>(what: string, signal: AbortSignal | undefined, value: T): Promise<T> {
    this.calls.push({ what, signal });
    if (!this.hold.has(what)) return Promise.resolve(value);
    return new Promise<T>((resolve, reject) => {
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
      this.#held.push(() => resolve(value));
    });
  }

  patch<T extends KubeObject>(
    res: Resource,
    name: string,
    _patch: Patch,
    opts?: ObjectOptions & { subresource?: "status" },
  ): Promise<T> {
    const what = `patch ${res.plural}${opts?.subresource ? "/status" : ""} ${name}`;
    const object = this.objects.get(`${res.plural}/${name}`) ??
      { metadata: { name, uid: `uid-${name}`, resourceVersion: "2" } };
    return this.#answer(what, opts?.signal, structuredClone(object) as T);
  }

  get<T extends KubeObject>(res: Resource, name: string, opts?: ObjectOptions): Promise<T> {
    const secret: Secret = { metadata: { name }, data: { password: btoa("s3cret") } };
    return this.#answer(`get ${res.plural} ${name}`, opts?.signal, secret as unknown as T);
  }

  list(): never {
    throw new TypeError("not used");
  }
  watch(): never {
    throw new TypeError("not used");
  }
  create(): never {
    throw new TypeError("not used");
  }
  update(): never {
    throw new TypeError("not used");
  }
  delete(): never {
    throw new TypeError("not used");
  }
}

/** A CSI client that records publish and unpublish; a publish answers once released. */
class FakeCsi implements CsiClient {
  calls: string[] = [];
  holdPublish = false;
  #release: (() => void) | undefined;
  releasePublish(): void {
    this.#release?.();
  }
  async controllerPublishVolume(req: ControllerPublishVolumeRequest, _o: CallOptions) {
    this.calls.push(`publish ${req.volumeId}`);
    if (this.holdPublish) await new Promise<void>((resolve) => this.#release = resolve);
    return { publishContext: {} };
  }
  controllerUnpublishVolume(req: ControllerUnpublishVolumeRequest, _o: CallOptions) {
    this.calls.push(`unpublish ${req.volumeId}`);
    return Promise.resolve();
  }
  probe(): never {
    throw new TypeError("not used");
  }
  getPluginInfo(): never {
    throw new TypeError("not used");
  }
  getPluginCapabilities(): never {
    throw new TypeError("not used");
  }
  controllerGetCapabilities(): never {
    throw new TypeError("not used");
  }
  listVolumes(): never {
    throw new TypeError("not used");
  }
  close(): void {}
}

function pv(secret: boolean): PersistentVolume {
  return {
    metadata: { name: "pv1" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      csi: {
        driver: DRIVER,
        volumeHandle: "vol1",
        controllerPublishSecretRef: secret ? { name: "s1", namespace: "ns" } : undefined,
      },
    },
  };
}

function va(deleting: boolean): VolumeAttachment {
  return {
    metadata: {
      name: "va1",
      uid: "uid-va1",
      resourceVersion: "1",
      finalizers: deleting ? [FIN] : undefined,
      deletionTimestamp: deleting ? "2026-01-01T00:00:00Z" : undefined,
    },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: "pv1" } },
    status: { attached: deleting },
  };
}

function setUp(opts: { secret?: boolean } = {}) {
  const kube = new FakeKube();
  kube.objects.set("persistentvolumes/pv1", pv(opts.secret ?? false));
  const csi = new FakeCsi();
  const events: string[] = [];
  const sink: EventSink = { record: (_o, type, reason) => events.push(`${type} ${reason}`) };
  const csiNode: CsiNode = {
    metadata: { name: "node1" },
    spec: { drivers: [{ name: DRIVER, nodeID: "node-1" }] },
  };
  const handler = new CsiHandler({
    kube,
    csi,
    log: nullLogger,
    stores: {
      volumeAttachments: new FakeInformer<VolumeAttachment>(),
      persistentVolumes: new FakeInformer<PersistentVolume>([pv(opts.secret ?? false)]),
      csiNodes: new FakeInformer<CsiNode>([csiNode]),
    },
    memory: new AttachmentMemory({ backoff: { forget() {} } }),
    events: sink,
  }, {
    driverName: DRIVER,
    timeoutMs: 1000,
    supportsPublishReadOnly: false,
    supportsSingleNodeMultiWriter: false,
    defaultFsType: "ext4",
    attachErrorCodes: true,
  });
  return { kube, csi, events, handler };
}

/** Lets the sync run until it waits for something that is held. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

Deno.test("CsiHandler: the stop signal ends an attach waiting for its VA patch; no publish, nothing recorded", async () => {
  const { kube, csi, events, handler } = setUp();
  kube.hold.add("patch volumeattachments va1");
  const stop = new AbortController();
  const syncing = handler.syncVolumeAttachment(va(false), stop.signal);
  await settle();
  assert.deepEqual(kube.calls.map((c) => c.what), [
    `patch ${PERSISTENT_VOLUMES.plural} pv1`,
    "patch volumeattachments va1",
  ]);
  stop.abort();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, [], "no ControllerPublishVolume after the stop");
  assert.equal(kube.calls.length, 2, "no attachError written");
  assert.deepEqual(events, [], "no Event");
});

Deno.test("CsiHandler: the stop signal ends a detach waiting for its secret; no unpublish, nothing recorded", async () => {
  const { kube, csi, events, handler } = setUp({ secret: true });
  kube.hold.add(`get ${SECRETS.plural} s1`);
  const stop = new AbortController();
  const syncing = handler.syncVolumeAttachment(va(true), stop.signal);
  await settle();
  assert.deepEqual(kube.calls.map((c) => c.what), [`get ${SECRETS.plural} s1`]);
  stop.abort();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, []);
  assert.equal(kube.calls.length, 1, "the finalizer stays: no write");
  assert.deepEqual(events, []);
});

Deno.test("CsiHandler: an attach already in the driver when the stop comes completes and writes attached", async () => {
  const { kube, csi, handler } = setUp();
  csi.holdPublish = true;
  const stop = new AbortController();
  const syncing = handler.syncVolumeAttachment(va(false), stop.signal);
  await settle();
  assert.deepEqual(csi.calls, ["publish vol1"]);
  stop.abort();
  csi.releasePublish();
  assert.equal(await syncing, "done");
  const status = kube.calls.find((c) => c.what === "patch volumeattachments/status va1");
  assert.ok(status, "attached: true is written");
  assert.equal(status.signal?.aborted ?? false, false, "the status write is not cut by the stop");
});

Deno.test("CsiHandler: without a stop, a held API answer is waited for and the attach completes", async () => {
  const { kube, csi, handler } = setUp();
  kube.hold.add("patch volumeattachments va1");
  const syncing = handler.syncVolumeAttachment(va(false), new AbortController().signal);
  await settle();
  kube.release();
  assert.equal(await syncing, "done");
  assert.deepEqual(csi.calls, ["publish vol1"]);
});

Deno.test("CsiHandler: an attach leaves the VolumeAttachment it was given (the cached one) unchanged", async () => {
  const { kube, handler } = setUp();
  const cached = va(false);
  cached.metadata.finalizers = ["other/finalizer"];
  cached.metadata.annotations = { keep: "me" };
  const before = structuredClone(cached);
  assert.equal(await handler.syncVolumeAttachment(cached, new AbortController().signal), "done");
  assert.ok(kube.calls.some((c) => c.what === "patch volumeattachments va1"), "finalizer patched");
  assert.deepEqual(cached, before);
});
