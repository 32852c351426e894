/**
 * KubeClient against MemoryApiServer answering protobuf and answering JSON: every read of the
 * attacher's kinds (get, list, watch, watch list) gives the same objects either way, and error
 * answers the same ApiError.
 */

import assert from "node:assert/strict";
import {
  ApiError,
  CSI_NODES,
  LEASES,
  PERSISTENT_VOLUMES,
  type Resource,
  VOLUME_ATTACHMENTS,
  type WatchEvent,
} from "./api.ts";
import { KubeClient } from "./client.ts";
import { connectionFromKubeconfigs } from "./config.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { kubeProtosMissing, kubeProtosRequired } from "../../testkit/kube_protos.ts";
import type { KubeObject } from "./types.ts";
import {
  csiNode,
  failingVolumeAttachment,
  lease,
  persistentVolume,
  volumeAttachment,
} from "../../testkit/kube_protobuf_fixtures.ts";

const MISSING = kubeProtosMissing();
const IGNORE = MISSING !== undefined && !kubeProtosRequired();

/**
 * A failing VA without its zero-time detach error: the in-memory server's JSON leaves out the
 * `"time": null` that kube-apiserver writes for a zero `metav1.Time` (and the decoder gives).
 */
function failing(): Record<string, unknown> {
  const va = failingVolumeAttachment();
  delete (va.status as Record<string, unknown>).detachError;
  return va;
}

async function clients(server: MemoryApiServer): Promise<[KubeClient, KubeClient]> {
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  return [new KubeClient({ connection }), new KubeClient({ connection }, { protobuf: false })];
}

/** The events of a watch until `count` arrived. */
async function events(
  client: KubeClient,
  res: Resource,
  opts: { resourceVersion: string; sendInitialEvents?: boolean; namespace?: string },
  count: number,
): Promise<WatchEvent<KubeObject>[]> {
  const abort = new AbortController();
  const out: WatchEvent<KubeObject>[] = [];
  for await (
    const ev of client.watch<KubeObject>(res, {
      ...opts,
      timeoutSeconds: 30,
      allowWatchBookmarks: true,
      signal: abort.signal,
    })
  ) {
    out.push(ev);
    if (out.length === count) abort.abort();
  }
  return out;
}

Deno.test({
  name: "KubeClient reads the same objects from protobuf and JSON answers" +
    (IGNORE ? ` (ignored: ${MISSING})` : ""),
  ignore: IGNORE,
  async fn() {
    const server = await MemoryApiServer.start({ bookmarkIntervalMs: 0 });
    const [pb, json] = await clients(server);
    try {
      const strip = (o: Record<string, unknown>) => {
        const { managedFields: _m, resourceVersion: _r, uid: _u, creationTimestamp: _c, ...meta } =
          o.metadata as Record<string, unknown>;
        return { ...o, metadata: meta };
      };
      const seeds: [Resource, Record<string, unknown>][] = [
        [VOLUME_ATTACHMENTS, strip(volumeAttachment())],
        [VOLUME_ATTACHMENTS, strip(failing())],
        [PERSISTENT_VOLUMES, strip(persistentVolume())],
        [CSI_NODES, strip(csiNode())],
        [LEASES, strip(lease())],
      ];
      for (const [res, obj] of seeds) server.create(res, obj as unknown as KubeObject);
      const rv = server.resourceVersion;
      for (const [res, obj] of seeds) {
        const name = (obj.metadata as { name: string }).name;
        const namespace = (obj.metadata as { namespace?: string }).namespace;
        const a = await pb.get(res, name, { namespace });
        assert.deepStrictEqual(a, await json.get(res, name, { namespace }), `get ${name}`);
        assert.equal(a.metadata.managedFields, undefined);
        assert.deepStrictEqual(
          await pb.list(res, { namespace }),
          await json.list(res, { namespace }),
          `list ${res.plural}`,
        );
        const n = seeds.filter(([r]) => r === res).length;
        assert.deepStrictEqual(
          await events(pb, res, { resourceVersion: "", sendInitialEvents: true, namespace }, n + 1),
          await events(
            json,
            res,
            { resourceVersion: "", sendInitialEvents: true, namespace },
            n + 1,
          ),
          `watch list ${res.plural}`,
        );
      }
      // A watch from a resourceVersion: the MODIFIED event of a patch.
      const watching = [
        events(pb, VOLUME_ATTACHMENTS, { resourceVersion: rv }, 1),
        events(json, VOLUME_ATTACHMENTS, { resourceVersion: rv }, 1),
      ];
      await server.whenWatching(2);
      await json.patch(VOLUME_ATTACHMENTS, "csi-0123456789abcdef", {
        type: "merge",
        body: { metadata: { labels: { a: "b" } } },
      });
      const [fromPb, fromJson] = await Promise.all(watching);
      // The patch gave the VA managed fields, which the protobuf decoder skips.
      const va = fromJson![0]!.object as KubeObject;
      assert.ok(Array.isArray(va.metadata.managedFields));
      delete va.metadata.managedFields;
      assert.deepStrictEqual(fromPb, fromJson);
      assert.equal(fromPb![0]!.type, "MODIFIED");
      // Errors: a 404 and a 410 of a too old resourceVersion.
      const failure = (p: Promise<unknown>) =>
        p.then(() => assert.fail("expected an error"), (err: unknown) => {
          assert.ok(err instanceof ApiError);
          return [err.code, err.reason, err.message];
        });
      assert.deepStrictEqual(
        await failure(pb.get(VOLUME_ATTACHMENTS, "nope")),
        await failure(json.get(VOLUME_ATTACHMENTS, "nope")),
      );
      assert.ok(
        server.requests.filter((r) => r.method === "GET").every((r) =>
          r.accept === "application/json" ||
          r.accept === "application/vnd.kubernetes.protobuf, application/json"
        ),
      );
    } finally {
      await pb.close();
      await json.close();
      await server.close();
    }
  },
});
