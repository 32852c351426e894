/**
 * The CSI handler when the attacher stops: a sync that has not called the driver ends where it is
 * (the API request it waits for ends with the stop signal), records nothing and reports
 * `stopped`; a sync past the driver call completes, its status write included.
 *
 * And when the lease fence closes: the sync stops the same way before its next write or driver
 * call, after the driver call too (the next leader repeats it).
 *
 * And when the write of `attachError`/`detachError` itself fails: the sync is retried, the Event
 * still tells the error, and one retry line logs both errors.
 */

import assert from "node:assert/strict";
import {
  type CallOptions,
  type ControllerPublishVolumeRequest,
  type ControllerUnpublishVolumeRequest,
  type CsiClient,
} from "../csi/api.ts";
import { FencedError, type LeaseFence, SOLE_REPLICA } from "../lease_fence.ts";
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
import { type Logger, nullLogger } from "../observe/logger.ts";
import { createLogger } from "../observe/log.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
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
  /** Requests (`what`) that are refused with the error given. */
  fail = new Map<string, Error>();
  #held: Array<() => void> = [];

  release(): void {
    for (const resolve of this.#held.splice(0)) resolve();
  }

  #answer<T>(what: string, signal: AbortSignal | undefined, value: T): Promise<T> {
    this.calls.push({ what, signal });
    const refusal = this.fail.get(what);
    if (refusal !== undefined) return Promise.reject(refusal);
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

/**
 * A CSI client that records publish and unpublish; a publish answers once released. As the real
 * client does, it asks the call's fence right before "sending" and refuses the call on a no.
 */
class FakeCsi implements CsiClient {
  calls: string[] = [];
  holdPublish = false;
  /** Called when a call is received, before it answers. */
  onCall: (() => void) | undefined;
  #release: (() => void) | undefined;
  releasePublish(): void {
    this.#release?.();
  }
  async controllerPublishVolume(req: ControllerPublishVolumeRequest, o: CallOptions) {
    if (o.fence?.valid() === false) throw new FencedError();
    this.calls.push(`publish ${req.volumeId}`);
    this.onCall?.();
    if (this.holdPublish) await new Promise<void>((resolve) => this.#release = resolve);
    return { publishContext: {} };
  }
  controllerUnpublishVolume(req: ControllerUnpublishVolumeRequest, o: CallOptions) {
    if (o.fence?.valid() === false) return Promise.reject(new FencedError());
    this.calls.push(`unpublish ${req.volumeId}`);
    this.onCall?.();
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

function setUp(opts: { secret?: boolean; fence?: LeaseFence; log?: Logger } = {}) {
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
    log: opts.log ?? nullLogger,
    stores: {
      volumeAttachments: new FakeInformer<VolumeAttachment>(),
      persistentVolumes: new FakeInformer<PersistentVolume>([pv(opts.secret ?? false)]),
      csiNodes: new FakeInformer<CsiNode>([csiNode]),
    },
    memory: new AttachmentMemory({ backoff: { forget() {} } }),
    events: sink,
    fence: opts.fence ?? SOLE_REPLICA,
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

/** The "Sync stopped" lines of `log`, with their reason. */
function stopLines(log: FakeLogger): string[] {
  return log.lines.filter((l) => l.msg.startsWith("Sync stopped")).map((l) =>
    `${l.msg} (${l.fields.reason})`
  );
}

const STOP_LINE =
  "Sync stopped before its next write or driver call; the VolumeAttachment is left for the next leader";

Deno.test("CsiHandler: the stop signal ends an attach waiting for its VA patch; no publish, nothing recorded", async () => {
  const log = new FakeLogger();
  const { kube, csi, events, handler } = setUp({ log });
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
  assert.deepEqual(stopLines(log), [`${STOP_LINE} (attacher stopping)`]);
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

/** A fence the test closes by hand; counts the questions. */
function testFence(): LeaseFence & { open: boolean; asked: number } {
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

Deno.test("CsiHandler: a fence that closes while the VA patch is in flight stops the attach before the publish", async () => {
  const fence = testFence();
  const { kube, csi, events, handler } = setUp({ fence });
  kube.hold.add("patch volumeattachments va1");
  const syncing = handler.syncVolumeAttachment(va(false), new AbortController().signal);
  await settle();
  fence.open = false;
  kube.release();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, [], "no ControllerPublishVolume");
  assert.deepEqual(kube.calls.map((c) => c.what), [
    `patch ${PERSISTENT_VOLUMES.plural} pv1`,
    "patch volumeattachments va1",
  ], "no attachError, no status");
  assert.deepEqual(events, []);
});

Deno.test("CsiHandler: a closed fence writes nothing at all: not the PV finalizer, not the VA", async () => {
  const fence = testFence();
  fence.open = false;
  const { kube, csi, handler } = setUp({ fence });
  assert.equal(
    await handler.syncVolumeAttachment(va(false), new AbortController().signal),
    "stopped",
  );
  assert.equal(
    await handler.syncVolumeAttachment(va(true), new AbortController().signal),
    "stopped",
  );
  assert.deepEqual(kube.calls, []);
  assert.deepEqual(csi.calls, []);
});

Deno.test("CsiHandler: the fence goes with the driver call; its no at the write leaves the VA as it is", async () => {
  const fence = testFence();
  const { kube, csi, events, handler } = setUp({ fence });
  // Open for the handler's own question right before the call, closed when the client asks
  // (right before the request's bytes would be written).
  kube.hold.add("patch volumeattachments va1");
  const syncing = handler.syncVolumeAttachment(va(false), new AbortController().signal);
  await settle();
  const askedBefore = fence.asked;
  const valid = fence.valid;
  fence.valid = () => fence.asked++ === askedBefore ? valid() : false;
  kube.release();
  assert.equal(await syncing, "stopped");
  assert.deepEqual(csi.calls, [], "refused by the client: never sent");
  assert.equal(kube.calls.length, 2, "no attachError written");
  assert.deepEqual(events, []);
});

Deno.test("CsiHandler: a fence closed when the publish returns leaves attached unwritten for the next leader", async () => {
  const fence = testFence();
  const log = new FakeLogger();
  const { kube, csi, events, handler } = setUp({ fence, log });
  csi.onCall = () => fence.open = false; // a pause while the driver works
  assert.equal(
    await handler.syncVolumeAttachment(va(false), new AbortController().signal),
    "stopped",
  );
  assert.deepEqual(csi.calls, ["publish vol1"]);
  assert.equal(
    kube.calls.find((c) => c.what.startsWith("patch volumeattachments/status")),
    undefined,
  );
  assert.deepEqual(events, []);
  // After the driver call: the line says the fence stopped it, not that the driver was not called.
  assert.deepEqual(stopLines(log), [`${STOP_LINE} (lease fence closed)`]);
});

Deno.test("CsiHandler: a fence closed when the unpublish returns keeps the finalizer for the next leader", async () => {
  const fence = testFence();
  const { kube, csi, handler } = setUp({ fence });
  csi.onCall = () => fence.open = false;
  assert.equal(
    await handler.syncVolumeAttachment(va(true), new AbortController().signal),
    "stopped",
  );
  assert.deepEqual(csi.calls, ["unpublish vol1"]);
  assert.deepEqual(kube.calls, [], "the finalizer stays, no status write");
});

Deno.test("CsiHandler: a closed fence keeps the PV finalizer", async () => {
  const fence = testFence();
  const { kube, handler } = setUp({ fence });
  const deleted: PersistentVolume = {
    ...pv(false),
    metadata: { name: "pv1", finalizers: [FIN], deletionTimestamp: "2026-01-01T00:00:00Z" },
  };
  fence.open = false;
  assert.equal(await handler.syncPersistentVolume(deleted), "stopped");
  assert.equal(kube.calls.length, 0);
  fence.open = true;
  assert.equal(await handler.syncPersistentVolume(deleted), "done");
  assert.deepEqual(kube.calls.map((c) => c.what), [`patch ${PERSISTENT_VOLUMES.plural} pv1`]);
});

for (const op of ["attach", "detach"] as const) {
  Deno.test(`CsiHandler: a failed ${op}Error write retries, records the Event, logs both errors on one line`, async () => {
    const lines: string[] = [];
    const log = createLogger({ verbosity: 0, format: "json", write: (l) => lines.push(l) });
    const { kube, csi, events, handler } = setUp({ log });
    const deleting = op === "detach";
    const attachment = va(deleting);
    // The step's failure: the PV finalizer patch is refused (attach), the PV is not in the
    // cache (detach).
    kube.fail.set(`patch ${PERSISTENT_VOLUMES.plural} pv1`, new Error("forbidden"));
    if (deleting) attachment.spec.source = { persistentVolumeName: "pv2" };
    kube.fail.set("patch volumeattachments/status va1", new Error("apiserver unavailable"));

    assert.equal(
      await handler.syncVolumeAttachment(attachment, new AbortController().signal),
      "retry",
    );
    assert.deepEqual(csi.calls, []);
    assert.equal(kube.calls.at(-1)?.what, "patch volumeattachments/status va1", "the error write");
    assert.deepEqual(events, [`Warning ${deleting ? "DetachFailed" : "AttachFailed"}`]);
    const errors = lines.map((l) => JSON.parse(l)).filter((l) => l.err !== undefined);
    assert.equal(errors.length, 1, `one error line: ${lines.join("")}`);
    assert.equal(errors[0].msg, "Error processing VolumeAttachment, will retry");
    assert.match(
      errors[0].err,
      deleting
        ? /^failed to detach: .*"pv2" not found/
        : /^failed to attach: could not add PersistentVolume finalizer: forbidden$/,
    );
    assert.equal(errors[0].saveError, `failed to save ${op}Error: apiserver unavailable`);
  });
}
