/**
 * Attach is never starved by detach (beyond the Go attacher,
 * https://github.com/kubernetes-csi/external-attacher/issues/761): with every detach worker stuck
 * in a ControllerUnpublishVolume and a backlog of detaches queued, a new VolumeAttachment is
 * still attached. The same world with one pool of workers (the Go attacher's design) shows the
 * attach waiting behind the detaches, so the first test cannot pass by accident.
 *
 * The driver's unpublishes wait on a gate the test opens; nothing sleeps, the controller runs on
 * a fake clock, and the test waits only for the event loop to settle.
 */

import assert from "node:assert/strict";
import { AttachController } from "../../lib/controller/controller.ts";
import { volumeAttachmentLanes } from "../../lib/controller/lanes.ts";
import { CsiHandler } from "../../lib/controller/csi_handler.ts";
import { OperationLatency } from "../../lib/controller/operation_latency.ts";
import { AttachmentMemory } from "../../lib/controller/attachment_memory.ts";
import type {
  CallOptions,
  ControllerPublishVolumeRequest,
  ControllerUnpublishVolumeRequest,
  CsiClient,
} from "../../lib/csi/api.ts";
import { PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { loadConnection } from "../../lib/kube/config.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { nullLogger } from "../../lib/observe/logger.ts";
import { ItemExponentialFailureRateLimiter } from "../../lib/workqueue/rate_limiters.ts";
import { LanedWorkQueue } from "../../lib/workqueue/lanes.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { SOLE_REPLICA } from "../../lib/lease_fence.ts";
import {
  ANN,
  csiNode,
  deleted,
  DRIVER,
  FIN,
  pv,
  TIME,
  va,
  with_,
} from "../../testkit/harness/fixtures.ts";

/** Detaches queued at once; more than the detach workers, so a backlog waits. */
const FLOOD = 20;
/** Workers per pool. */
const WORKERS = 2;

/**
 * A driver whose unpublishes wait until {@link open}, and whose publishes wait until
 * {@link openPublishes} when it was made with `gatePublishes`.
 */
class GatedDriver implements CsiClient {
  published: string[] = [];
  publishStarted: string[] = [];
  unpublishStarted: string[] = [];
  #gate: Promise<void>;
  open!: () => void;
  #publishGate: Promise<void> = Promise.resolve();
  openPublishes: () => void = () => {};

  constructor(opts: { gatePublishes?: boolean } = {}) {
    this.#gate = new Promise((resolve) => this.open = resolve);
    if (opts.gatePublishes) {
      this.#publishGate = new Promise((resolve) => this.openPublishes = resolve);
    }
  }

  probe(_o: CallOptions) {
    return Promise.resolve({ ready: true });
  }
  getPluginInfo(_o: CallOptions) {
    return Promise.resolve({ name: DRIVER, vendorVersion: "1" });
  }
  getPluginCapabilities(_o: CallOptions) {
    return Promise.resolve(new Set(["CONTROLLER_SERVICE"]));
  }
  controllerGetCapabilities(_o: CallOptions) {
    return Promise.resolve(new Set(["PUBLISH_UNPUBLISH_VOLUME"]));
  }
  listVolumes() {
    return Promise.resolve({ entries: [], nextToken: "" });
  }
  close() {}

  async controllerPublishVolume(req: ControllerPublishVolumeRequest, _o: CallOptions) {
    this.publishStarted.push(req.volumeId);
    await this.#publishGate;
    this.published.push(req.volumeId);
    return { publishContext: {} };
  }

  async controllerUnpublishVolume(req: ControllerUnpublishVolumeRequest, _o: CallOptions) {
    this.unpublishStarted.push(req.volumeId);
    await this.#gate;
  }
}

function volume(name: string, finalizers: string[] | null): PersistentVolume {
  return with_(pv(finalizers), (o) => {
    o.metadata.name = name;
    o.spec.csi!.volumeHandle = `handle-${name}`;
  });
}

function attachment(name: string, pvName: string): VolumeAttachment {
  return with_(va(false), (o) => {
    o.metadata.name = name;
    o.spec.source = { persistentVolumeName: pvName };
  });
}

/** Lets the workers, the API client and the server run until nothing is left to do now. */
async function settle(server: MemoryApiServer): Promise<void> {
  let quietRounds = 0;
  let seen = -1;
  while (quietRounds < 20) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    const n = server.requests.length;
    quietRounds = n === seen ? quietRounds + 1 : 0;
    seen = n;
  }
}

/** A controller with `flood` VAs being deleted and their detaches stuck in the driver. */
async function floodedWorld(opts: { lanes: boolean; flood?: number; gatePublishes?: boolean }) {
  const flood = opts.flood ?? FLOOD;
  const server = await MemoryApiServer.start();
  const dir = await Deno.makeTempDir({ prefix: "attacher-flood-" });
  await Deno.writeTextFile(`${dir}/kubeconfig`, server.kubeconfig());
  const kube = new KubeClient({
    connection: await loadConnection({ kubeconfigPath: `${dir}/kubeconfig` }),
    log: nullLogger,
  }, {});
  const clock = new FakeClock();
  // The deletions were written a minute before the attacher starts (wall time).
  clock.stepWall(Date.parse(TIME) + 60_000 - clock.wallNow());
  const node: CsiNode = csiNode();
  server.create("csinodes", node);
  const pvs: PersistentVolume[] = [volume("pv-new", null)];
  const deleting: VolumeAttachment[] = [];
  for (let i = 0; i < flood; i++) {
    const p = volume(`pv-${i}`, [FIN]);
    pvs.push(p);
    deleting.push(deleted(with_(attachment(`va-${i}`, p.metadata.name), (o) => {
      o.metadata.finalizers = [FIN];
      o.metadata.annotations = { ...ANN };
      o.status = { attached: true };
    })));
  }
  for (const p of pvs) server.create(PERSISTENT_VOLUMES, structuredClone(p));
  const stored = deleting.map((v) => server.create(VOLUME_ATTACHMENTS, structuredClone(v)));
  const vaInformer = new FakeInformer<VolumeAttachment>([]);
  const pvInformer = new FakeInformer<PersistentVolume>(pvs);
  const csiNodeInformer = new FakeInformer<CsiNode>([node]);
  const driver = new GatedDriver({ gatePublishes: opts.gatePublishes });
  const vaQueue = new LanedWorkQueue({
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 5, maxMs: 1000 }),
  }, opts.lanes ? { name: "va", lanes: volumeAttachmentLanes(vaInformer) } : { name: "va" });
  const pvQueue = new LanedWorkQueue({
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter({ baseMs: 5, maxMs: 1000 }),
  }, { name: "pv" });
  const durations = { attach: [] as number[], detach: [] as number[] };
  const latency = new OperationLatency({
    clock,
    sink: {
      observeAttachDuration: (seconds) => durations.attach.push(seconds),
      observeDetachDuration: (seconds) => durations.detach.push(seconds),
    },
  });
  const stores = {
    volumeAttachments: vaInformer,
    persistentVolumes: pvInformer,
    csiNodes: csiNodeInformer,
  };
  const memory = new AttachmentMemory({ backoff: vaQueue, latency });
  const handler = new CsiHandler(
    { kube, csi: driver, log: nullLogger, clock, stores, memory, fence: SOLE_REPLICA },
    {
      driverName: DRIVER,
      timeoutMs: 1000,
      supportsPublishReadOnly: false,
      supportsSingleNodeMultiWriter: false,
      defaultFsType: "",
      attachErrorCodes: true,
    },
  );
  const controller = new AttachController({
    vaInformer,
    pvInformer,
    vaQueue,
    pvQueue,
    handler,
    memory,
    log: nullLogger,
    clock,
  }, {
    driverName: DRIVER,
    workers: WORKERS,
    laneWorkers: opts.lanes ? { attach: WORKERS, detach: WORKERS } : undefined,
    reconcileSyncMs: 60_000,
  });
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  for (const v of stored) vaInformer.emitAdd(structuredClone(v));
  await settle(server);
  return {
    server,
    driver,
    durations,
    clock,
    vaInformer,
    vaQueue,
    /** Creates the new VA in the server and tells the controller. */
    addNew() {
      const created = server.create(VOLUME_ATTACHMENTS, attachment("va-new", "pv-new"));
      vaInformer.emitAdd(structuredClone(created));
    },
    /** Deletes the new VA in the server (it keeps our finalizer) and tells the controller. */
    deleteNew() {
      const before = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-new");
      server.delete(VOLUME_ATTACHMENTS, "va-new");
      const after = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-new");
      vaInformer.emitUpdate(structuredClone(before), structuredClone(after));
    },
    /** Delivers the new VA as the server has it now, as a watch would. */
    watchNew() {
      const cached = vaInformer.get("va-new")!;
      const now = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-new");
      vaInformer.emitUpdate(structuredClone(cached), structuredClone(now));
    },
    newIsAttached() {
      return server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-new")?.status?.attached ===
        true;
    },
    async close() {
      driver.open();
      stop.abort();
      await running;
      await server.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("detach flood: a new VolumeAttachment is attached while every detach worker is stuck", async () => {
  const world = await floodedWorld({ lanes: true });
  try {
    assert.equal(world.driver.unpublishStarted.length, WORKERS, "detach workers all busy");
    assert.equal(world.vaQueue.len("detach"), FLOOD - WORKERS, "a detach backlog waits");
    world.clock.advance(7_000); // the detaches have waited 7 s
    world.addNew();
    await settle(world.server);
    assert.deepEqual(world.driver.published, ["handle-pv-new"]);
    assert.ok(world.newIsAttached(), "va-new attached during the flood");
    assert.equal(world.driver.unpublishStarted.length, WORKERS, "no detach finished meanwhile");
    assert.deepEqual(world.durations.attach, [0], "csi_attacher_attach_duration_seconds");
    world.clock.advance(3_000);
    world.driver.open();
    await settle(world.server);
    assert.equal(world.driver.unpublishStarted.length, FLOOD);
    assert.deepEqual(
      world.durations.detach,
      Array(FLOOD).fill(10),
      "csi_attacher_detach_duration_seconds: from first sight of the deletion",
    );
  } finally {
    await world.close();
  }
});

Deno.test("detach flood: with one pool (the Go attacher's design) the attach waits behind the detaches", async () => {
  const world = await floodedWorld({ lanes: false });
  try {
    assert.equal(world.driver.unpublishStarted.length, WORKERS);
    world.addNew();
    await settle(world.server);
    assert.deepEqual(world.driver.published, [], "no worker is free for the attach");
    assert.ok(!world.newIsAttached());
    world.driver.open();
    await settle(world.server);
    assert.ok(world.newIsAttached(), "attached once the detaches ahead of it are done");
    assert.equal(world.driver.unpublishStarted.length, FLOOD);
  } finally {
    await world.close();
  }
});

Deno.test("detach flood: a key queued behind the detaches moves to the attach lane once its VA is known", async () => {
  const world = await floodedWorld({ lanes: true });
  try {
    const key = "va-new";
    world.vaQueue.add(key); // not in the cache yet: it waits in the detach lane...
    assert.equal(world.vaQueue.len("detach"), FLOOD - WORKERS + 1);
    const created = world.server.create(VOLUME_ATTACHMENTS, attachment(key, "pv-new"));
    world.vaInformer.emitAdd(structuredClone(created));
    // ...and adding it again once it is known moves it to the attach lane, not into both.
    await settle(world.server);
    assert.ok(world.newIsAttached());
    assert.equal(world.vaQueue.len("detach"), FLOOD - WORKERS, "no stale detach entry left");
    assert.equal(world.vaQueue.isQueuedOrProcessing(key), false);
  } finally {
    await world.close();
  }
});

Deno.test("detach flood: a VA deleted while its attach runs is detached only after the attach, once", async () => {
  const world = await floodedWorld({ lanes: true, flood: 0, gatePublishes: true });
  try {
    world.addNew();
    await settle(world.server);
    assert.deepEqual(world.driver.publishStarted, ["handle-pv-new"], "the attach is in the driver");
    world.deleteNew();
    await settle(world.server);
    assert.deepEqual(
      world.driver.unpublishStarted,
      [],
      "an idle detach worker must not take the key while the attach worker has it",
    );
    assert.equal(world.vaQueue.isQueuedOrProcessing("va-new"), true);
    world.driver.open();
    world.driver.openPublishes();
    await settle(world.server);
    assert.deepEqual(world.driver.published, ["handle-pv-new"]);
    // The cached VA predates the attached write, so its detach waits for that write's event.
    assert.deepEqual(world.driver.unpublishStarted, []);
    world.watchNew();
    await settle(world.server);
    assert.deepEqual(world.driver.unpublishStarted, ["handle-pv-new"], "then detached, once");
    assert.equal(world.vaQueue.isQueuedOrProcessing("va-new"), false);
  } finally {
    await world.close();
  }
});
