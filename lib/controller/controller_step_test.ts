/**
 * Stepping the controller by hand (`stepVolumeAttachment`, `stepPersistentVolume`,
 * `drainReady`), as the simulations and scenario tests do instead of running its workers: a step
 * syncs a key that is ready now, and returns at once when there is none.
 */

import assert from "node:assert/strict";
import { buildController, DUMMY_DRIVER } from "./build.ts";
import { DUMMY_DRIVER_NAME } from "./names.ts";
import type { KubeApi } from "../kube/api.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import { nullLogger } from "../observe/logger.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { FakeInformers } from "../../testkit/fakes/fake_informer.ts";
import { ALWAYS_OPEN_FENCE } from "../../testkit/fakes/open_fence.ts";

function va(name: string): VolumeAttachment {
  return {
    kind: "VolumeAttachment",
    metadata: { name, uid: `uid-${name}` },
    spec: { attacher: DUMMY_DRIVER_NAME, nodeName: "n1", source: { persistentVolumeName: "pv" } },
  };
}

/** A dummy-mode controller over hand-driven caches, and the VAs its handler patched. */
function world() {
  const patched: string[] = [];
  const kube = {
    patch: (_res: unknown, name: string) => {
      patched.push(name);
      return Promise.resolve({ ...va(name), status: { attached: true } });
    },
  } as unknown as KubeApi;
  const caches = new FakeInformers();
  const built = buildController({
    kube,
    informers: caches.source,
    log: nullLogger,
    clock: new FakeClock(),
    fence: ALWAYS_OPEN_FENCE,
  }, {
    resyncMs: 0,
    retry: { baseMs: 1000, maxMs: 1000 },
    workers: 1,
    attachWorkers: 1,
    detachWorkers: 1,
    reconcileSyncMs: 60_000,
    handler: { defaultFsType: "", attachErrorCodes: false },
    reconciler: { timeoutMs: 1000, maxEntries: 0 },
    callTimeoutMs: 1000,
  }, DUMMY_DRIVER);
  return { built, vaInformer: caches.volumeAttachments, patched };
}

Deno.test("AttachController steps return false at once when no key is ready", async () => {
  const { built, patched } = world();
  assert.equal(await built.controller.stepVolumeAttachment(), false);
  assert.equal(await built.controller.stepPersistentVolume(), false);
  // A key waiting for its backoff is not ready either.
  built.vaQueue.addRateLimited("va-later");
  assert.equal(await built.controller.stepVolumeAttachment(), false);
  assert.equal(await built.controller.drainReady(), 0);
  assert.deepEqual(patched, []);
});

Deno.test("AttachController.drainReady() syncs every ready key, one at a time", async () => {
  const { built, vaInformer, patched } = world();
  vaInformer.emitAdd(va("va1"));
  vaInformer.emitAdd(va("va2"));
  assert.equal(await built.controller.stepVolumeAttachment(), true);
  assert.deepEqual(patched, ["va1"]);
  vaInformer.emitAdd(va("va3"));
  assert.equal(await built.controller.drainReady(), 2);
  assert.deepEqual(patched, ["va1", "va2", "va3"]);
  assert.equal(built.vaQueue.len(), 0);
});
