/**
 * Runs handler scenarios the way the Go attacher's `framework_test.go` does: objects in a fake
 * API server, hand-driven informers, one injected event, then the controller's queues are drained
 * (the fake clock is moved to each retry instead of sleeping) until the expected API requests
 * have been made. The requests the server received and the calls the fake CSI driver received
 * are then compared with the expected ones, as data.
 *
 * Besides the expected lists, every scenario checks the safety invariants:
 * - no ControllerPublishVolume unless the VA in the API server carries our finalizer;
 * - no VA finalizer removal unless a ControllerUnpublishVolume succeeded after the last publish;
 * - no PV finalizer removal while a VA in the API server names the PV.
 *
 * @module
 */

import assert from "node:assert/strict";
import { FakeClock } from "../lib/clock.ts";
import { AttachController } from "../lib/controller.ts";
import type {
  CallOptions,
  ControllerPublishVolumeRequest,
  ControllerUnpublishVolumeRequest,
  CsiClient,
} from "../lib/csi_api.ts";
import { GrpcCsiClient } from "../lib/csi_client.ts";
import { CsiHandler, type CsiHandlerOptions } from "../lib/csi_handler.ts";
import type { Handler } from "../lib/handler.ts";
import type { KubeApi, ObjectOptions, Patch } from "../lib/kube_api.ts";
import {
  CSI_NODES,
  PERSISTENT_VOLUMES,
  Resource,
  SECRETS,
  VOLUME_ATTACHMENTS,
} from "../lib/kube_api.ts";
import { KubeClient } from "../lib/kube_client.ts";
import { loadKubeConfig } from "../lib/kube_config.ts";
import { createLogger } from "../lib/log.ts";
import type { FaultSpec } from "../lib/memory_apiserver.ts";
import { MemoryApiServer } from "../lib/memory_apiserver.ts";
import { TrivialHandler } from "../lib/trivial_handler.ts";
import type { CsiNode, KubeObject, PersistentVolume, VolumeAttachment } from "../lib/types.ts";
import { ItemExponentialFailureRateLimiter } from "../lib/workqueue/rate_limiters.ts";
import { RateLimitingWorkQueue } from "../lib/workqueue/rate_limiting_queue.ts";
import type { ScriptedCall } from "./fake_csi_driver.ts";
import { FakeCsiDriver } from "./fake_csi_driver.ts";
import type { Action } from "./fixtures.ts";
import { DRIVER, FIN } from "./fixtures.ts";
import { StaticInformer } from "./static_informer.ts";

/** One scenario. */
export interface Scenario {
  name: string;
  /** PVs, CSINodes, Secrets and VAs present before the event (in the server and the caches). */
  initialObjects?: KubeObject[];
  addedVA?: VolumeAttachment;
  updatedVA?: VolumeAttachment;
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
  /** Run one reconciliation pass (ListVolumes) when the queues are first empty. */
  reconcile?: boolean;
  /** Extra checks after the run. */
  check?: (result: ScenarioResult) => void | Promise<void>;
}

/** What a finished scenario made. */
export interface ScenarioResult {
  server: MemoryApiServer;
  actions: Action[];
  csi: FakeCsiDriver;
  violations: string[];
}

/** CSI call timeout of the scenarios; scripted timeouts delay longer than this. */
export const SCENARIO_TIMEOUT_MS = 1000;

function resourceOf(obj: KubeObject): Resource {
  switch (obj.kind) {
    case "PersistentVolume":
      return PERSISTENT_VOLUMES;
    case "VolumeAttachment":
      return VOLUME_ATTACHMENTS;
    case "CSINode":
      return CSI_NODES;
    case "Secret":
      return SECRETS;
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

/** Wraps the API client to check the finalizer invariants on every write. */
class CheckingKubeApi implements KubeApi {
  #inner: KubeApi;
  #server: MemoryApiServer;
  #published: Map<string, boolean>;
  #violations: string[];

  constructor(
    inner: KubeApi,
    server: MemoryApiServer,
    published: Map<string, boolean>,
    violations: string[],
  ) {
    this.#inner = inner;
    this.#server = server;
    this.#published = published;
    this.#violations = violations;
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
    const before = this.#server.find(res, name);
    const result = await this.#inner.patch<T>(res, name, patch, opts);
    const after = this.#server.find(res, name);
    const had = (before?.metadata.finalizers ?? []).includes(FIN);
    const has = (after?.metadata.finalizers ?? []).includes(FIN);
    if (had && !has && res === VOLUME_ATTACHMENTS && this.#published.get(name) !== false) {
      this.#violations.push(`VA ${name} finalizer removed without a successful unpublish`);
    }
    if (had && !has && res === PERSISTENT_VOLUMES) {
      const users = this.#server.list<VolumeAttachment>(VOLUME_ATTACHMENTS).items
        .filter((va) => va.spec.source.persistentVolumeName === name);
      if (users.length > 0) {
        this.#violations.push(
          `PV ${name} finalizer removed while VA ${users[0]!.metadata.name} names it`,
        );
      }
    }
    return result;
  }
}

/** Wraps the CSI client to check that publishes happen only behind a stored finalizer. */
class CheckingCsiClient implements CsiClient {
  #inner: CsiClient;
  #server: MemoryApiServer;
  #published: Map<string, boolean>;
  #violations: string[];
  #vaName: string;

  constructor(
    inner: CsiClient,
    server: MemoryApiServer,
    published: Map<string, boolean>,
    violations: string[],
    vaName: string,
  ) {
    this.#inner = inner;
    this.#server = server;
    this.#published = published;
    this.#violations = violations;
    this.#vaName = vaName;
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
  listVolumes(req: { maxEntries: number; startingToken: string }, o: CallOptions) {
    return this.#inner.listVolumes(req, o);
  }
  close() {
    this.#inner.close();
  }

  async controllerPublishVolume(req: ControllerPublishVolumeRequest, o: CallOptions) {
    const va = this.#server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, this.#vaName);
    if (!(va?.metadata.finalizers ?? []).includes(FIN)) {
      this.#violations.push(
        `ControllerPublishVolume(${req.volumeId}) before the VA finalizer was stored`,
      );
    }
    // A publish that fails may still have happened ("maybe attached"): count it as published.
    this.#published.set(this.#vaName, true);
    return await this.#inner.controllerPublishVolume(req, o);
  }

  async controllerUnpublishVolume(req: ControllerUnpublishVolumeRequest, o: CallOptions) {
    await this.#inner.controllerUnpublishVolume(req, o);
    this.#published.set(this.#vaName, false);
  }
}

/** Runs one scenario and asserts its expectations and the invariants. */
export async function runScenario(scenario: Scenario): Promise<ScenarioResult> {
  const dir = await Deno.makeTempDir({ prefix: "attacher-scenario-" });
  const server = await MemoryApiServer.start();
  const csi = await FakeCsiDriver.start({
    address: `${dir}/csi.sock`,
    pluginName: DRIVER,
    controllerCapabilities: ["PUBLISH_UNPUBLISH_VOLUME", "PUBLISH_READONLY"],
    script: scenario.expectedCsiCalls ?? [],
  });
  const log = createLogger({ verbosity: 0, format: "text", write: () => {} });
  const clock = new FakeClock();
  const grpcClient = new GrpcCsiClient({ log }, { address: csi.address });
  const vaQueue = queue("csi-attacher-va", clock);
  const pvQueue = queue("csi-attacher-pv", clock);
  const violations: string[] = [];
  try {
    const vaEvent = scenario.addedVA ?? scenario.updatedVA ?? scenario.deletedVA;
    const seeds = [...(scenario.initialObjects ?? [])];
    if (vaEvent && !seeds.some((o) => o.kind === "VolumeAttachment")) seeds.push(vaEvent);
    for (const obj of seeds) server.create(resourceOf(obj), structuredClone(obj));
    const kubeConfig = loadKubeConfig({ kubeconfigPath: await writeKubeconfig(dir, server) });
    // Last CSI call per VA in this run: a VA finalizer may go only after a successful unpublish.
    const published = new Map<string, boolean>();
    const kube = new CheckingKubeApi(
      new KubeClient({ kubeConfig, log }, {}),
      server,
      published,
      violations,
    );
    const vaName = vaEvent?.metadata.name ?? "pv1-node1";
    const csiClient = new CheckingCsiClient(grpcClient, server, published, violations, vaName);

    const vaInformer = new StaticInformer<VolumeAttachment>(
      seeds.filter((o): o is VolumeAttachment => o.kind === "VolumeAttachment"),
    );
    const pvInformer = new StaticInformer<PersistentVolume>(
      seeds.filter((o): o is PersistentVolume => o.kind === "PersistentVolume"),
    );
    const csiNodes = new StaticInformer<CsiNode>(
      seeds.filter((o): o is CsiNode => o.kind === "CSINode"),
    );

    let handler: Handler;
    if (scenario.handler === "trivial") {
      handler = new TrivialHandler({ kube, log });
    } else {
      handler = new CsiHandler({ kube, csi: csiClient, log, clock }, {
        driverName: DRIVER,
        timeoutMs: SCENARIO_TIMEOUT_MS,
        supportsPublishReadOnly: true,
        supportsSingleNodeMultiWriter: false,
        defaultFsType: "ext4",
        attachErrorCodes: false,
        maxEntries: 0,
        ...scenario.handlerOptions,
      });
    }
    const controller = new AttachController({
      vaInformer,
      pvInformer,
      csiNodeStore: csiNodes,
      vaQueue,
      pvQueue,
      handler,
      log,
      clock,
    }, { driverName: DRIVER, workers: 1, reconcile: false, reconcileSyncMs: 60_000 });

    for (const fault of scenario.faults ?? []) server.failNext(fault);
    server.clearRequests();

    if (scenario.addedVA) vaInformer.emitAdd(structuredClone(scenario.addedVA));
    if (scenario.updatedVA) {
      vaInformer.emitUpdate(
        structuredClone(scenario.updatedVA),
        structuredClone(scenario.updatedVA),
      );
    }
    if (scenario.deletedVA) vaInformer.emitDelete(structuredClone(scenario.deletedVA));
    if (scenario.updatedPV) {
      pvInformer.emitUpdate(
        structuredClone(scenario.updatedPV),
        structuredClone(scenario.updatedPV),
      );
    }

    const expectedCsi = scenario.expectedCsiCalls?.filter((c) =>
      c.method === "ControllerPublishVolume" || c.method === "ControllerUnpublishVolume"
    ).length ?? 0;
    const csiDone = () =>
      csi.calls.filter((c) =>
        c.method === "ControllerPublishVolume" || c.method === "ControllerUnpublishVolume"
      ).length >= expectedCsi;
    const actions = () =>
      server.requests.filter((r) => !r.watch).map(toAction);
    let reconciled = !scenario.reconcile;
    for (let step = 0; step < 1000; step++) {
      if (actions().length >= scenario.expectedActions.length && csiDone() && reconciled) break;
      if (await controller.processNextVolumeAttachment()) continue;
      if (await controller.processNextPersistentVolume()) continue;
      if (!reconciled) {
        reconciled = true;
        await handler.reconcile(new AbortController().signal);
        continue;
      }
      if (!clock.advanceToNextTimer()) break;
    }
    // Work that is ready now still runs; retries waiting on the clock do not.
    while (
      (await controller.processNextVolumeAttachment()) ||
      (await controller.processNextPersistentVolume())
    ) {
      // drain
    }

    const result: ScenarioResult = { server, actions: actions(), csi, violations };
    assert.deepEqual(result.actions, scenario.expectedActions, "API requests differ");
    csi.assertDone();
    assert.deepEqual(violations, [], "safety invariants violated");
    await scenario.check?.(result);
    return result;
  } finally {
    vaQueue.shutDown();
    pvQueue.shutDown();
    grpcClient.close();
    await csi.close();
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function queue(name: string, clock: FakeClock): RateLimitingWorkQueue {
  return new RateLimitingWorkQueue({
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 5, maxMs: 1_000_000 }),
  }, { name });
}

async function writeKubeconfig(dir: string, server: MemoryApiServer): Promise<string> {
  const path = `${dir}/kubeconfig`;
  await Deno.writeTextFile(path, server.kubeconfig());
  return path;
}
