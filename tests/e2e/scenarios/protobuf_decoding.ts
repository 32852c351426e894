/**
 * Scenario 22: the attacher's Kubernetes protobuf decoder (`lib/wire/kubernetes/decode.ts`) on
 * every VolumeAttachment, PersistentVolume, CSINode and Lease of the real cluster. Each kind is
 * listed twice, in JSON and in protobuf, and each object of the protobuf list is decoded by ours
 * and by protobufjs on the upstream `.proto` files of the cluster's release
 * (`testkit/kube_protos.ts`). Ours must equal the JSON form without `managedFields` and the
 * fields the decoder does not read (a PV's `nodeAffinity` and volume sources other than CSI and
 * the migratable ones, a CSINode's `status.storageHealth`); protobufjs must equal the JSON form
 * whole (zero values aside). An object whose resourceVersion changed between the two lists (a
 * Lease renewed meanwhile) is listed again, up to 5 times. A watch list in protobuf gives the same
 * objects through the attacher's watch framing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import type { ScenarioContext } from "../context.ts";
import { waitForLog } from "../kit.ts";
import { READY_LINE } from "./round_trip.ts";
import { decodeObject, decodeWatchEvent } from "../../../lib/wire/kubernetes/decode.ts";
import { LengthFrameSplitter } from "../../../lib/wire/kubernetes/framing.ts";
import {
  KUBE_PROTO_VERSIONS,
  loadKubeProtos,
  withoutZeroValues,
} from "../../../testkit/kube_protos.ts";

const PROTOBUF = "application/vnd.kubernetes.protobuf";

type Json = Record<string, unknown>;

/** The PV volume sources the decoder reads (`lib/wire/kubernetes/tables.ts`). */
const READ_SOURCES = new Set([
  "csi",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "cinder",
  "azureFile",
  "vsphereVolume",
  "azureDisk",
  "portworxVolume",
]);
const PV_SPEC_READ = new Set([
  "capacity",
  "accessModes",
  "claimRef",
  "persistentVolumeReclaimPolicy",
  "storageClassName",
  "mountOptions",
  "volumeMode",
  "volumeAttributesClassName",
  ...READ_SOURCES,
]);

/** The JSON form as our decoder gives it: what it does not read left out. */
function expectedOfOurs(kind: string, item: Json): Json {
  const out = structuredClone(item);
  delete (out.metadata as Json).managedFields;
  if (kind === "PersistentVolume") {
    const spec = out.spec as Json;
    for (const key of Object.keys(spec)) if (!PV_SPEC_READ.has(key)) delete spec[key];
  }
  if (kind === "CSINode") {
    // v1.35 has no CSINode status; the decoder gives the `{}` of v1.37's JSON whatever the server.
    if (typeof out.status === "object" && out.status !== null) {
      delete (out.status as Json).storageHealth;
    } else out.status = {};
  }
  return out;
}

function nameOf(item: Json): string {
  const meta = item.metadata as Json;
  return `${meta.namespace ?? ""}/${meta.name}`;
}

/** `path` listed in JSON and in protobuf; the differences found, and the objects compared. */
async function compareKind(
  ctx: ScenarioContext,
  kind: string,
  path: string,
): Promise<{ compared: number; ours: string[]; protobufjs: string[] }> {
  const kp = loadKubeProtos(protoVersion(ctx))!;
  for (let attempt = 1;; attempt++) {
    const json = await ctx.kit.api.getOk<{ items: Json[] }>(path);
    const pb = await ctx.kit.api.requestBytes("GET", path, { Accept: PROTOBUF });
    assert.equal(pb.status, 200, `${path} in protobuf`);
    assert.ok(pb.contentType.startsWith(PROTOBUF), `${path}: ${pb.contentType}`);
    const ours = decodeObject(pb.bytes).items as Json[];
    const theirs = kp.decode(pb.bytes).items as Json[];
    const byName = new Map(json.items.map((i) => [nameOf(i), i]));
    const rv = (i: Json) => (i.metadata as Json).resourceVersion;
    const moved = ours.some((i) => rv(byName.get(nameOf(i)) ?? {}) !== rv(i)) ||
      ours.length !== json.items.length;
    if (moved && attempt < 5) continue;
    const oursDiffs: string[] = [];
    const theirDiffs: string[] = [];
    let compared = 0;
    for (const [i, item] of ours.entries()) {
      const fromJson = byName.get(nameOf(item));
      if (fromJson === undefined || rv(fromJson) !== rv(item)) continue;
      compared++;
      const expected = expectedOfOurs(kind, fromJson);
      if (!isDeepStrictEqual(item, expected)) {
        oursDiffs.push(
          `${kind} ${nameOf(item)}: ours ${JSON.stringify(item)}, JSON ${JSON.stringify(expected)}`,
        );
      }
      if (!isDeepStrictEqual(withoutZeroValues(theirs[i]), withoutZeroValues(fromJson))) {
        theirDiffs.push(`${kind} ${nameOf(item)}: protobufjs ${JSON.stringify(theirs[i])}`);
      }
    }
    return { compared, ours: oursDiffs, protobufjs: theirDiffs };
  }
}

/** The `k8s.io/api` module version of the cluster's release. */
function protoVersion(ctx: ScenarioContext): string {
  const minor = ctx.kubernetes.minor.split(".")[1];
  const version = KUBE_PROTO_VERSIONS.find((v) => v.startsWith(`v0.${minor}.`));
  if (version === undefined) throw new Error(`no .proto files for ${ctx.kubernetes.version}`);
  return version;
}

/** A protobuf watch list of VolumeAttachments, decoded by ours, until the initial-events end. */
async function watchList(ctx: ScenarioContext): Promise<Map<string, string>> {
  const abort = new AbortController();
  const res = await ctx.kit.api.stream(
    "/apis/storage.k8s.io/v1/volumeattachments?watch=true&sendInitialEvents=true&" +
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30",
    abort.signal,
    { Accept: PROTOBUF },
  );
  assert.ok((res.headers.get("content-type") ?? "").startsWith(`${PROTOBUF};stream=watch`));
  const seen = new Map<string, string>();
  const splitter = new LengthFrameSplitter();
  const reader = res.body!.getReader();
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) throw new Error("the watch list ended before its initial events did");
      for (const frame of splitter.push(next.value)) {
        const event = decodeWatchEvent(frame);
        const meta = event.object.metadata as Json;
        if (event.type === "ADDED") seen.set(String(meta.name), String(meta.resourceVersion));
        const annotations = meta.annotations as Record<string, string> | undefined;
        if (event.type === "BOOKMARK" && annotations?.["k8s.io/initial-events-end"] === "true") {
          return seen;
        }
      }
    }
  } finally {
    abort.abort();
    await reader.cancel().catch(() => {});
  }
}

/** The scenario. */
export async function protobufDecoding(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);
  // Attached VAs with our finalizers and annotations, their PVs with ours.
  const names: string[] = [];
  for (let i = 0; i < 3; i++) {
    const { pv } = await kit.makeVolume(`vol${i}`);
    names.push(await kit.createVa(`va${i}`, ctx.nodes[i % ctx.nodes.length]!, pv));
  }
  await kit.waitAllAttached(names);
  const kinds: [string, string][] = [
    ["VolumeAttachment", "/apis/storage.k8s.io/v1/volumeattachments"],
    ["PersistentVolume", "/api/v1/persistentvolumes"],
    ["CSINode", "/apis/storage.k8s.io/v1/csinodes"],
    ["Lease", "/apis/coordination.k8s.io/v1/leases"],
  ];
  const lines: string[] = [];
  const diffs: string[] = [];
  for (const [kind, path] of kinds) {
    const result = await compareKind(ctx, kind, path);
    assert.ok(result.compared > 0, `no ${kind} compared`);
    lines.push(`${kind} ${result.compared}`);
    diffs.push(...result.ours, ...result.protobufjs);
  }
  console.log(`    decoded from protobuf: ${lines.join(", ")}; ${diffs.length} differences`);
  assert.deepEqual(diffs, []);
  const listed = await watchList(ctx);
  for (const name of names) assert.ok(listed.has(name), `${name} in the protobuf watch list`);
}
