/**
 * Fixtures of the CSI handler's unit tests (`lib/controller/attach_test.ts`, `detach_test.ts`,
 * `csi_handler_test.ts`): a KubeApi and a CsiClient that answer at once or hold their answer
 * until released or the request's signal aborts, a VA and its PV, and a handler built on them.
 *
 * @module
 */

import {
  type CallOptions,
  type ControllerPublishVolumeRequest,
  type ControllerUnpublishVolumeRequest,
  type CsiClient,
} from "../../lib/csi/api.ts";
import { FencedError, type LeaseFence, SOLE_REPLICA } from "../../lib/lease_fence.ts";
import type { EventSink } from "../../lib/events/recorder.ts";
import type { KubeApi, ObjectOptions, Patch, Resource } from "../../lib/kube/api.ts";
import type {
  CsiNode,
  KubeObject,
  PersistentVolume,
  Secret,
  VolumeAttachment,
} from "../../lib/kube/types.ts";
import { type Logger, nullLogger } from "../../lib/observe/logger.ts";
import { AttachmentMemory } from "../../lib/controller/attachment_memory.ts";
import { CsiHandler } from "../../lib/controller/csi_handler.ts";
import { finalizerName } from "../../lib/controller/names.ts";
import { FakeInformer } from "../fakes/fake_informer.ts";
import type { FakeLogger } from "../fakes/fake_logger.ts";

/** The driver of the fixtures. */
export const DRIVER = "csi.example.com";
/** Its finalizer. */
export const FIN = finalizerName(DRIVER);

/** One API request the fake received: what, and the signal it was given. */
export interface ApiCall {
  what: string;
  signal: AbortSignal | undefined;
  /** The patch, of a patch request. */
  patch?: Patch;
}

/**
 * A KubeApi whose patch and get answer at once, except those `hold` names: they wait until their
 * signal aborts (then reject with its reason) or until {@link release}.
 */
export class FakeHandlerKube implements KubeApi {
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

  #answer<T>(what: string, signal: AbortSignal | undefined, value: T, patch?: Patch): Promise<T> {
    this.calls.push(patch === undefined ? { what, signal } : { what, signal, patch });
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
    patch: Patch,
    opts?: ObjectOptions & { subresource?: "status" },
  ): Promise<T> {
    const what = `patch ${res.plural}${opts?.subresource ? "/status" : ""} ${name}`;
    const object = this.objects.get(`${res.plural}/${name}`) ??
      { metadata: { name, uid: `uid-${name}`, resourceVersion: "2" } };
    return this.#answer(what, opts?.signal, structuredClone(object) as T, patch);
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
export class FakeHandlerCsi implements CsiClient {
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

/** PV `pv1` of the driver, volume `vol1`; with a publish secret `ns/s1` when `secret`. */
export function pv(secret: boolean): PersistentVolume {
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

/** VA `va1` (uid `uid-va1`) of `pv1` on `node1`; attached, finalized and deleted when `deleting`. */
export function va(deleting: boolean): VolumeAttachment {
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

/** A CSI handler on the fakes; the Events it records as `<type> <reason>`. */
export function setUp(
  opts: {
    secret?: boolean;
    fence?: LeaseFence;
    log?: Logger;
    /** The VA cache; empty if unset. */
    volumeAttachments?: VolumeAttachment[];
  } = {},
) {
  const kube = new FakeHandlerKube();
  kube.objects.set("persistentvolumes/pv1", pv(opts.secret ?? false));
  const csi = new FakeHandlerCsi();
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
      volumeAttachments: new FakeInformer<VolumeAttachment>(opts.volumeAttachments ?? []),
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
export function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** The "Sync stopped" lines of `log`, with their reason. */
export function stopLines(log: FakeLogger): string[] {
  return log.lines.filter((l) => l.msg.startsWith("Sync stopped")).map((l) =>
    `${l.msg} (${l.fields.reason})`
  );
}

/** The line of a VA sync that stopped. */
export const STOP_LINE =
  "Sync stopped before its next write or driver call; the VolumeAttachment is left for the next leader";

/** A fence the test closes by hand; counts the questions. */
export function testFence(): LeaseFence & { open: boolean; asked: number } {
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
