/**
 * The V8 heap and RSS a ListVolumes reconcile pass takes over N cached VolumeAttachment + PV
 * pairs, with the driver in another process:
 *
 * ```sh
 * deno run -A --v8-flags=<the compile task's> bench/reconcile_pass.ts --volumes=100000 --nodes=5000
 * ```
 *
 * The example driver (its own process) holds N volumes, each published to one of the nodes; this
 * process caches N attached VAs and their PVs the way the informers do (`cache_fields.ts`, from
 * JSON, the benchmark's names), then runs `--passes` passes of the attacher's reconciler with
 * `--max-entries=0` (the first answer is too large for one message and paging turns on). For
 * each pass it reports the heap used after a full collection before it, the largest heap used
 * and RSS sampled every 2 ms during it, and its time. Run it with the V8 flags the attacher
 * ships with (`deno.json`, the compile task), or the heap grows by other rules.
 *
 * Both processes stop by themselves: the driver when its stdin closes.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { GrpcCsiClient } from "../lib/csi/client.ts";
import { ListVolumesReconciler } from "../lib/controller/reconciler.ts";
import { AttachmentMemory } from "../lib/controller/attachment_memory.ts";
import { CacheFields } from "../lib/controller/cache_fields.ts";
import { finalizerName, NODE_ID_ANNOTATION } from "../lib/controller/names.ts";
import { nullLogger } from "../lib/observe/logger.ts";
import { realClock } from "../lib/clock.ts";
import type { CsiNode, PersistentVolume, VolumeAttachment } from "../lib/kube/types.ts";
import { ExampleDriver } from "../testkit/csi/example_driver.ts";
import { FakeInformer } from "../testkit/fakes/fake_informer.ts";
import { testQueue } from "../testkit/fakes/work_queue.ts";
import {
  csiNode,
  type FixtureSpec,
  nodeId,
  nodeName,
  nodeOf,
  persistentVolume,
  pvName,
  vaName,
  volumeAttachment,
  volumeId,
} from "./fixtures.ts";
import { SOLE_REPLICA } from "../lib/lease_fence.ts";

const SELF = new URL(import.meta.url).pathname;
const MIB = 1024 * 1024;

/** Serves the example driver with the spec's volumes, each published to its node. */
async function serveDriver(spec: FixtureSpec, socket: string): Promise<void> {
  const driver = new ExampleDriver({}, { name: spec.driver });
  const volumeCapability = {
    mount: { fsType: "ext4", mountFlags: [], volumeMountGroup: "" },
    accessMode: { mode: "SINGLE_NODE_WRITER" as const },
  };
  for (let i = 0; i < spec.count; i++) {
    driver.createVolume(volumeId(spec, i));
    driver.publish({
      volumeId: volumeId(spec, i),
      nodeId: nodeId(spec, nodeOf(spec, i)),
      volumeCapability,
      readonly: false,
      secrets: {},
      volumeContext: {},
    });
  }
  const server = await driver.start(socket);
  console.log("listening");
  // Until the measuring process is gone.
  for await (const _ of Deno.stdin.readable) { /* nothing is sent */ }
  await server.close();
}

/** An object as the API server would send it, through JSON as the informer reads it. */
function asSent<T>(obj: T, metadata: Record<string, unknown>): T {
  const sent = structuredClone(obj) as T & { metadata: Record<string, unknown> };
  Object.assign(sent.metadata, metadata);
  return JSON.parse(JSON.stringify(sent));
}

function heapAndRss(): { heap: number; rss: number } {
  const m = Deno.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

async function collected(): Promise<{ heap: number; rss: number }> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("needs --v8-flags=--expose-gc (the shipped flags have it)");
  await new Promise((resolve) => setTimeout(resolve, 10));
  gc();
  gc();
  return heapAndRss();
}

async function measure(spec: FixtureSpec, passes: number): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "reconcile-pass-" });
  const socket = `${dir}/csi.sock`;
  const driver = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", SELF, "--serve-driver", JSON.stringify(spec), socket],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const reader = driver.stdout.getReader();
  await reader.read();
  reader.releaseLock();
  const finalizers = [finalizerName(spec.driver)];
  const pvs = new FakeInformer<PersistentVolume>();
  const vas = new FakeInformer<VolumeAttachment>();
  const nodes = new FakeInformer<CsiNode>();
  const fields = new CacheFields();
  const transformNode = fields.csiNode(spec.driver);
  for (let n = 0; n < spec.nodes; n++) nodes.set(transformNode(asSent(csiNode(spec, n), {})));
  const created = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  for (let i = 0; i < spec.count; i++) {
    pvs.set(fields.persistentVolume(asSent(persistentVolume(spec, i), {
      uid: crypto.randomUUID(),
      resourceVersion: String(1000 + i),
      creationTimestamp: created,
      finalizers,
    })));
  }
  for (let i = 0; i < spec.count; i++) {
    const va = asSent(volumeAttachment(spec, i), {
      uid: crypto.randomUUID(),
      resourceVersion: String(200_000 + i),
      creationTimestamp: created,
      finalizers,
      annotations: { [NODE_ID_ANNOTATION]: nodeId(spec, nodeOf(spec, i)) },
    });
    va.status = { attached: true, attachmentMetadata: { devicePath: `/dev/${volumeId(spec, i)}` } };
    vas.set(fields.volumeAttachment(va, pvs));
  }
  const csi = new GrpcCsiClient({ log: nullLogger }, { address: socket });
  const queue = testQueue(realClock, "va");
  const reconciler = new ListVolumesReconciler({
    csi,
    fence: SOLE_REPLICA,
    log: nullLogger,
    stores: { volumeAttachments: vas, persistentVolumes: pvs, csiNodes: nodes },
    memory: new AttachmentMemory({ backoff: queue }),
    queue,
  }, { driverName: spec.driver, timeoutMs: 120_000, maxEntries: 0 });
  try {
    const cached = await collected();
    console.log(
      `${spec.count} pairs cached over ${spec.nodes} nodes: heap used ${
        (cached.heap / MIB).toFixed(1)
      } MiB, RSS ${(cached.rss / MIB).toFixed(1)} MiB (${vaName(spec, 0)}, ${pvName(spec, 0)}, ${
        nodeName(spec, 0)
      })`,
    );
    console.log("| pass | ms | max_entries | heap before | heap peak | RSS before | RSS peak |");
    console.log("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (let p = 1; p <= passes; p++) {
      const before = await collected();
      const peak = { ...before };
      const sample = setInterval(() => {
        const now = heapAndRss();
        peak.heap = Math.max(peak.heap, now.heap);
        peak.rss = Math.max(peak.rss, now.rss);
      }, 2);
      const started = performance.now();
      try {
        await reconciler.reconcile(new AbortController().signal);
      } finally {
        clearInterval(sample);
      }
      const ms = performance.now() - started;
      const after = heapAndRss();
      peak.heap = Math.max(peak.heap, after.heap);
      peak.rss = Math.max(peak.rss, after.rss);
      const mib = (n: number) => (n / MIB).toFixed(1);
      console.log(
        `| ${p} | ${ms.toFixed(0)} | ${reconciler.maxEntries} | ${mib(before.heap)} | ${
          mib(peak.heap)
        } (+${mib(peak.heap - before.heap)}) | ${mib(before.rss)} | ${mib(peak.rss)} (+${
          mib(peak.rss - before.rss)
        }) |`,
      );
    }
  } finally {
    csi.close();
    await driver.stdin.close();
    await driver.status;
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  if (Deno.args[0] === "--serve-driver") {
    await serveDriver(JSON.parse(Deno.args[1]!) as FixtureSpec, Deno.args[2]!);
  } else {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        volumes: { type: "string", default: "100000" },
        nodes: { type: "string", default: "5000" },
        passes: { type: "string", default: "3" },
      },
    });
    await measure({
      driver: "example.csi.k8s.io",
      count: Number(values.volumes),
      nodes: Number(values.nodes),
      prefix: "fp-",
    }, Number(values.passes));
  }
}
