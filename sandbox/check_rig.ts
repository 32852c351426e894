/**
 * What `csi-attacher sandbox check` runs its checks on: an in-memory API server, the
 * attacher's CSI client (`lib/csi`) connected to the driver, and the attacher's own handler
 * (`lib/controller/csi_handler.ts`) and ListVolumes reconciler, given objects one check at a
 * time. A check creates the objects the Kubernetes controllers would (PersistentVolume,
 * CSINode, VolumeAttachment), lets the handler sync the VolumeAttachment once, and reads what
 * the handler wrote: `status.attached`, `status.attachError`, `status.detachError`, or the
 * VolumeAttachment's removal. Nothing runs in the background: no informer, no queue, no retry;
 * a check drives each sync itself, so the same driver gives the same output every time.
 *
 * Every log line of the attacher's code, at every verbosity, is kept (the secrets check reads
 * them); the CSI calls and API requests become timeline lines.
 *
 * @module
 */

import { type Clock, realClock } from "../lib/clock.ts";
import { connect, getCapabilities, getDriverName, probeForever } from "../lib/csi/connection.ts";
import type { DriverCapabilities } from "../lib/csi/connection.ts";
import type { GrpcCsiClient } from "../lib/csi/client.ts";
import { AttachmentMemory } from "../lib/controller/attachment_memory.ts";
import { CsiHandler } from "../lib/controller/csi_handler.ts";
import type { HandlerStores } from "../lib/controller/handler.ts";
import { finalizerName, NODE_ID_ANNOTATION } from "../lib/controller/names.ts";
import { ListVolumesReconciler } from "../lib/controller/reconciler.ts";
import {
  CSI_NODES,
  type KubeApi,
  PERSISTENT_VOLUMES,
  type Resource,
  SECRETS,
  VOLUME_ATTACHMENTS,
} from "../lib/kube/api.ts";
import { KubeClient } from "../lib/kube/client.ts";
import { SOLE_REPLICA } from "../lib/lease_fence.ts";
import { connectionFromKubeconfigs } from "../lib/kube/config.ts";
import type { ObjectStore } from "../lib/kube/store.ts";
import type {
  CsiNode,
  KubeObject,
  PersistentVolume,
  PersistentVolumeSpec,
  Secret,
  VolumeAttachment,
} from "../lib/kube/types.ts";
import { createLogger } from "../lib/observe/log.ts";
import type { Logger } from "../lib/observe/logger.ts";
import { VERSION } from "../lib/version.ts";
import { MemoryApiServer } from "../testkit/apiserver/server.ts";
import { createCsiCallTap, type CsiCallEvent } from "./csi_call_tap.ts";
import { recordingKubeApi } from "./recording_kube_api.ts";
import { Timeline, type TimelineSource } from "./timeline.ts";

/** Namespace of the Secret the secrets check creates. */
export const CHECK_NAMESPACE = "default";

/** A finished CSI call as the checks see it: method, request, outcome, duration. */
export interface CheckedCall {
  method: string;
  /** The request as the attacher logs it (secrets `***stripped***`). */
  request: Record<string, unknown>;
  outcome: Exclude<CsiCallEvent, { kind: "call" }>;
  /** Milliseconds from the call to its outcome. */
  ms: number;
}

/** How one sync of a VolumeAttachment ended, read back from the API server. */
export type SyncRead =
  | { ok: true; metadata: Record<string, string> }
  /** `message`: the text the handler wrote into `status.attachError`/`detachError`. */
  | { ok: false; message: string };

/** Options of {@link CheckRig.start}. */
export interface CheckRigOptions {
  /** The driver's endpoint, as `--csi-address`. */
  address: string;
  /** `--timeout`: each CSI call's timeout, in ms. */
  timeoutMs: number;
  /** Upper bound of the connection and of the wait for the driver's readiness, in ms. */
  waitTimeoutMs: number;
  /** Receives each timeline line as it is written. */
  onLine(line: string): void;
  clock?: Clock;
}

/** An object store that reads the API server's current state (no cache in between). */
function liveStore<T extends KubeObject>(server: MemoryApiServer, res: Resource): ObjectStore<T> {
  return {
    get: (name) => server.find<T>(res, name),
    list: () => server.list<T>(res).items,
  };
}

/** See the module documentation. */
export class CheckRig {
  readonly server: MemoryApiServer;
  /** Every log line of the attacher's code, any verbosity. */
  readonly logLines: string[];
  /** Every finished CSI call, oldest first. */
  readonly calls: CheckedCall[] = [];
  readonly #options: CheckRigOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #timeline: Timeline;
  readonly #client: KubeClient;
  readonly #kube: KubeApi;
  readonly #stores: HandlerStores;
  readonly #memory = new AttachmentMemory({ backoff: { forget() {} } });
  readonly #started: { method: string; request: Record<string, unknown>; at: number }[] = [];
  #csi: GrpcCsiClient | undefined;
  #driverName = "";
  #caps: DriverCapabilities | undefined;
  readonly #stop = new AbortController();

  private constructor(
    server: MemoryApiServer,
    client: KubeClient,
    everything: Logger,
    logLines: string[],
    options: CheckRigOptions,
  ) {
    this.server = server;
    this.logLines = logLines;
    this.#options = options;
    this.#clock = options.clock ?? realClock;
    this.#timeline = new Timeline({ write: options.onLine }, { showListVolumes: true });
    this.#log = createCsiCallTap(everything, (event) => this.#onCsiEvent(event));
    this.#client = client;
    this.#kube = recordingKubeApi(client, { onFinish: (record) => this.#timeline.api(record) });
    this.#stores = {
      volumeAttachments: liveStore(server, VOLUME_ATTACHMENTS),
      persistentVolumes: liveStore(server, PERSISTENT_VOLUMES),
      csiNodes: liveStore(server, CSI_NODES),
    };
  }

  /** Starts the API server and its client; the driver is connected by {@link connectDriver}. */
  static async start(options: CheckRigOptions): Promise<CheckRig> {
    const server = await MemoryApiServer.start();
    try {
      const logLines: string[] = [];
      const everything = createLogger({
        verbosity: 10,
        format: "text",
        write: (line) => logLines.push(line),
      });
      const connection = await connectionFromKubeconfigs([
        { file: "memory-apiserver", text: server.kubeconfig() },
      ]);
      const client = new KubeClient({ connection, log: everything }, {
        userAgent: `csi-attacher/${VERSION}`,
      });
      return new CheckRig(server, client, everything, logLines, options);
    } catch (err) {
      await server.close();
      throw err;
    }
  }

  #onCsiEvent(event: CsiCallEvent): void {
    this.#timeline.csi(event);
    if (event.kind === "call") {
      this.#started.push({ method: event.method, request: event.request, at: this.#clock.now() });
      return;
    }
    const index = this.#started.findIndex((s) => s.method === event.method);
    const started = index >= 0 ? this.#started.splice(index, 1)[0]! : undefined;
    this.calls.push({
      method: event.method,
      request: started?.request ?? {},
      outcome: event,
      ms: started === undefined ? 0 : this.#clock.now() - started.at,
    });
  }

  /** Writes a numbered timeline line of the check itself. */
  note(text: string, source: TimelineSource = "sandbox"): void {
    this.#timeline.line(source, text);
  }

  /** The driver name from GetPluginInfo ("" before). */
  get driverName(): string {
    return this.#driverName;
  }

  /** The capabilities, once read. */
  get capabilities(): DriverCapabilities | undefined {
    return this.#caps;
  }

  /** Connects as the attacher does at startup (`connect`, csi-lib-utils' 30 s wait). */
  async connectDriver(): Promise<void> {
    this.#csi = await connect(this.#options.address, {
      log: this.#log,
      clock: this.#clock,
      timeoutMs: this.#options.waitTimeoutMs,
    });
  }

  #driverClient(): GrpcCsiClient {
    if (this.#csi === undefined) throw new Error("not connected to the driver");
    return this.#csi;
  }

  /** Probes until ready as the attacher does, for at most the wait timeout. */
  async probe(): Promise<void> {
    const limit = AbortSignal.any([
      this.#stop.signal,
      AbortSignal.timeout(this.#options.waitTimeoutMs),
    ]);
    await probeForever(this.#driverClient(), {
      timeoutMs: this.#options.timeoutMs,
      clock: this.#clock,
      log: this.#log,
      signal: limit,
    });
  }

  /** GetPluginInfo as the attacher reads the driver name. */
  async readDriverName(): Promise<string> {
    this.#driverName = await getDriverName(this.#driverClient());
    return this.#driverName;
  }

  /** GetPluginCapabilities and ControllerGetCapabilities as the attacher reads them. */
  async readCapabilities(): Promise<DriverCapabilities> {
    this.#caps = await getCapabilities(this.#driverClient(), this.#clock);
    return this.#caps;
  }

  /** The attacher's CSI handler with these capabilities and the call timeout `timeoutMs`. */
  handler(timeoutMs = this.#options.timeoutMs): CsiHandler {
    const caps = this.#caps;
    return new CsiHandler({
      kube: this.#kube,
      csi: this.#driverClient(),
      log: this.#log,
      clock: this.#clock,
      stores: this.#stores,
      memory: this.#memory,
      // The check is the only replica: nothing elects it, nothing can take its place.
      fence: SOLE_REPLICA,
    }, {
      driverName: this.#driverName,
      timeoutMs,
      supportsPublishReadOnly: caps?.publishReadonly ?? false,
      supportsSingleNodeMultiWriter: caps?.singleNodeMultiWriter ?? false,
      defaultFsType: "",
      attachErrorCodes: false,
    });
  }

  /**
   * One pass of the attacher's ListVolumes reconciler with `maxEntries` (`--max-entries`).
   * @returns the VolumeAttachments it found out of sync (it would sync them again, forced)
   * @throws {Error} the reconciler's error when a ListVolumes call failed
   */
  async reconcile(maxEntries: number): Promise<string[]> {
    const queued: string[] = [];
    const reconciler = new ListVolumesReconciler({
      csi: this.#driverClient(),
      log: this.#log,
      clock: this.#clock,
      stores: this.#stores,
      memory: this.#memory,
      queue: { add: (name) => queued.push(name), isQueuedOrProcessing: () => false },
      fence: SOLE_REPLICA,
    }, { driverName: this.#driverName, timeoutMs: this.#options.timeoutMs, maxEntries });
    await reconciler.reconcile(this.#stop.signal);
    for (const name of queued) this.#memory.takeOutOfSync(name);
    return queued;
  }

  /** Creates a CSINode for `nodeName` listing the driver with `nodeId`, unless there is one. */
  ensureCsiNode(nodeName: string, nodeId: string): void {
    if (this.server.find(CSI_NODES, nodeName) !== undefined) return;
    this.server.create<CsiNode>(CSI_NODES, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: nodeName },
      spec: { drivers: [{ name: this.#driverName, nodeID: nodeId, topologyKeys: null }] },
    });
    this.note(`create csinodes/${nodeName} (node ID ${nodeId})`);
  }

  /** Creates a Secret with `values` (shown by key only). */
  createSecret(name: string, values: Record<string, string>): void {
    const data = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, btoa(v)]));
    this.server.create<Secret>(SECRETS, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name, namespace: CHECK_NAMESPACE },
      data,
    });
    this.note(
      `create secrets/${CHECK_NAMESPACE}/${name} (keys: ${Object.keys(values).sort().join(", ")})`,
    );
  }

  /** Creates a PersistentVolume of this driver; `describe` says how it differs from the usual. */
  createPv(
    name: string,
    volumeHandle: string,
    spec: Omit<PersistentVolumeSpec, "csi"> & { csi?: Partial<PersistentVolumeSpec["csi"]> },
    describe: string,
  ): void {
    const { csi, ...rest } = spec;
    this.server.create<PersistentVolume>(PERSISTENT_VOLUMES, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name },
      spec: {
        capacity: { storage: "1Gi" },
        persistentVolumeReclaimPolicy: "Retain",
        ...rest,
        csi: { ...csi, driver: this.#driverName, volumeHandle },
      },
    });
    this.note(`create persistentvolumes/${name} (volume handle ${volumeHandle}, ${describe})`);
  }

  /**
   * Creates a VolumeAttachment of `pvName` on `nodeName`. With `attachedBefore` it carries the
   * attacher's finalizer and node-ID annotation already, as after an attach that began (the
   * state a detach after a failed attach starts from).
   */
  createVa(name: string, pvName: string, nodeName: string, attachedBefore?: { nodeId: string }) {
    const metadata: VolumeAttachment["metadata"] = { name };
    if (attachedBefore !== undefined) {
      metadata.finalizers = [finalizerName(this.#driverName)];
      metadata.annotations = { [NODE_ID_ANNOTATION]: attachedBefore.nodeId };
    }
    this.server.create<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata,
      spec: {
        attacher: this.#driverName,
        nodeName,
        source: { persistentVolumeName: pvName },
      },
    });
    this.note(
      `create volumeattachments/${name} (${pvName} on node ${nodeName}${
        attachedBefore === undefined ? "" : ", with the attacher's finalizer"
      })`,
    );
  }

  /**
   * Lets `handler` sync the VolumeAttachment `name` once, as a worker does: attach when it is
   * not being deleted. With `force`, as after the reconciler found it out of sync (the publish
   * is made again although it is attached).
   */
  async attach(name: string, opts: { force?: boolean; handler?: CsiHandler } = {}) {
    const va = this.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, name);
    if (opts.force) this.#memory.markOutOfSync(name);
    const outcome = await (opts.handler ?? this.handler()).syncVolumeAttachment(
      va,
      this.#stop.signal,
    );
    const after = this.server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, name);
    if (outcome === "done" && after?.status?.attached === true) {
      return { ok: true, metadata: after.status.attachmentMetadata ?? {} } satisfies SyncRead;
    }
    const message = after?.status?.attachError?.message ??
      `the sync ended "${outcome}" with nothing recorded`;
    return { ok: false, message } satisfies SyncRead;
  }

  /**
   * Deletes the VolumeAttachment `name` (it keeps a deletionTimestamp while it has finalizers)
   * and lets the handler sync it once: a detach.
   */
  async detach(name: string): Promise<SyncRead> {
    this.server.delete(VOLUME_ATTACHMENTS, name);
    this.note(`delete volumeattachments/${name}`);
    const va = this.server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, name);
    if (va === undefined) return { ok: true, metadata: {} };
    const outcome = await this.handler().syncVolumeAttachment(va, this.#stop.signal);
    const after = this.server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, name);
    if (after === undefined) return { ok: true, metadata: {} };
    return {
      ok: false,
      message: after.status?.detachError?.message ??
        `the sync ended "${outcome}" and the VolumeAttachment is still there`,
    };
  }

  /** Stops everything the rig started. */
  async close(): Promise<void> {
    this.#stop.abort();
    this.#csi?.close();
    await this.#client.close();
    await this.server.close();
  }
}
