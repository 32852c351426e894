/**
 * ListVolumes with `--max-entries=0` against a driver whose whole answer exceeds gRPC's 4 MiB
 * receive limit: the reconciler pages on its own, says so once, and still finds every
 * difference. The driver is the test kit's example driver behind a real gRPC server.
 */

import assert from "node:assert/strict";
import { CsiError, type ListedVolume } from "../csi/api.ts";
import { type CsiCallInfo, GrpcCsiClient } from "../csi/client.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { FakeInformer } from "../../testkit/fakes/fake_informer.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { testQueue } from "../../testkit/fakes/work_queue.ts";
import { AttachmentMemory } from "./attachment_memory.ts";
import { ListVolumesReconciler } from "./reconciler.ts";
import {
  estimatedBytes,
  ListVolumesPaging,
  PROBE_ENTRIES,
  tooLargeAnswer,
} from "./list_volumes_paging.ts";
import { SOLE_REPLICA } from "../lease_fence.ts";

const DRIVER = "example.csi.k8s.io";
const VOLUMES = 100_000;
const PAGING_LINE = "ListVolumes answer too large for one message, paging with max_entries";

/** A volume ID as provisioners make them (`pvc-<uuid>`), numbered so the order is known. */
function volumeId(i: number): string {
  return `pvc-${String(i).padStart(8, "0")}-0000-4000-8000-000000000000`;
}

function pv(name: string, handle: string): PersistentVolume {
  return {
    metadata: { name, resourceVersion: "1" },
    spec: { accessModes: ["ReadWriteOnce"], csi: { driver: DRIVER, volumeHandle: handle } },
  };
}

function va(name: string, pvName: string, attached: boolean): VolumeAttachment {
  return {
    metadata: { name, uid: `uid-${name}`, resourceVersion: "1" },
    spec: { attacher: DRIVER, nodeName: "node1", source: { persistentVolumeName: pvName } },
    status: { attached },
  };
}

const csiNode: CsiNode = {
  metadata: { name: "node1", resourceVersion: "1" },
  spec: { drivers: [{ name: DRIVER, nodeID: "node-1" }] },
};

Deno.test("ListVolumes with --max-entries=0 and 100 000 volumes pages on its own", async () => {
  const driver = new ExampleDriver({}, { nodeIds: ["node-1"] });
  for (let i = 0; i < VOLUMES; i++) driver.createVolume(volumeId(i));
  const capability = {
    mount: { fsType: "ext4", mountFlags: [], volumeMountGroup: "" },
    accessMode: { mode: "SINGLE_NODE_WRITER" as const },
  };
  // Published, with the VA saying so: nothing to do. Published at the very end of the answer,
  // with the VA saying not attached: found only when every page was read.
  for (const i of [0, VOLUMES - 1]) {
    driver.publish({
      volumeId: volumeId(i),
      nodeId: "node-1",
      volumeCapability: capability,
      readonly: false,
      secrets: {},
      volumeContext: {},
    });
  }
  const dir = await Deno.makeTempDir({ prefix: "list_volumes_paging" });
  const server = await driver.start(`${dir}/csi.sock`);
  const calls: CsiCallInfo[] = [];
  const log = new FakeLogger(0);
  const csi = new GrpcCsiClient({ log }, {
    address: server.address,
    observer: { observeCsiCall: (info) => calls.push(info) },
  });
  const clock = new FakeClock(0);
  const queue = testQueue(clock, "va");
  const memory = new AttachmentMemory({ backoff: queue });
  const reconciler = new ListVolumesReconciler({
    csi,
    fence: SOLE_REPLICA,
    log,
    clock,
    stores: {
      volumeAttachments: new FakeInformer([
        va("va-first", "pv-first", true),
        va("va-last", "pv-last", false),
      ]),
      persistentVolumes: new FakeInformer([
        pv("pv-first", volumeId(0)),
        pv("pv-last", volumeId(VOLUMES - 1)),
      ]),
      csiNodes: new FakeInformer([csiNode]),
    },
    memory,
    queue,
  }, { driverName: DRIVER, timeoutMs: 60_000, maxEntries: 0 });
  try {
    await reconciler.reconcile(new AbortController().signal);

    const codes = calls.filter((c) => c.method.endsWith("/ListVolumes")).map((c) => c.code);
    assert.equal(codes[0], "ResourceExhausted", "the whole answer exceeds the receive limit");
    assert.ok(codes.length >= 3 && codes.slice(1).every((c) => c === "OK"), codes.join(" "));
    const lines = log.withMessage(PAGING_LINE);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.v, 0);
    assert.match(String(lines[0]!.fields.reason), /received message larger than max/);
    // Derived from the bytes per entry: a page of a quarter of the 4 MiB limit.
    const pageSize = reconciler.maxEntries;
    assert.ok(pageSize > PROBE_ENTRIES && pageSize < VOLUMES / 4, String(pageSize));
    assert.equal(queue.len(), 1);
    assert.equal(await queue.get(), "va-last");
    queue.done("va-last");
    assert.ok(memory.takeOutOfSync("va-last"));

    // The next pass pages from its first call and says nothing more.
    calls.length = 0;
    await reconciler.reconcile(new AbortController().signal);
    const pages = calls.filter((c) => c.method.endsWith("/ListVolumes"));
    assert.ok(pages.length >= 4 && pages.every((c) => c.code === "OK"));
    assert.equal(log.withMessage(PAGING_LINE).length, 1);
    assert.equal(queue.len(), 1);
  } finally {
    csi.close();
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});

function entries(n: number, idLength = 40): ListedVolume[] {
  return Array.from({ length: n }, (_, i) => ({
    volumeId: String(i).padStart(idLength, "v"),
    publishedNodeIds: ["node-1"],
  }));
}

const tooLarge = (size: number) =>
  new CsiError(8, `grpc: received message larger than max (${size} vs. 4194304)`);

Deno.test("paging turns on before an answer that grows close to the limit fails", () => {
  const paging = new ListVolumesPaging(0);
  paging.observe(entries(10), 10 * 60, true);
  assert.equal(paging.beforePass(20_000), undefined, "1.2 MB: one answer still");
  assert.equal(paging.maxEntries, 0);
  const on = paging.beforePass(60_000);
  assert.ok(on !== undefined);
  assert.equal(on.answerBytes, 3_600_000);
  assert.equal(paging.maxEntries, Math.floor(4194304 / 4 / 60));
  assert.equal(paging.beforePass(60_000), undefined, "turned on once");
});

Deno.test("an operator's --max-entries stays the bound while its pages fit", () => {
  const paging = new ListVolumesPaging(500);
  paging.observe(entries(500), 500 * 60, false);
  assert.equal(paging.beforePass(200_000), undefined);
  assert.equal(paging.maxEntries, 500);
});

Deno.test("a page too large shrinks toward the target; other failures are not retried", () => {
  const paging = new ListVolumesPaging(0);
  assert.deepEqual(paging.onFailure(new CsiError(8, "quota exceeded")), { retry: false });
  assert.deepEqual(paging.onFailure(new CsiError(14, "connection refused")), { retry: false });
  const first = paging.onFailure(tooLarge(5_000_000));
  assert.ok(first.retry && first.turnedOn !== undefined);
  assert.equal(paging.maxEntries, PROBE_ENTRIES);
  // 1000 entries were 8 MB: the next page aims at 1 MiB.
  const second = paging.onFailure(tooLarge(8_000_000));
  assert.ok(second.retry && second.turnedOn === undefined);
  assert.equal(paging.maxEntries, Math.floor(1000 * 1048576 / 8_000_000));
  for (let i = 0; i < 20 && paging.maxEntries > 1; i++) paging.onFailure(tooLarge(5_000_000));
  assert.equal(paging.maxEntries, 1);
  assert.deepEqual(paging.onFailure(tooLarge(5_000_000)), { retry: false });
});

Deno.test("a driver's smaller send limit becomes the limit", () => {
  const err = new CsiError(8, "grpc: trying to send message larger than max (3000000 vs. 2097152)");
  assert.deepEqual(tooLargeAnswer(err), { bytes: 3_000_000, limit: 2_097_152 });
  const paging = new ListVolumesPaging(0);
  paging.onFailure(err);
  paging.observe(entries(100), 100 * 64, false);
  assert.equal(paging.maxEntries, Math.floor(2_097_152 / 4 / 64));
});

Deno.test("without a reported size, bytes are the entries' protobuf size", () => {
  // Entry{volume{volume_id}, status{published_node_ids}}: 3 + 2 + (2 + 40) + 2 + (2 + 6).
  assert.equal(estimatedBytes(entries(1)), 57);
});
