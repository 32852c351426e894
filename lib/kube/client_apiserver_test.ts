/**
 * KubeClient against MemoryApiServer for every KubeApi method, and client-node's own generated
 * API against the same server (proof that the fake serves other clients faithfully too).
 */

import assert from "node:assert/strict";
import type { KubeConfig } from "@kubernetes/client-node";
import {
  ApiError,
  isNotFound,
  LEASES,
  PERSISTENT_VOLUMES,
  SECRETS,
  VOLUME_ATTACHMENTS,
  type WatchEvent,
} from "./api.ts";
import { KubeClient } from "./client.ts";
import { connectionFromKubeconfigs } from "./config.ts";
import { MemoryApiServer, type MemoryApiServerOptions } from "../../testkit/apiserver/server.ts";
import type { Lease, PersistentVolume, Secret, VolumeAttachment } from "./types.ts";
import { importClientNode } from "../../testkit/client_node.ts";
import { RecordingKubeObserver } from "../../testkit/fakes/recording_kube_observer.ts";

const {
  ApiException,
  CoreV1Api,
  KubeConfig: ClientNodeKubeConfig,
  PatchStrategy,
  setHeaderOptions,
  StorageV1Api,
  Watch,
} = await importClientNode();

const FIN = "external-attacher/csi-test";

function va(name: string, extra: Partial<VolumeAttachment["metadata"]> = {}): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name, ...extra },
    spec: {
      attacher: "csi.example.com",
      nodeName: "node1",
      source: { persistentVolumeName: "pv1" },
    },
  };
}

function pv(name: string, finalizers?: string[]): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, ...(finalizers ? { finalizers } : {}) },
    spec: { csi: { driver: "csi/test", volumeHandle: "handle1" }, accessModes: ["ReadWriteMany"] },
  };
}

interface Env extends AsyncDisposable {
  server: MemoryApiServer;
  client: KubeClient;
  kc: KubeConfig;
}

/** A server and a KubeClient pointed at it. */
async function env(
  serverOptions: MemoryApiServerOptions = {},
  deps: Partial<ConstructorParameters<typeof KubeClient>[0]> = {},
): Promise<Env> {
  const server = await MemoryApiServer.start(serverOptions);
  const kc = new ClientNodeKubeConfig();
  kc.loadFromString(server.kubeconfig());
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const client = new KubeClient({ connection, ...deps }, { userAgent: "csi-attacher/test" });
  return {
    server,
    client,
    kc,
    [Symbol.asyncDispose]: async () => {
      await client.close();
      await server.close();
    },
  };
}

/** Asserts an ApiError with these fields. */
function apiError(code: number, reason: string, message?: string): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof ApiError, `expected ApiError, got ${err}`);
    assert.equal(err.code, code);
    assert.equal(err.reason, reason);
    if (message !== undefined) assert.equal(err.message, message);
    return true;
  };
}

Deno.test("KubeClient create, get and list", async () => {
  await using e = await env();
  const created = await e.client.create(VOLUME_ATTACHMENTS, va("va1"));
  assert.equal(created.metadata.resourceVersion, e.server.resourceVersion);
  assert.deepEqual(created.status, { attached: false });
  await e.client.create(SECRETS, {
    metadata: { name: "s1", namespace: "default" },
    data: { a: "Yg==" },
  });

  // The get is read from protobuf, which skips managedFields; the create's answer is JSON.
  const got = await e.client.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  const { managedFields: _managed, ...createdMeta } = created.metadata;
  assert.deepEqual(got, { ...created, metadata: createdMeta });
  const secret = await e.client.get<Secret>(SECRETS, "s1", { namespace: "default" });
  assert.deepEqual(secret.data, { a: "Yg==" });

  const list = await e.client.list<VolumeAttachment>(VOLUME_ATTACHMENTS);
  assert.equal(list.resourceVersion, e.server.resourceVersion);
  assert.deepEqual(list.items.map((i) => [i.kind, i.apiVersion, i.metadata.name]), [
    ["VolumeAttachment", "storage.k8s.io/v1", "va1"],
  ]);
  const secrets = await e.client.list<Secret>(SECRETS, { namespace: "default" });
  assert.equal(secrets.items.length, 1);
  await assert.rejects(
    e.client.get(SECRETS, "s1"),
    TypeError,
    "a namespaced get needs a namespace",
  );
  await assert.rejects(
    e.client.create(VOLUME_ATTACHMENTS, va("va1")),
    apiError(409, "AlreadyExists", `volumeattachments.storage.k8s.io "va1" already exists`),
  );

  const [create] = e.server.requests;
  assert.equal(create?.verb, "create");
  assert.equal(create?.contentType, "application/json");
  assert.equal(create?.accept, "application/json");
  assert.equal(create?.userAgent, "csi-attacher/test");
  assert.deepEqual(
    e.server.requests.find((r) => r.verb === "list" && r.resource === "secrets")?.path,
    "/api/v1/namespaces/default/secrets",
  );
});

Deno.test("KubeClient 404s carry the real server's messages", async () => {
  await using e = await env();
  for (
    const [res, name, ns, message] of [
      [VOLUME_ATTACHMENTS, "va1", undefined, `volumeattachments.storage.k8s.io "va1" not found`],
      [PERSISTENT_VOLUMES, "pv1", undefined, `persistentvolumes "pv1" not found`],
      [SECRETS, "s1", "default", `secrets "s1" not found`],
    ] as const
  ) {
    await assert.rejects(e.client.get(res, name, { namespace: ns }), (err: unknown) => {
      assert.equal(isNotFound(err), true);
      return apiError(404, "NotFound", message)(err);
    });
  }
});

Deno.test("KubeClient update is optimistic on resourceVersion", async () => {
  await using e = await env();
  const lease = await e.client.create<Lease>(LEASES, {
    metadata: { name: "lock", namespace: "kube-system" },
    spec: { holderIdentity: "a", leaseDurationSeconds: 15 },
  });
  const mine = await e.client.update<Lease>(LEASES, {
    ...lease,
    spec: { ...lease.spec, holderIdentity: "b" },
  });
  assert.equal(mine.spec.holderIdentity, "b");
  assert.notEqual(mine.metadata.resourceVersion, lease.metadata.resourceVersion);
  await assert.rejects(
    e.client.update(LEASES, { ...lease, spec: { holderIdentity: "c" } }),
    (err: unknown) => {
      assert.ok(err instanceof ApiError && err.code === 409);
      return apiError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on leases.coordination.k8s.io "lock": the object has been ` +
          `modified; please apply your changes to the latest version and try again`,
      )(err);
    },
  );
  assert.equal(e.server.requests.at(-1)?.method, "PUT");
  assert.equal(
    e.server.requests.at(-1)?.path,
    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/lock",
  );
});

Deno.test("KubeClient patch: merge and JSON patch, status subresource, failed test op", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  e.server.create(PERSISTENT_VOLUMES, pv("pv1"));

  const withFin = await e.client.patch<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: {
      metadata: {
        annotations: { "csi.alpha.kubernetes.io/node-id": "nodeID1" },
        finalizers: [FIN],
      },
    },
  });
  assert.deepEqual(withFin.metadata.finalizers, [FIN]);

  const attached = await e.client.patch<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: { status: { attached: true, attachmentMetadata: { a: "b" } } },
  }, { subresource: "status" });
  assert.deepEqual(attached.status, { attached: true, attachmentMetadata: { a: "b" } });

  const pvFin = await e.client.patch<PersistentVolume>(PERSISTENT_VOLUMES, "pv1", {
    type: "json",
    body: [
      { op: "test", path: "/metadata/finalizers", value: null },
      { op: "add", path: "/metadata/finalizers", value: [FIN] },
    ],
  });
  assert.deepEqual(pvFin.metadata.finalizers, [FIN]);

  await assert.rejects(
    e.client.patch(PERSISTENT_VOLUMES, "pv1", {
      type: "json",
      body: [
        { op: "test", path: "/metadata/finalizers/0", value: "other" },
        { op: "remove", path: "/metadata/finalizers/0" },
      ],
    }),
    apiError(422, "Invalid", "the server rejected our request due to an error in our request"),
  );
  await assert.rejects(
    e.client.patch(PERSISTENT_VOLUMES, "pv2", { type: "merge", body: {} }),
    apiError(404, "NotFound", `persistentvolumes "pv2" not found`),
  );

  const patches = e.server.requests.filter((r) => r.verb === "patch");
  assert.deepEqual(patches.map((r) => [r.path, r.contentType]), [
    ["/apis/storage.k8s.io/v1/volumeattachments/va1", "application/merge-patch+json"],
    ["/apis/storage.k8s.io/v1/volumeattachments/va1/status", "application/merge-patch+json"],
    ["/api/v1/persistentvolumes/pv1", "application/json-patch+json"],
    ["/api/v1/persistentvolumes/pv1", "application/json-patch+json"],
    ["/api/v1/persistentvolumes/pv2", "application/merge-patch+json"],
  ]);
  assert.deepEqual(patches[1]?.body, {
    status: { attached: true, attachmentMetadata: { a: "b" } },
  });
});

Deno.test("KubeClient delete with finalizers, then removing the finalizer deletes the object", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1", { finalizers: [FIN] }));
  await e.client.delete(VOLUME_ATTACHMENTS, "va1");
  const marked = await e.client.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  assert.ok(marked.metadata.deletionTimestamp);
  const last = await e.client.patch<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: { metadata: { finalizers: null } },
  });
  assert.equal(last.metadata.name, "va1");
  await assert.rejects(e.client.get(VOLUME_ATTACHMENTS, "va1"), (err: unknown) => isNotFound(err));
  // The attacher's status patch after detach: the object is gone, 404.
  await assert.rejects(
    e.client.patch(VOLUME_ATTACHMENTS, "va1", {
      type: "merge",
      body: { status: { attached: false } },
    }, {
      subresource: "status",
    }),
    (err: unknown) => isNotFound(err),
  );
  await e.client.create(SECRETS, { metadata: { name: "s", namespace: "ns" } });
  await e.client.delete(SECRETS, "s", { namespace: "ns" });
  assert.equal(e.server.find(SECRETS, "s", "ns"), undefined);
});

/** Collects the events of a watch, calling `step` after each one. */
async function collect<T extends VolumeAttachment>(
  events: AsyncIterable<WatchEvent<T>>,
  step: (ev: WatchEvent<T>, n: number) => void | Promise<void> = () => {},
): Promise<[string, string | undefined][]> {
  const seen: [string, string | undefined][] = [];
  for await (const ev of events) {
    seen.push([ev.type, ev.type === "ERROR" ? ev.object.reason : ev.object.metadata.name]);
    await step(ev, seen.length);
  }
  return seen;
}

Deno.test("KubeClient watch from a resourceVersion: ADDED, MODIFIED, DELETED and BOOKMARK", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("old"));
  const list = await e.client.list(VOLUME_ATTACHMENTS);
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  const ac = new AbortController();
  let bookmarkRv = "";
  const seen = await collect(
    e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: list.resourceVersion,
      timeoutSeconds: 300,
      allowWatchBookmarks: true,
      signal: ac.signal,
    }),
    async (ev, n) => {
      if (n === 1) {
        await e.client.patch(VOLUME_ATTACHMENTS, "va1", {
          type: "merge",
          body: { status: { attached: true } },
        }, {
          subresource: "status",
        });
      } else if (n === 2) {
        await e.client.delete(VOLUME_ATTACHMENTS, "va1");
      } else if (n === 3) {
        e.server.bookmark();
      } else if (ev.type === "BOOKMARK") {
        bookmarkRv = ev.object.metadata.resourceVersion ?? "";
        e.server.closeWatches();
      }
    },
  );
  assert.deepEqual(seen, [
    ["ADDED", "va1"],
    ["MODIFIED", "va1"],
    ["DELETED", "va1"],
    ["BOOKMARK", undefined],
  ]);
  assert.equal(bookmarkRv, e.server.resourceVersion);
  const watchReq = e.server.requests.find((r) => r.watch);
  assert.deepEqual(watchReq?.query, {
    watch: "true",
    resourceVersion: list.resourceVersion,
    timeoutSeconds: "300",
    allowWatchBookmarks: "true",
  });
});

Deno.test("KubeClient watch yields the 410 ERROR event of a compacted resourceVersion", async () => {
  await using e = await env();
  const first = e.server.create(VOLUME_ATTACHMENTS, va("a"));
  e.server.create(VOLUME_ATTACHMENTS, va("b"));
  e.server.compact();
  const errors: unknown[] = [];
  const seen = await collect(
    e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: first.metadata.resourceVersion ?? "",
      timeoutSeconds: 60,
      allowWatchBookmarks: true,
      signal: new AbortController().signal,
    }),
    (ev) => {
      if (ev.type === "ERROR") errors.push(ev.object);
    },
  );
  assert.deepEqual(seen, [["ERROR", "Expired"]]);
  assert.equal((errors[0] as { code: number }).code, 410);
});

Deno.test("KubeClient watch ends when the server closes watches, and ends silently on abort", async () => {
  await using e = await env();
  const watching = e.server.whenWatching(1);
  const ended = collect(
    e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: e.server.resourceVersion,
      timeoutSeconds: 60,
      allowWatchBookmarks: false,
      signal: new AbortController().signal,
    }),
  );
  await watching;
  e.server.closeWatches();
  assert.deepEqual(await ended, []);

  const ac = new AbortController();
  const aborted = collect(
    e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: "0",
      timeoutSeconds: 60,
      allowWatchBookmarks: false,
      signal: ac.signal,
    }),
    (_ev, n) => {
      if (n === 1) ac.abort();
    },
  );
  await e.server.whenWatching(1);
  e.server.create(VOLUME_ATTACHMENTS, va("x"));
  e.server.create(VOLUME_ATTACHMENTS, va("y"));
  assert.deepEqual(await aborted, [["ADDED", "x"]]);
  while (e.server.watchCount > 0) await new Promise((r) => setTimeout(r, 1));

  const pre = new AbortController();
  pre.abort();
  const none = await collect(
    e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: "0",
      timeoutSeconds: 60,
      allowWatchBookmarks: false,
      signal: pre.signal,
    }),
  );
  assert.deepEqual(none, []);
});

Deno.test("KubeClient awaits the rate limiter before every request but watches", async () => {
  const log: string[] = [];
  let release: () => void = () => {};
  const rateLimiter = {
    take(signal?: AbortSignal): Promise<void> {
      log.push(`take${signal ? "+signal" : ""}`);
      return new Promise((resolve) => {
        release = resolve;
      });
    },
  };
  await using e = await env({}, { rateLimiter });
  e.server.create(PERSISTENT_VOLUMES, pv("pv1"));
  const ac = new AbortController();
  const pending = e.client.get(PERSISTENT_VOLUMES, "pv1", { signal: ac.signal });
  await Promise.resolve();
  assert.deepEqual(log, ["take+signal"]);
  assert.equal(e.server.requests.length, 0, "nothing is sent before the limiter lets it go");
  release();
  await pending;
  assert.equal(e.server.requests.length, 1);

  for (
    const call of [
      () => e.client.list(PERSISTENT_VOLUMES),
      () => e.client.patch(PERSISTENT_VOLUMES, "pv1", { type: "merge", body: {} }),
      () => e.client.delete(PERSISTENT_VOLUMES, "pv1"),
    ]
  ) {
    const before = log.length;
    const p = call();
    await Promise.resolve();
    assert.equal(log.length, before + 1);
    release();
    await p;
  }
  const takes = log.length;
  const watching = e.server.whenWatching(1);
  const done = collect(
    e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: "0",
      timeoutSeconds: 60,
      allowWatchBookmarks: false,
      signal: new AbortController().signal,
    }),
  );
  await watching;
  e.server.closeWatches();
  await done;
  assert.equal(log.length, takes, "watches are not rate limited");
});

Deno.test("KubeClient reports each try of a request to its observer", async () => {
  const observer = new RecordingKubeObserver();
  const infos = observer.tries;
  await using e = await env({}, { observer });
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  await e.client.patch(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: { status: { attached: true } },
  }, {
    subresource: "status",
  });
  await e.client.get(VOLUME_ATTACHMENTS, "nope").catch((err: unknown) => err);
  assert.deepEqual(
    infos.map(({ seconds: _s, host: _h, ...rest }) => rest),
    [
      {
        method: "PATCH",
        verb: "patch",
        resource: "volumeattachments",
        subresource: "status",
        code: 200,
      },
      { method: "GET", verb: "get", resource: "volumeattachments", subresource: "", code: 404 },
    ],
  );
  assert.ok(infos.every((i) => i.seconds >= 0));
  assert.ok(infos.every((i) => i.host === new URL(e.server.url).host));
});

Deno.test("KubeClient surfaces injected faults as the real errors", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("pv1-node1"));
  e.server.failNext({ verb: "patch", resource: "volumeattachments", status: 403 });
  await assert.rejects(
    e.client.patch(VOLUME_ATTACHMENTS, "pv1-node1", {
      type: "merge",
      body: { metadata: { finalizers: [FIN] } },
    }),
    apiError(
      403,
      "Forbidden",
      `volumeattachments.storage.k8s.io "pv1-node1" is forbidden: Mock error`,
    ),
  );
  assert.equal(e.server.get(VOLUME_ATTACHMENTS, "pv1-node1").metadata.finalizers, undefined);

  e.server.failNext({ verb: "patch", status: 500, message: "etcd timeout", applyChange: true });
  await assert.rejects(
    e.client.patch(VOLUME_ATTACHMENTS, "pv1-node1", {
      type: "merge",
      body: { metadata: { finalizers: [FIN] } },
    }),
    apiError(500, "InternalError", "Internal error occurred: etcd timeout"),
  );
  assert.deepEqual(e.server.get(VOLUME_ATTACHMENTS, "pv1-node1").metadata.finalizers, [FIN]);

  e.server.failNext({ verb: "watch", status: 403, message: "no watch" });
  await assert.rejects(
    collect(e.client.watch<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      resourceVersion: "0",
      timeoutSeconds: 60,
      allowWatchBookmarks: false,
      signal: new AbortController().signal,
    })),
    apiError(403, "Forbidden", `volumeattachments.storage.k8s.io is forbidden: no watch`),
  );
});

Deno.test("client-node's generated StorageV1Api and CoreV1Api work against MemoryApiServer", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("va1"));
  e.server.create(VOLUME_ATTACHMENTS, va("va2"));
  const storage = e.kc.makeApiClient(StorageV1Api);
  const list = await storage.listVolumeAttachment();
  assert.deepEqual(list.items.map((i) => i.metadata?.name), ["va1", "va2"]);
  assert.equal(list.items[0]?.spec.attacher, "csi.example.com");
  assert.equal(list.metadata?.resourceVersion, e.server.resourceVersion);

  const patched = await storage.patchVolumeAttachmentStatus(
    { name: "va1", body: { status: { attached: true, attachmentMetadata: { k: "v" } } } },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );
  assert.equal(patched.status?.attached, true);
  assert.deepEqual(patched.status?.attachmentMetadata, { k: "v" });
  const req = e.server.requests.at(-1);
  assert.equal(req?.path, "/apis/storage.k8s.io/v1/volumeattachments/va1/status");
  assert.equal(req?.contentType, "application/merge-patch+json");
  assert.equal(e.server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1").status?.attached, true);

  const jsonPatched = await storage.patchVolumeAttachment(
    { name: "va2", body: [{ op: "add", path: "/metadata/finalizers", value: [FIN] }] },
    setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
  );
  assert.deepEqual(jsonPatched.metadata?.finalizers, [FIN]);

  const core = e.kc.makeApiClient(CoreV1Api);
  await assert.rejects(
    core.readNamespacedSecret({ name: "s1", namespace: "default" }),
    (err: unknown) => err instanceof ApiException && err.code === 404,
  );
});

Deno.test("client-node's Watch streams from MemoryApiServer", async () => {
  await using e = await env();
  e.server.create(VOLUME_ATTACHMENTS, va("a"));
  const seen: string[] = [];
  const four = Promise.withResolvers<void>();
  const done = Promise.withResolvers<unknown>();
  const watching = e.server.whenWatching(1);
  await new Watch(e.kc).watch(
    "/apis/storage.k8s.io/v1/volumeattachments",
    { resourceVersion: "0", allowWatchBookmarks: true },
    (type: string, obj: { metadata?: { name?: string } }) => {
      seen.push(`${type} ${obj.metadata?.name ?? ""}`);
      if (seen.length === 4) four.resolve();
    },
    (err: unknown) => done.resolve(err),
  );
  await watching;
  e.server.create(VOLUME_ATTACHMENTS, va("b"));
  e.server.bookmark();
  await four.promise;
  e.server.closeWatches();
  assert.equal(await done.promise, null, "a stream the server ends is not an error");
  // A watch from resourceVersion 0 with bookmarks is a watch list on a v1.34 server: its initial
  // events end with a bookmark.
  assert.deepEqual(seen, ["ADDED a", "BOOKMARK ", "ADDED b", "BOOKMARK "]);
});

Deno.test("KubeClient watch aborted while its request is in flight ends at once", async () => {
  await using e = await env();
  // The server holds the watch request; the caller gives up before the answer comes.
  e.server.failNext({ verb: "watch", delayMs: 300 });
  const stop = new AbortController();
  const events: unknown[] = [];
  const done = (async () => {
    for await (
      const ev of e.client.watch(VOLUME_ATTACHMENTS, {
        resourceVersion: e.server.resourceVersion,
        timeoutSeconds: 60,
        allowWatchBookmarks: true,
        signal: stop.signal,
      })
    ) events.push(ev);
  })();
  setTimeout(() => stop.abort(), 20);
  await done;
  assert.deepEqual(events, []);
  // The delayed answer arrives after the abort; the iteration must not be waiting for it.
  await new Promise((resolve) => setTimeout(resolve, 400));
});
