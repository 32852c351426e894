/**
 * The controller builder: the handler each driver calls for, the reconciler only for a driver
 * that lists published volumes, the caches' transforms, the queues with their lanes, and the
 * fence handed to everything that acts.
 */

import assert from "node:assert/strict";
import {
  apiInformers,
  buildController,
  type ControllerBuildDeps,
  type ControllerBuildSettings,
  type DriverHandling,
  DUMMY_DRIVER,
  handledDriverName,
  PV_QUEUE_NAME,
  VA_QUEUE_NAME,
  workQueue,
} from "./build.ts";
import { CsiHandler } from "./csi_handler.ts";
import { TrivialHandler } from "./trivial_handler.ts";
import { ListVolumesReconciler } from "./reconciler.ts";
import { DUMMY_DRIVER_NAME } from "./names.ts";
import type { Handler } from "./handler.ts";
import { ATTACH_LANE, DETACH_LANE } from "./lanes.ts";
import { Informer } from "../kube/informer.ts";
import type { KubeApi } from "../kube/api.ts";
import type { CsiClient } from "../csi/api.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import type { LeaseFence } from "../lease_fence.ts";
import { nullLogger } from "../observe/logger.ts";
import { realClock } from "../clock.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { FakeInformers } from "../../testkit/fakes/fake_informer.ts";
import { ALWAYS_OPEN_FENCE } from "../../testkit/fakes/open_fence.ts";

const DRIVER = "csi.example.com";

/** A KubeApi that fails the test on any call. */
const NO_KUBE = new Proxy({}, {
  get: (_t, name) => () => assert.fail(`unexpected KubeApi.${String(name)}`),
}) as KubeApi;
const NO_CSI = new Proxy({}, {
  get: (_t, name) => () => assert.fail(`unexpected CsiClient.${String(name)}`),
}) as CsiClient;

const SETTINGS: ControllerBuildSettings = {
  resyncMs: 0,
  retry: { baseMs: 5, maxMs: 1000 },
  workers: 1,
  attachWorkers: 1,
  detachWorkers: 1,
  reconcileSyncMs: 60_000,
  handler: { defaultFsType: "ext4", attachErrorCodes: false },
  reconciler: { timeoutMs: 1000, maxEntries: 0 },
  callTimeoutMs: 1000,
};

function deps(over: Partial<ControllerBuildDeps> = {}): ControllerBuildDeps {
  return {
    kube: NO_KUBE,
    informers: new FakeInformers().source,
    log: nullLogger,
    clock: realClock,
    fence: ALWAYS_OPEN_FENCE,
    ...over,
  };
}

function csiDriver(reconcile: boolean): DriverHandling {
  return {
    kind: "csi",
    driverName: DRIVER,
    csi: NO_CSI,
    capabilities: { publishReadonly: false, singleNodeMultiWriter: false, reconcile },
  };
}

const VA: VolumeAttachment = {
  kind: "VolumeAttachment",
  metadata: { name: "va1" },
  spec: { attacher: DUMMY_DRIVER_NAME, nodeName: "n1", source: { persistentVolumeName: "pv1" } },
};

Deno.test("buildController() picks the handler the driver calls for", () => {
  const csi = buildController(deps(), SETTINGS, csiDriver(false));
  assert.ok(csi.handler instanceof CsiHandler);
  assert.equal(csi.reconciler, undefined, "no reconciler for a driver that cannot list");
  assert.equal(csi.driverName, DRIVER);

  const listing = buildController(deps(), SETTINGS, csiDriver(true));
  assert.ok(listing.reconciler instanceof ListVolumesReconciler);

  const trivial = buildController(deps(), SETTINGS, { kind: "trivial", driverName: DRIVER });
  assert.ok(trivial.handler instanceof TrivialHandler);
  assert.equal(trivial.reconciler, undefined);
  assert.equal(trivial.driverName, DRIVER);
});

Deno.test("buildController() in dummy mode runs the trivial handler for csi/dummy", async () => {
  assert.equal(handledDriverName(DUMMY_DRIVER), DUMMY_DRIVER_NAME);
  const patched: string[] = [];
  const kube = {
    patch: (_res: unknown, name: string) => {
      patched.push(name);
      return Promise.resolve({ ...VA, status: { attached: true } });
    },
  } as unknown as KubeApi;
  const built = buildController(deps({ kube }), SETTINGS, DUMMY_DRIVER);
  assert.ok(built.handler instanceof TrivialHandler);
  assert.equal(built.reconciler, undefined);
  assert.equal(built.driverName, DUMMY_DRIVER_NAME);
  // The controller syncs the VAs of csi/dummy: the trivial handler marks them attached.
  assert.equal(await built.handler.syncVolumeAttachment(VA, new AbortController().signal), "done");
  assert.deepEqual(patched, ["va1"]);
});

Deno.test("buildController() hands its fence to the handler: a closed one stops the sync before its write", async () => {
  let asked = 0;
  const fence: LeaseFence = { valid: () => (asked++, false) };
  const built = buildController(deps({ fence }), SETTINGS, DUMMY_DRIVER);
  assert.equal(
    await built.handler.syncVolumeAttachment(VA, new AbortController().signal),
    "stopped",
  );
  assert.equal(asked, 1);
});

Deno.test("buildController() requires a fence", () => {
  const { fence: _fence, ...unfenced } = deps();
  // @ts-expect-error the fence is required: no controller is built unfenced by omission
  const withoutFence: ControllerBuildDeps = unfenced;
  assert.ok(withoutFence);
});

Deno.test("buildController() caches what the shipped transforms keep, in informers made by the source", () => {
  const caches = new FakeInformers([
    {
      kind: "CSINode",
      metadata: { name: "n1", labels: { team: "a" } },
      spec: {
        drivers: [{ name: DRIVER, nodeID: "id-1" }, { name: "other.example.com", nodeID: "x" }],
      },
    } as CsiNode,
    {
      kind: "PersistentVolume",
      metadata: { name: "pv1", annotations: { "example.com/unread": "yes" } },
      spec: { csi: { driver: DRIVER, volumeHandle: "h1" } },
    } as PersistentVolume,
  ]);
  const built = buildController(deps({ informers: caches.source }), SETTINGS, csiDriver(false));
  assert.equal(built.informers.csiNodes, caches.csiNodes);
  assert.deepEqual(built.informers.csiNodes.get("n1")?.spec.drivers, [
    { name: DRIVER, nodeID: "id-1" },
  ]);
  assert.equal(built.informers.persistentVolumes.get("pv1")?.metadata.annotations, undefined);
  assert.equal(built.informers.persistentVolumes.get("pv1")?.spec.csi?.volumeHandle, "h1");
});

Deno.test("buildController() names its queues and gives the VA queue the attach and detach lanes", () => {
  const built = buildController(deps(), SETTINGS, csiDriver(false));
  assert.equal(built.vaQueue.name, "csi-attacher-va");
  assert.equal(VA_QUEUE_NAME, "csi-attacher-va");
  assert.equal(built.pvQueue.name, PV_QUEUE_NAME);
  assert.deepEqual([...built.vaQueue.lanes()].sort(), [ATTACH_LANE, DETACH_LANE].sort());
});

Deno.test("buildController() runs a handler of the caller's own with the shared caches and memory", () => {
  let given: unknown;
  const own: Handler = {
    syncVolumeAttachment: () => Promise.resolve("done"),
    syncPersistentVolume: () => Promise.resolve("done"),
  };
  const built = buildController(
    deps({
      ownHandler: (made) => {
        given = made;
        return own;
      },
    }),
    SETTINGS,
    csiDriver(true),
  );
  assert.equal(built.handler, own);
  assert.deepEqual(given, { stores: built.informers, memory: built.memory });
  assert.ok(built.reconciler instanceof ListVolumesReconciler, "the reconciler stays the driver's");
});

Deno.test("apiInformers() makes informers that list and watch through the API", () => {
  const source = apiInformers({ kube: NO_KUBE, clock: realClock }, { watchList: true });
  const built = buildController(deps({ informers: source }), SETTINGS, csiDriver(false));
  assert.ok(built.informers.volumeAttachments instanceof Informer);
  assert.ok(built.informers.persistentVolumes instanceof Informer);
  assert.ok(built.informers.csiNodes instanceof Informer);
});

Deno.test("workQueue() backs each key off exponentially from --retry-interval-start to -max", () => {
  const clock = new FakeClock();
  const queue = workQueue({ clock }, { name: "q", retry: { baseMs: 100, maxMs: 250 } });
  const delays: number[] = [];
  for (let i = 0; i < 3; i++) {
    queue.addRateLimited("k");
    delays.push(clock.nextTimerAt()! - clock.now());
    clock.advance(delays[i]!);
  }
  assert.deepEqual(delays, [100, 200, 250]);
  queue.shutDown();
});
