/**
 * Runs handler scenarios the way the Go attacher's `framework_test.go` does: objects in a fake
 * API server, hand-driven informers, one injected event, then the controller's queues are drained
 * (the fake clock is moved to each retry instead of sleeping) until the expected API requests
 * have been made. The requests the server received and the calls the fake CSI driver received
 * are then compared with the expected ones, as data.
 *
 * Besides the expected lists, every scenario checks the safety invariants:
 * - no ControllerPublishVolume unless a VA in the API server for that volume and node carries our
 *   finalizer;
 * - no VA finalizer removal unless a ControllerUnpublishVolume succeeded after the last publish;
 * - no PV finalizer removal while a VA in the API server names the PV.
 *
 * @module
 */

import assert from "node:assert/strict";
import { FakeClock } from "../fakes/fake_clock.ts";
import type { AttachController } from "../../lib/controller/controller.ts";
import { buildController, type BuiltController } from "../../lib/controller/build.ts";
import type {
  CallOptions,
  ControllerPublishVolumeRequest,
  ControllerUnpublishVolumeRequest,
  CsiClient,
} from "../../lib/csi/api.ts";
import { CsiError } from "../../lib/csi/api.ts";
import { GrpcCsiClient } from "../../lib/csi/client.ts";
import type { CsiHandlerOptions } from "../../lib/controller/csi_handler.ts";
import type { ExampleDriver } from "../csi/example_driver.ts";
import type { Handler, HandlerStores } from "../../lib/controller/handler.ts";
import type { AttachmentMemory } from "../../lib/controller/attachment_memory.ts";
import type { ListVolumesReconcilerOptions } from "../../lib/controller/reconciler.ts";
import { errorText } from "../../lib/errors.ts";
import type { KubeApi, ObjectOptions, Patch } from "../../lib/kube/api.ts";
import {
  CSI_NODES,
  PERSISTENT_VOLUMES,
  Resource,
  SECRETS,
  VOLUME_ATTACHMENTS,
} from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { loadConnection } from "../../lib/kube/config.ts";
import { createLogger } from "../../lib/observe/log.ts";
import type { Logger } from "../../lib/observe/logger.ts";
import type { ApiServerEvent, FaultSpec, ResourceRef } from "../apiserver/server.ts";
import { MemoryApiServer } from "../apiserver/server.ts";
import {
  isMigratablePersistentVolume,
  translateInTreePersistentVolume,
} from "../../lib/controller/migration.ts";
import { finalizerName, NODE_ID_ANNOTATION } from "../../lib/controller/names.ts";
import type {
  CsiNode,
  KubeObject,
  PersistentVolume,
  VolumeAttachment,
} from "../../lib/kube/types.ts";
import type { LanedWorkQueue } from "../../lib/workqueue/lanes.ts";
import type { ScriptedCall } from "../csi/fake_driver.ts";
import { FakeCsiDriver } from "../csi/fake_driver.ts";
import type { Action } from "./fixtures.ts";
import { DRIVER } from "./fixtures.ts";
import { type FakeInformer, FakeInformers } from "../fakes/fake_informer.ts";
import type { LeaseFence } from "../../lib/lease_fence.ts";
import { ALWAYS_OPEN_FENCE } from "../fakes/open_fence.ts";

/** Controller capabilities the fake driver reports unless a scenario sets its own. */
export const DEFAULT_DRIVER_CAPABILITIES: readonly string[] = [
  "PUBLISH_UNPUBLISH_VOLUME",
  "PUBLISH_READONLY",
];

/** What a scenario's {@link Scenario.between} hook can look at and change. */
export interface StepContext {
  /** Number of loop steps taken so far. */
  step: number;
  /** The clock of the handler, the reconciler and the queues (real-time CSI deadlines aside). */
  clock: FakeClock;
  /** API requests recorded so far (watches excluded), as compared. */
  actions(): Action[];
  server: MemoryApiServer;
  vaInformer: FakeInformer<VolumeAttachment>;
  pvInformer: FakeInformer<PersistentVolume>;
  csiNodeInformer: FakeInformer<CsiNode>;
  /**
   * Brings the VA cache up to date with the server, as a watch would: an add, update or delete
   * event for every VA the server changed since the seeding or the last call. Without it the
   * cache keeps what the test put there (as in the Go harness).
   */
  deliverWatchEvents(): void;
  /** Syncs one VA key from the queue, as a worker does; false when none is ready. */
  stepVolumeAttachment(): Promise<boolean>;
  /**
   * Runs one reconcile pass now (also in the middle of a sync, from {@link Scenario.duringCsiCall});
   * a failure is kept as {@link ScenarioResult.reconcileError}. The harness's own pass still runs
   * once the queues are empty.
   */
  reconcile(): Promise<void>;
}

/** A CSI call seen by {@link Scenario.duringCsiCall}. */
export interface CsiCallPoint {
  method: "ControllerPublishVolume" | "ControllerUnpublishVolume" | "ListVolumes";
  /** `before`: the request is about to be sent; `after`: the driver answered, the caller has not seen it. */
  phase: "before" | "after";
  /** The options the handler or reconciler gave the call (its timeout). */
  options: CallOptions;
}

/**
 * What a {@link Scenario.handlerFactory} gets: the checked clients, the caches, the
 * per-VolumeAttachment memory the controller shares, and the default options.
 */
export interface HandlerFactoryDeps {
  kube: KubeApi;
  csi: CsiClient;
  log: Logger;
  clock: FakeClock;
  stores: HandlerStores;
  memory: AttachmentMemory;
  options: CsiHandlerOptions;
  /** The one replica's fence: a scenario runs without leader election. */
  fence: LeaseFence;
}

/** One scenario. */
export interface Scenario {
  name: string;
  /** PVs, CSINodes, Nodes, Secrets and VAs present before the event (in the server and the caches). */
  initialObjects?: KubeObject[];
  addedVA?: VolumeAttachment;
  /** Several VAs added at once, in this order (flood tests). */
  addedVAs?: VolumeAttachment[];
  updatedVA?: VolumeAttachment;
  /** Fires the delete event only: the VA is not put into the server (as in the Go harness). */
  deletedVA?: VolumeAttachment;
  updatedPV?: PersistentVolume;
  /** Requests the API server answers with an error (the Go tests' reactors). */
  faults?: FaultSpec[];
  expectedActions: Action[];
  /** Calls the fake CSI driver expects, in order. */
  expectedCsiCalls?: ScriptedCall[];
  /** `trivial` runs the trivial handler instead of the CSI handler. */
  handler?: "csi" | "trivial";
  /** Overrides of the CSI handler's options. */
  handlerOptions?: Partial<CsiHandlerOptions>;
  /** Overrides of the ListVolumes reconciler's options (with {@link reconcile}). */
  reconcilerOptions?: Partial<ListVolumesReconcilerOptions>;
  /**
   * Run one reconciliation pass (ListVolumes) when the queues are first empty. As at startup,
   * the driver's capabilities must then include LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES.
   */
  reconcile?: boolean;
  /** Driver name (GetPluginInfo, controller, handler, finalizer). Default `csi/test`. */
  driverName?: string;
  /** Controller capabilities of the fake driver. Default {@link DEFAULT_DRIVER_CAPABILITIES}. */
  driverCapabilities?: readonly string[];
  /** Answers publish, unpublish and ListVolumes calls that are not scripted. */
  permissiveDriver?: ExampleDriver;
  /** Called before every step of the run loop, e.g. to create objects between retries. */
  between?: (ctx: StepContext) => void | Promise<void>;
  /**
   * Called before and after each publish, unpublish and ListVolumes call the handler makes, e.g.
   * to run a reconcile pass while an attach is in flight, or a sync while ListVolumes runs.
   */
  duringCsiCall?: (call: CsiCallPoint, ctx: StepContext) => void | Promise<void>;
  /** Builds the handler instead of the default one (used to prove the invariant checks fire). */
  handlerFactory?: (deps: HandlerFactoryDeps) => Handler;
  /** Invariant violations the run must report; default none. */
  expectedViolations?: string[];
  /**
   * Workers per queue. 1 (default) steps the queues one item at a time; more runs the controller
   * as in production (`AttachController.run`), and the requests are then compared per object.
   * Not with `reconcile` or `between`.
   */
  workers?: number;
  /** Extra checks after the run. */
  check?: (result: ScenarioResult) => void | Promise<void>;
}

/** One entry of a run's timeline: an object change in the server, or a finished CSI call. */
export type TimelineEntry =
  | {
    kind: "api";
    type: ApiServerEvent["type"];
    /** `volumeattachments` or `persistentvolumes`. */
    resource: string;
    name: string;
    finalizers: string[];
    /** VAs only. */
    attached?: boolean;
  }
  | {
    kind: "csi";
    method: "ControllerPublishVolume" | "ControllerUnpublishVolume";
    volumeId: string;
    nodeId: string;
    options: CallOptions;
    /** gRPC code of a failed call; undefined on success. */
    code?: number;
    /** Message of a failed call. */
    error?: string;
    /** Finalizers of the VAs for this volume and node when the call started. */
    vaFinalizers: string[][];
  };

/** What a finished scenario made. */
export interface ScenarioResult {
  server: MemoryApiServer;
  actions: Action[];
  csi: FakeCsiDriver;
  violations: string[];
  /** VA and PV changes and publish/unpublish calls, in the order they happened. */
  timeline: TimelineEntry[];
  /** What the reconcile pass threw, if it failed. */
  reconcileError: unknown;
}

/** CSI call timeout of the scenarios; scripted timeouts delay longer than this. */
export const SCENARIO_TIMEOUT_MS = 1000;

function resourceOf(obj: KubeObject): ResourceRef {
  switch (obj.kind) {
    case "PersistentVolume":
      return PERSISTENT_VOLUMES;
    case "VolumeAttachment":
      return VOLUME_ATTACHMENTS;
    case "CSINode":
      return CSI_NODES;
    case "Secret":
      return SECRETS;
    case "Node":
      return "nodes";
    default:
      throw new TypeError(`Cannot seed object of kind ${obj.kind}`);
  }
}

/** A recorded request as compared: error `time` fields are nulled. */
function toAction(req: {
  verb: string;
  resource: string;
  name: string;
  namespace: string;
  subresource: string;
  contentType: string;
  body: unknown;
}): Action {
  const action: Action = {
    verb: req.verb as Action["verb"],
    resource: req.resource,
    name: req.name,
  };
  if (req.namespace) action.namespace = req.namespace;
  if (req.subresource === "status") action.subresource = "status";
  if (req.verb === "patch") {
    action.patchType = req.contentType === "application/json-patch+json" ? "json" : "merge";
    const body = structuredClone(req.body) as Record<string, unknown>;
    const status = (body as { status?: Record<string, { time?: unknown } | null> }).status;
    for (const key of ["attachError", "detachError"]) {
      const err = status?.[key];
      if (err && typeof err === "object" && "time" in err) err.time = null;
    }
    action.body = body;
  }
  return action;
}

/** The volume handle the driver sees for a VA, from the objects in the server. */
function volumeHandleOf(server: MemoryApiServer, va: VolumeAttachment): string | undefined {
  const source = va.spec.source ?? {};
  if (source.inlineVolumeSpec) return source.inlineVolumeSpec.csi?.volumeHandle;
  if (!source.persistentVolumeName) return undefined;
  const pv = server.find<PersistentVolume>(PERSISTENT_VOLUMES, source.persistentVolumeName);
  if (!pv) return undefined;
  const spec = isMigratablePersistentVolume(pv)
    ? translateInTreePersistentVolume(pv).spec
    : pv.spec;
  return spec.csi?.volumeHandle;
}

/** The VAs in the server of `driver` that a publish/unpublish of (volume, node) belongs to. */
function attachmentsFor(
  server: MemoryApiServer,
  driver: string,
  volumeId: string,
  nodeId: string,
): VolumeAttachment[] {
  // Node names whose CSINode gives this node ID; other nodes match only by the VA annotation.
  const nodeIds = new Map<string, string | undefined>();
  for (const csiNode of server.list<CsiNode>(CSI_NODES).items) {
    const entry = (csiNode.spec.drivers ?? []).find((d) => d.name === driver);
    nodeIds.set(csiNode.metadata.name, entry?.nodeID);
  }
  return server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items.filter((va) => {
    if (va.spec.attacher !== driver) return false;
    const id = nodeIds.get(va.spec.nodeName) ?? va.metadata.annotations?.[NODE_ID_ANNOTATION];
    return id === nodeId && volumeHandleOf(server, va) === volumeId;
  });
}

/** State shared by the checking wrappers of one run. */
interface Checks {
  server: MemoryApiServer;
  driver: string;
  finalizer: string;
  /** Per VA name: whether the last publish/unpublish seen was a publish (true) or a successful unpublish (false). */
  published: Map<string, boolean>;
  violations: string[];
  timeline: TimelineEntry[];
  /** The scenario's {@link Scenario.duringCsiCall}, bound to the run. */
  onCall?: (call: CsiCallPoint) => Promise<void>;
}

/** Wraps the API client to check the finalizer invariants on every write. */
class CheckingKubeApi implements KubeApi {
  #inner: KubeApi;
  #checks: Checks;

  constructor(inner: KubeApi, checks: Checks) {
    this.#inner = inner;
    this.#checks = checks;
  }

  list<T extends KubeObject>(res: Resource, opts?: ObjectOptions) {
    return this.#inner.list<T>(res, opts);
  }
  watch<T extends KubeObject>(res: Resource, opts: Parameters<KubeApi["watch"]>[1]) {
    return this.#inner.watch<T>(res, opts);
  }
  get<T extends KubeObject>(res: Resource, name: string, opts?: ObjectOptions) {
    return this.#inner.get<T>(res, name, opts);
  }
  create<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions) {
    return this.#inner.create<T>(res, obj, opts);
  }
  update<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions) {
    return this.#inner.update<T>(res, obj, opts);
  }
  delete(res: Resource, name: string, opts?: ObjectOptions) {
    return this.#inner.delete(res, name, opts);
  }

  async patch<T extends KubeObject>(
    res: Resource,
    name: string,
    patch: Patch,
    opts?: ObjectOptions & { subresource?: "status" },
  ): Promise<T> {
    const { server, finalizer, published, violations } = this.#checks;
    const before = server.find(res, name);
    try {
      return await this.#inner.patch<T>(res, name, patch, opts);
    } finally {
      // Checked whether the call succeeded or not: what counts is what the server stored.
      const after = server.find(res, name);
      const had = (before?.metadata.finalizers ?? []).includes(finalizer);
      const has = (after?.metadata.finalizers ?? []).includes(finalizer);
      if (had && !has && res === VOLUME_ATTACHMENTS && published.get(name) !== false) {
        violations.push(`VA ${name} finalizer removed without a successful unpublish`);
      }
      if (had && !has && res === PERSISTENT_VOLUMES) {
        const users = server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items
          .filter((va) => va.spec.source?.persistentVolumeName === name);
        if (users.length > 0) {
          violations.push(
            `PV ${name} finalizer removed while VA ${users[0]!.metadata.name} names it`,
          );
        }
      }
    }
  }
}

/** Wraps the CSI client to check that publishes happen only behind a stored finalizer. */
class CheckingCsiClient implements CsiClient {
  #inner: CsiClient;
  #checks: Checks;

  constructor(inner: CsiClient, checks: Checks) {
    this.#inner = inner;
    this.#checks = checks;
  }

  probe(o: CallOptions) {
    return this.#inner.probe(o);
  }
  getPluginInfo(o: CallOptions) {
    return this.#inner.getPluginInfo(o);
  }
  getPluginCapabilities(o: CallOptions) {
    return this.#inner.getPluginCapabilities(o);
  }
  controllerGetCapabilities(o: CallOptions) {
    return this.#inner.controllerGetCapabilities(o);
  }
  async listVolumes(req: { maxEntries: number; startingToken: string }, o: CallOptions) {
    const onCall = this.#checks.onCall;
    await onCall?.({ method: "ListVolumes", phase: "before", options: o });
    try {
      return await this.#inner.listVolumes(req, o);
    } finally {
      await onCall?.({ method: "ListVolumes", phase: "after", options: o });
    }
  }
  close() {
    this.#inner.close();
  }

  async controllerPublishVolume(req: ControllerPublishVolumeRequest, o: CallOptions) {
    const { server, driver, finalizer, published, violations } = this.#checks;
    const vas = attachmentsFor(server, driver, req.volumeId, req.nodeId);
    if (!vas.some((va) => (va.metadata.finalizers ?? []).includes(finalizer))) {
      violations.push(
        `ControllerPublishVolume(${req.volumeId}) before the VA finalizer was stored`,
      );
    }
    // A publish that fails may still have happened ("maybe attached"): count it as published.
    for (const va of vas) published.set(va.metadata.name, true);
    return await this.#record(
      "ControllerPublishVolume",
      req,
      o,
      vas,
      () => this.#inner.controllerPublishVolume(req, o),
    );
  }

  async controllerUnpublishVolume(req: ControllerUnpublishVolumeRequest, o: CallOptions) {
    const { server, driver, published } = this.#checks;
    const vas = attachmentsFor(server, driver, req.volumeId, req.nodeId);
    await this.#record(
      "ControllerUnpublishVolume",
      req,
      o,
      vas,
      () => this.#inner.controllerUnpublishVolume(req, o),
    );
    for (const va of vas) published.set(va.metadata.name, false);
  }

  async #record<R>(
    method: "ControllerPublishVolume" | "ControllerUnpublishVolume",
    req: { volumeId: string; nodeId: string },
    options: CallOptions,
    vas: VolumeAttachment[],
    call: () => Promise<R>,
  ): Promise<R> {
    const entry: TimelineEntry = {
      kind: "csi",
      method,
      volumeId: req.volumeId,
      nodeId: req.nodeId,
      options: { ...options },
      vaFinalizers: vas.map((va) => [...(va.metadata.finalizers ?? [])]),
    };
    const onCall = this.#checks.onCall;
    await onCall?.({ method, phase: "before", options });
    try {
      const result = await call();
      this.#checks.timeline.push(entry);
      return result;
    } catch (err) {
      entry.error = errorText(err);
      if (err instanceof CsiError) entry.code = err.code;
      this.#checks.timeline.push(entry);
      throw err;
    } finally {
      await onCall?.({ method, phase: "after", options });
    }
  }
}

/** Runs one scenario and asserts its expectations and the invariants. */
export async function runScenario(scenario: Scenario): Promise<ScenarioResult> {
  const driver = scenario.driverName ?? DRIVER;
  const capabilities = scenario.driverCapabilities ?? DEFAULT_DRIVER_CAPABILITIES;
  const dir = await Deno.makeTempDir({ prefix: "attacher-scenario-" });
  const server = await MemoryApiServer.start();
  const csiOptions: ConstructorParameters<typeof FakeCsiDriver>[0] = {
    address: `${dir}/csi.sock`,
    pluginName: driver,
    controllerCapabilities: capabilities,
    script: scenario.expectedCsiCalls ?? [],
  };
  if (scenario.permissiveDriver) csiOptions.permissive = scenario.permissiveDriver;
  const csi = await FakeCsiDriver.start(csiOptions);
  const log = createLogger({ verbosity: 0, format: "text", write: () => {} });
  const clock = new FakeClock();
  const grpcClient = new GrpcCsiClient({ log }, { address: csi.address });
  let built: BuiltController | undefined;
  const checks: Checks = {
    server,
    driver,
    finalizer: finalizerName(driver),
    published: new Map(),
    violations: [],
    timeline: [],
  };
  const unsubscribe = server.onEvent((ev) => {
    if (ev.resource !== "volumeattachments" && ev.resource !== "persistentvolumes") return;
    const entry: TimelineEntry = {
      kind: "api",
      type: ev.type,
      resource: ev.resource,
      name: ev.name,
      finalizers: [...(ev.object.metadata.finalizers ?? [])],
    };
    if (ev.resource === "volumeattachments") {
      entry.attached = (ev.object as VolumeAttachment).status?.attached ?? false;
    }
    checks.timeline.push(entry);
  });
  try {
    const seeds = [...(scenario.initialObjects ?? [])];
    const seeded = (kind: string, name: string) =>
      seeds.some((o) => o.kind === kind && o.metadata.name === name);
    // As in the Go harness: the added and updated VAs and the updated PV are initial objects too;
    // the deleted VA is not.
    for (const va of [scenario.addedVA, ...(scenario.addedVAs ?? []), scenario.updatedVA]) {
      if (va && !seeded("VolumeAttachment", va.metadata.name)) seeds.push(va);
    }
    if (scenario.updatedPV && !seeded("PersistentVolume", scenario.updatedPV.metadata.name)) {
      seeds.push(scenario.updatedPV);
    }
    for (const obj of seeds) server.create(resourceOf(obj), structuredClone(obj));
    checks.timeline.length = 0; // the seeding is not part of the run
    const connection = await loadConnection({
      kubeconfigPath: await writeKubeconfig(dir, server),
    });
    const kube = new CheckingKubeApi(new KubeClient({ connection, log }, {}), checks);
    const csiClient = new CheckingCsiClient(grpcClient, checks);

    // The caches the test fills and fires by hand, through the shipped informers' transforms.
    const caches = new FakeInformers(seeds);
    const options: CsiHandlerOptions = {
      driverName: driver,
      timeoutMs: SCENARIO_TIMEOUT_MS,
      supportsPublishReadOnly: true,
      supportsSingleNodeMultiWriter: false,
      defaultFsType: "ext4",
      // The Go scenarios' fake returned plain errors, which carry no code; with a real gRPC
      // driver every error has one, so codes are off unless a scenario asks for them.
      attachErrorCodes: false,
      ...scenario.handlerOptions,
    };
    const workers = scenario.workers ?? 1;
    const { handlerFactory } = scenario;
    built = buildController(
      {
        kube,
        informers: caches.source,
        log,
        clock,
        // A scenario runs one attacher, without leader election.
        fence: ALWAYS_OPEN_FENCE,
        ownHandler: handlerFactory === undefined
          ? undefined
          : ({ stores, memory }) =>
            handlerFactory({
              kube,
              csi: csiClient,
              log,
              clock,
              stores,
              memory,
              options,
              fence: ALWAYS_OPEN_FENCE,
            }),
      },
      {
        resyncMs: 0,
        retry: { baseMs: 5, maxMs: 1_000_000 },
        workers,
        attachWorkers: workers,
        detachWorkers: workers,
        reconcileSyncMs: 60_000,
        handler: {
          defaultFsType: options.defaultFsType,
          attachErrorCodes: options.attachErrorCodes,
        },
        reconciler: {
          timeoutMs: SCENARIO_TIMEOUT_MS,
          maxEntries: 0,
          ...scenario.reconcilerOptions,
        },
        callTimeoutMs: options.timeoutMs,
      },
      scenario.handler === "trivial" ? { kind: "trivial", driverName: driver } : {
        kind: "csi",
        driverName: driver,
        csi: csiClient,
        capabilities: {
          publishReadonly: options.supportsPublishReadOnly,
          singleNodeMultiWriter: options.supportsSingleNodeMultiWriter,
          // As at startup: the reconciler runs for a driver that lists published volumes.
          reconcile: capabilities.includes("LIST_VOLUMES") &&
            capabilities.includes("LIST_VOLUMES_PUBLISHED_NODES"),
        },
      },
    );
    const { controller, vaQueue, pvQueue } = built;
    const vaInformer = caches.volumeAttachments;
    const pvInformer = caches.persistentVolumes;
    const csiNodeInformer = caches.csiNodes;
    const reconcile = (): Promise<void> => {
      if (built?.reconciler === undefined) {
        throw new TypeError(
          "a reconciling scenario needs LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES",
        );
      }
      return built.reconciler.reconcile(new AbortController().signal);
    };
    const processVolumeAttachment = () => controller.stepVolumeAttachment();
    const processPersistentVolume = () => controller.stepPersistentVolume();

    const requestCount = () => server.requests.filter((r) => !r.watch).length;
    const actions = () => server.requests.filter((r) => !r.watch).map(toAction);
    // What the VA cache has seen of the server, for deliverWatchEvents: the seeded versions.
    const delivered = new Map<string, string | undefined>();
    for (const obj of server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items) {
      delivered.set(obj.metadata.name, obj.metadata.resourceVersion);
    }
    const deliverWatchEvents = () => {
      const current = server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items;
      for (const obj of current) {
        const name = obj.metadata.name;
        if (delivered.get(name) === obj.metadata.resourceVersion) continue;
        delivered.set(name, obj.metadata.resourceVersion);
        const cached = vaInformer.get(name);
        if (cached) vaInformer.emitUpdate(cached, obj);
        else vaInformer.emitAdd(obj);
      }
      for (const name of [...delivered.keys()]) {
        if (current.some((obj) => obj.metadata.name === name)) continue;
        delivered.delete(name);
        const cached = vaInformer.get(name);
        if (cached) vaInformer.emitDelete(cached);
      }
    };
    let reconcileError: unknown = undefined;
    let step = 0;
    const stepContext = (): StepContext => ({
      step,
      clock,
      actions,
      server,
      vaInformer,
      pvInformer,
      csiNodeInformer,
      deliverWatchEvents,
      stepVolumeAttachment: processVolumeAttachment,
      reconcile: async () => {
        try {
          await reconcile();
        } catch (err) {
          reconcileError = err;
        }
      },
    });
    const duringCsiCall = scenario.duringCsiCall;
    if (duringCsiCall) checks.onCall = async (call) => await duringCsiCall(call, stepContext());

    for (const fault of scenario.faults ?? []) server.failNext(fault);
    server.clearRequests();

    if (scenario.addedVA) vaInformer.emitAdd(structuredClone(scenario.addedVA));
    for (const va of scenario.addedVAs ?? []) vaInformer.emitAdd(structuredClone(va));
    if (scenario.updatedVA) {
      vaInformer.emitUpdate(
        structuredClone(scenario.updatedVA),
        structuredClone(scenario.updatedVA),
      );
    }
    if (scenario.deletedVA) {
      const name = scenario.deletedVA.metadata.name;
      const cached = vaInformer.get(name);
      vaInformer.emitDelete(structuredClone(scenario.deletedVA));
      // Go's harness only calls the delete handler: a VA among the initial objects stays cached.
      if (cached) vaInformer.set(cached);
    }
    if (scenario.updatedPV) {
      pvInformer.emitUpdate(
        structuredClone(scenario.updatedPV),
        structuredClone(scenario.updatedPV),
      );
    }

    const isPublishOrUnpublish = (method: string) =>
      method === "ControllerPublishVolume" || method === "ControllerUnpublishVolume";
    const expectedCsi = scenario.expectedCsiCalls?.filter((c) => isPublishOrUnpublish(c.method))
      .length ?? 0;
    const csiDone = () =>
      csi.calls.filter((c) => isPublishOrUnpublish(c.method)).length >= expectedCsi;
    let reconciled = !scenario.reconcile;
    if (workers > 1) {
      if (scenario.reconcile) throw new TypeError("reconcile runs only with one worker");
      await runWorkers(controller, {
        vaQueue,
        pvQueue,
        clock,
        done: () => requestCount() >= scenario.expectedActions.length && csiDone(),
      });
    }
    for (step = 0; workers === 1 && step < 10_000; step++) {
      await scenario.between?.(stepContext());
      if (requestCount() >= scenario.expectedActions.length && csiDone() && reconciled) break;
      if (await processVolumeAttachment()) continue;
      if (await processPersistentVolume()) continue;
      if (!reconciled) {
        reconciled = true;
        // main.ts enables the reconciler only for drivers that can list published volumes.
        const caps = await csiClient.controllerGetCapabilities({ timeoutMs: SCENARIO_TIMEOUT_MS });
        assert.ok(
          caps.has("LIST_VOLUMES") && caps.has("LIST_VOLUMES_PUBLISHED_NODES"),
          "a reconciling scenario needs LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES",
        );
        try {
          await reconcile();
        } catch (err) {
          // The controller's reconcile loop only logs a failed pass.
          reconcileError = err;
        }
        continue;
      }
      if (!clock.advanceToNextTimer()) break;
    }
    // Work that is ready now still runs; retries waiting on the clock do not.
    await controller.drainReady();

    const result: ScenarioResult = {
      server,
      actions: actions(),
      csi,
      violations: checks.violations,
      timeline: checks.timeline,
      reconcileError,
    };
    if (workers > 1) {
      // Objects are synced in parallel: only the order per object is fixed.
      assert.deepEqual(
        byObject(result.actions),
        byObject(scenario.expectedActions),
        "API requests differ",
      );
    } else {
      assert.deepEqual(result.actions, scenario.expectedActions, "API requests differ");
    }
    csi.assertDone();
    assert.deepEqual(
      checks.violations,
      scenario.expectedViolations ?? [],
      "safety invariants violated",
    );
    await scenario.check?.(result);
    return result;
  } finally {
    unsubscribe();
    built?.vaQueue.shutDown();
    built?.pvQueue.shutDown();
    grpcClient.close();
    await csi.close();
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Runs the controller's workers until `done`, moving the fake clock whenever both queues are empty. */
async function runWorkers(
  controller: AttachController,
  opts: {
    vaQueue: LanedWorkQueue;
    pvQueue: LanedWorkQueue;
    clock: FakeClock;
    done: () => boolean;
  },
): Promise<void> {
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  try {
    for (let tick = 0; tick < 20_000 && !opts.done(); tick++) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      if (opts.vaQueue.len() === 0 && opts.pvQueue.len() === 0) opts.clock.advanceToNextTimer();
    }
  } finally {
    stop.abort();
    await running;
  }
}

/** Actions grouped by object, each group in order. */
function byObject(actions: Action[]): Record<string, Action[]> {
  const groups: Record<string, Action[]> = {};
  for (const action of actions) {
    const key = `${action.resource}/${action.namespace ?? ""}/${action.name}`;
    (groups[key] ??= []).push(action);
  }
  return groups;
}

async function writeKubeconfig(dir: string, server: MemoryApiServer): Promise<string> {
  const path = `${dir}/kubeconfig`;
  await Deno.writeTextFile(path, server.kubeconfig());
  return path;
}
