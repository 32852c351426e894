import assert from "node:assert/strict";
import { FakeClock } from "../fakes/fake_clock.ts";
import { LEASES, PERSISTENT_VOLUMES, SECRETS, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { type ApiServerEvent, MemoryApiServer } from "./server.ts";
import { StatusError } from "./status_errors.ts";
import { plainVolumeAttachment } from "../harness/client_fixtures.ts";
import type {
  KubeObject,
  Lease,
  PersistentVolume,
  VolumeAttachment,
} from "../../lib/kube/types.ts";

const VA_PATH = "/apis/storage.k8s.io/v1/volumeattachments";
const PV_PATH = "/api/v1/persistentvolumes";

function va(name: string, extra: Partial<VolumeAttachment> = {}): VolumeAttachment {
  return { ...plainVolumeAttachment(name), ...extra };
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/** One request over HTTP; the body is parsed as JSON. */
async function call(
  server: MemoryApiServer,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<Answer> {
  const res = await fetch(server.url + path, {
    method,
    headers: body === undefined ? {} : { "content-type": contentType },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** The lines of a watch response, parsed. */
async function* lines(res: Response): AsyncGenerator<Record<string, unknown>> {
  assert.ok(res.body);
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    let i = buf.indexOf("\n");
    while (i >= 0) {
      yield JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      i = buf.indexOf("\n");
    }
  }
  assert.equal(buf, "", "the stream ends with a complete line");
}

/** Reads `n` events of a watch stream. */
async function take(
  it: AsyncGenerator<Record<string, unknown>>,
  n: number,
): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  while (out.length < n) {
    const next = await it.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}

function meta(ev: Record<string, unknown>): Record<string, unknown> {
  const obj = ev.object as KubeObject;
  return obj.metadata;
}

Deno.test("MemoryApiServer answers 404 with the real server's Status", async () => {
  await using server = await MemoryApiServer.start();
  const va404 = await call(server, "GET", `${VA_PATH}/va1`);
  assert.equal(va404.status, 404);
  assert.deepEqual(va404.body, {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: `volumeattachments.storage.k8s.io "va1" not found`,
    reason: "NotFound",
    details: { name: "va1", group: "storage.k8s.io", kind: "volumeattachments" },
    code: 404,
  });
  const pv404 = await call(server, "GET", `${PV_PATH}/pv1`);
  assert.equal(pv404.body.message, `persistentvolumes "pv1" not found`);
  assert.deepEqual(pv404.body.details, { name: "pv1", kind: "persistentvolumes" });
  const s404 = await call(server, "GET", "/api/v1/namespaces/default/secrets/s1");
  assert.equal(s404.body.message, `secrets "s1" not found`);
  const unknown = await call(server, "GET", "/apis/storage.k8s.io/v1/foos");
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.message, "the server could not find the requested resource");
  // An API group the server does not have: the real server (v1.34) answers in plain text.
  for (const path of ["/apis/nothing.example.com/v1/foos", "/apis/storage.k8s.io/v9/x", "/x"]) {
    const res = await fetch(server.url + path);
    assert.equal(res.status, 404, path);
    assert.equal(res.headers.get("content-type"), "text/plain; charset=utf-8");
    assert.equal((await res.text()).trim(), "404 page not found");
  }
});

Deno.test("MemoryApiServer POST sets uid, creationTimestamp, resourceVersion and resets status", async () => {
  const clock = new FakeClock(Date.UTC(2024, 0, 2, 3, 4, 5, 678));
  await using server = await MemoryApiServer.start({ clock });
  const rv0 = Number(server.resourceVersion);
  const created = await call(
    server,
    "POST",
    VA_PATH,
    va("va1", { status: { attached: true } }),
  );
  assert.equal(created.status, 201);
  const m = created.body.metadata as Record<string, unknown>;
  assert.equal(m.resourceVersion, String(rv0 + 1));
  assert.equal(m.creationTimestamp, "2024-01-02T03:04:05Z");
  assert.match(String(m.uid), /^[0-9a-f-]{36}$/);
  assert.deepEqual(created.body.status, { attached: false }, "a create cannot set status");
  assert.equal(created.body.kind, "VolumeAttachment");

  const again = await call(server, "POST", VA_PATH, va("va1"));
  assert.equal(again.status, 409);
  assert.equal(again.body.reason, "AlreadyExists");
  assert.equal(again.body.message, `volumeattachments.storage.k8s.io "va1" already exists`);

  const pv = await call(server, "POST", PV_PATH, {
    metadata: { name: "pv1", finalizers: [] },
    spec: {},
  });
  // Real (v1.34.4): status {phase: Pending, lastPhaseTransitionTime: <now>}.
  assert.deepEqual(pv.body.status, {
    phase: "Pending",
    lastPhaseTransitionTime: "2024-01-02T03:04:05Z",
  });
  assert.equal((pv.body.metadata as Record<string, unknown>).finalizers, undefined);
  // Real: SetDefaults_PersistentVolume fills reclaim policy and volume mode.
  assert.deepEqual(pv.body.spec, {
    persistentVolumeReclaimPolicy: "Retain",
    volumeMode: "Filesystem",
  });
  const kept = await call(server, "POST", PV_PATH, {
    metadata: { name: "pv2" },
    spec: { persistentVolumeReclaimPolicy: "Delete", volumeMode: "Block" },
  });
  assert.deepEqual(kept.body.spec, {
    persistentVolumeReclaimPolicy: "Delete",
    volumeMode: "Block",
  });
  // Seeding stores the object as given: no defaults.
  const seeded = server.create(PERSISTENT_VOLUMES, { metadata: { name: "pv3" }, spec: {} });
  assert.deepEqual(seeded.spec, {});
});

Deno.test("MemoryApiServer LIST has kind, apiVersion and resourceVersion, items sorted, without kind", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("b"));
  server.create(VOLUME_ATTACHMENTS, va("a"));
  server.create(PERSISTENT_VOLUMES, { metadata: { name: "pv1" }, spec: {} });
  const list = await call(server, "GET", VA_PATH);
  assert.equal(list.body.kind, "VolumeAttachmentList");
  assert.equal(list.body.apiVersion, "storage.k8s.io/v1");
  assert.deepEqual(list.body.metadata, { resourceVersion: server.resourceVersion });
  const items = list.body.items as VolumeAttachment[];
  assert.deepEqual(items.map((i) => i.metadata.name), ["a", "b"]);
  // The real server (v1.34) answers `{"kind":"VolumeAttachmentList","apiVersion":
  // "storage.k8s.io/v1","metadata":{...},"items":[{"metadata":{...},"spec":{...},...}]}`: the
  // items have no kind and no apiVersion.
  for (const item of items) {
    assert.equal("kind" in item, false);
    assert.equal("apiVersion" in item, false);
  }
  assert.equal(server.get(VOLUME_ATTACHMENTS, "a").kind, "VolumeAttachment", "stored with kind");
});

Deno.test("MemoryApiServer PUT with a stale resourceVersion answers 409 Conflict", async () => {
  await using server = await MemoryApiServer.start();
  const lease = server.create<Lease>(LEASES, {
    metadata: { name: "lock", namespace: "ns1" },
    spec: { holderIdentity: "a" },
  });
  const path = "/apis/coordination.k8s.io/v1/namespaces/ns1/leases/lock";
  const ok = await call(server, "PUT", path, { ...lease, spec: { holderIdentity: "b" } });
  assert.equal(ok.status, 200);
  const stale = await call(server, "PUT", path, { ...lease, spec: { holderIdentity: "c" } });
  assert.equal(stale.status, 409);
  assert.equal(stale.body.reason, "Conflict");
  assert.equal(
    stale.body.message,
    `Operation cannot be fulfilled on leases.coordination.k8s.io "lock": the object has been ` +
      `modified; please apply your changes to the latest version and try again`,
  );
  const unconditional = await call(server, "PUT", path, {
    metadata: { name: "lock", namespace: "ns1" },
    spec: { holderIdentity: "d" },
  });
  // Leases take no unconditional update (leaseStrategy.AllowUnconditionalUpdate is false).
  assert.equal(unconditional.status, 422, "no resourceVersion");
  assert.equal(
    unconditional.body.message,
    `leases.coordination.k8s.io "lock" is invalid: metadata.resourceVersion: Invalid value: 0: ` +
      `must be specified for an update`,
  );
  assert.equal(server.get<Lease>(LEASES, "lock", "ns1").spec.holderIdentity, "b");
  const wrongName = await call(server, "PUT", path, { metadata: { name: "x" }, spec: {} });
  assert.equal(wrongName.status, 400);
});

Deno.test("MemoryApiServer PUT without resourceVersion answers 422 where the real server does", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("diff-va3"));
  server.create(PERSISTENT_VOLUMES, { metadata: { name: "pv1" }, spec: {} });
  const res = await call(server, "PUT", `${VA_PATH}/diff-va3`, va("diff-va3"));
  // The real server (v1.34) names the resource, not the kind, in this message.
  assert.equal(res.status, 422);
  assert.equal(res.body.reason, "Invalid");
  assert.equal(
    res.body.message,
    `volumeattachments.storage.k8s.io "diff-va3" is invalid: metadata.resourceVersion: ` +
      `Invalid value: 0: must be specified for an update`,
  );
  assert.deepEqual(res.body.details, {
    name: "diff-va3",
    group: "storage.k8s.io",
    kind: "volumeattachments",
    causes: [{
      reason: "FieldValueInvalid",
      field: "metadata.resourceVersion",
      message: "Invalid value: 0: must be specified for an update",
    }],
  });
  assert.throws(
    () => server.update(VOLUME_ATTACHMENTS, va("diff-va3")),
    (err) => err instanceof StatusError && err.code === 422,
  );
  // PersistentVolumes take unconditional updates.
  const pv = await call(server, "PUT", `${PV_PATH}/pv1`, {
    metadata: { name: "pv1" },
    spec: { storageClassName: "x" },
  });
  assert.equal(pv.status, 200);
});

Deno.test("MemoryApiServer refuses Lease times that are not MicroTime, as the real server does", async () => {
  await using server = await MemoryApiServer.start();
  const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
  const lease = (name: string, renewTime: string) => ({
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name },
    spec: { holderIdentity: "a", leaseDurationSeconds: 15, renewTime },
  });
  const bad = await call(server, "POST", path, lease("diff-lease1", "2026-01-01T00:00:00.000Z"));
  // The real server (v1.34): 400 BadRequest with this message.
  assert.equal(bad.status, 400);
  assert.equal(bad.body.reason, "BadRequest");
  assert.equal(
    bad.body.message,
    `Lease in version "v1" cannot be handled as a Lease: parsing time ` +
      `"2026-01-01T00:00:00.000Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".000Z" ` +
      `as ".000000"`,
  );
  assert.equal(server.find(LEASES, "diff-lease1", "default"), undefined);

  const good = await call(
    server,
    "POST",
    path,
    lease("diff-lease2", "2026-01-01T00:00:00.000000Z"),
  );
  assert.equal(good.status, 201);
  const created = good.body as unknown as Lease;
  const put = await call(server, "PUT", `${path}/diff-lease2`, {
    ...created,
    spec: { ...created.spec, acquireTime: "2026-01-01T00:00:00Z" },
  });
  assert.equal(put.status, 400);
  assert.match(String(put.body.message), /cannot parse "Z" as "\.000000"$/);
  const patch = await call(
    server,
    "PATCH",
    `${path}/diff-lease2`,
    { spec: { renewTime: "2026-01-01T00:00:00.123456+02:00" } },
    "application/merge-patch+json",
  );
  assert.equal(patch.status, 200);
  const badPatch = await call(
    server,
    "PATCH",
    `${path}/diff-lease2`,
    { spec: { renewTime: "2026-01-01T00:00:00.1234567Z" } },
    "application/merge-patch+json",
  );
  assert.equal(badPatch.status, 400);
  assert.match(String(badPatch.body.message), /cannot parse "7Z" as "Z07:00"$/);
});

Deno.test("MemoryApiServer writes over HTTP record managedFields per manager", async () => {
  const clock = new FakeClock(Date.UTC(2024, 5, 1));
  await using server = await MemoryApiServer.start({ clock });
  const send = (method: string, path: string, body: unknown, agent: string, type?: string) =>
    fetch(server.url + path, {
      method,
      headers: { "content-type": type ?? "application/json", "user-agent": agent },
      body: JSON.stringify(body),
    }).then((r) => r.json() as Promise<VolumeAttachment>);
  // The real server writes, e.g. for `csi-attacher/v4.8.0 (linux/amd64) kubernetes/abc`:
  // {"manager":"csi-attacher","operation":"Update","apiVersion":"storage.k8s.io/v1",
  //  "time":"...","fieldsType":"FieldsV1","fieldsV1":{...}} (plus "subresource":"status").
  const created = await send("POST", VA_PATH, va("va1"), "kubectl/v1.34.4 (linux/amd64)");
  const entry = (manager: string, time: string, subresource?: string) => ({
    manager,
    operation: "Update",
    apiVersion: "storage.k8s.io/v1",
    time,
    fieldsType: "FieldsV1",
    fieldsV1: {},
    ...(subresource === undefined ? {} : { subresource }),
  });
  assert.deepEqual(created.metadata.managedFields, [entry("kubectl", "2024-06-01T00:00:00Z")]);
  clock.advance(5000);
  const merge = "application/merge-patch+json";
  const agent = "csi-attacher/v4.8.0 (linux/amd64) kubernetes/abc";
  await send("PATCH", `${VA_PATH}/va1/status`, { status: { attached: true } }, agent, merge);
  clock.advance(5000);
  const patched = await send(
    "PATCH",
    `${VA_PATH}/va1`,
    { metadata: { labels: { a: "b" } } },
    agent,
    merge,
  );
  assert.deepEqual(patched.metadata.managedFields, [
    entry("kubectl", "2024-06-01T00:00:00Z"),
    entry("csi-attacher", "2024-06-01T00:00:05Z", "status"),
    entry("csi-attacher", "2024-06-01T00:00:10Z"),
  ]);
  clock.advance(5000);
  const { managedFields: _m, ...withoutFields } = patched.metadata;
  const put = await send("PUT", `${VA_PATH}/va1?fieldManager=mine`, {
    ...patched,
    metadata: { ...withoutFields, labels: { a: "c" } },
  }, agent);
  assert.equal(put.metadata.managedFields?.length, 4, "a PUT without managedFields keeps them");
  assert.deepEqual(put.metadata.managedFields?.[3], entry("mine", "2024-06-01T00:00:15Z"));
  const noop = await send("PATCH", `${VA_PATH}/va1`, {}, "other/1", merge);
  assert.equal(noop.metadata.resourceVersion, put.metadata.resourceVersion, "still a no-op");
  assert.equal(noop.metadata.managedFields?.length, 4);
});

Deno.test("MemoryApiServer PATCH takes merge and JSON patches, refuses other content types", async () => {
  await using server = await MemoryApiServer.start();
  server.create(PERSISTENT_VOLUMES, { metadata: { name: "pv1" }, spec: { capacity: {} } });
  const merged = await call(
    server,
    "PATCH",
    `${PV_PATH}/pv1`,
    { metadata: { labels: { a: "b" } } },
    "application/merge-patch+json",
  );
  assert.equal(merged.status, 200);
  assert.deepEqual((merged.body.metadata as Record<string, unknown>).labels, { a: "b" });
  const fin = "external-attacher/csi-test";
  const json = await call(server, "PATCH", `${PV_PATH}/pv1`, [
    { op: "test", path: "/metadata/finalizers", value: null },
    { op: "add", path: "/metadata/finalizers", value: [fin] },
  ], "application/json-patch+json");
  assert.equal(json.status, 200);
  assert.deepEqual((json.body.metadata as Record<string, unknown>).finalizers, [fin]);
  // Real (v1.34.4): a strategic merge patch answers 200 and applies.
  const smp = await call(
    server,
    "PATCH",
    `${PV_PATH}/pv1`,
    { metadata: { labels: { smp: "yes" } } },
    "application/strategic-merge-patch+json",
  );
  assert.equal(smp.status, 200);
  assert.deepEqual((smp.body.metadata as Record<string, unknown>).labels, { a: "b", smp: "yes" });
  // Real: a patch type no route consumes is refused by the router: 415 `415: Unsupported Media
  // Type` with empty details.
  for (const type of ["text/plain", "application/yaml"]) {
    const other = await call(server, "PATCH", `${PV_PATH}/pv1`, {}, type);
    assert.equal(other.status, 415);
    assert.deepEqual(
      { message: other.body.message, reason: other.body.reason, details: other.body.details },
      { message: "415: Unsupported Media Type", reason: "UnsupportedMediaType", details: {} },
    );
  }
  // Real: 400 `error decoding patch: json: cannot unmarshal object into Go value of type
  // []handlers.jsonPatchOp`.
  const badDoc = await call(
    server,
    "PATCH",
    `${PV_PATH}/pv1`,
    { op: "add" },
    "application/json-patch+json",
  );
  assert.equal(badDoc.status, 400);
  assert.equal(
    badDoc.body.message,
    "error decoding patch: json: cannot unmarshal object into Go value of type " +
      "[]handlers.jsonPatchOp",
  );
  // Real (v1.37.2): 400 `invalid JSON patch` (up to v1.36: `error decoding patch: invalid
  // character 'n' looking for beginning of object key string`).
  const notJson = await fetch(`${server.url}${PV_PATH}/pv1`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json" },
    body: "{not json",
  });
  assert.equal(notJson.status, 400);
  assert.equal((await notJson.json()).message, "invalid JSON patch");
});

Deno.test("MemoryApiServer answers a failed JSON patch test with 422 as the real server does", async () => {
  await using server = await MemoryApiServer.start();
  const pv = server.create<KubeObject>(PERSISTENT_VOLUMES, {
    metadata: { name: "pv1", finalizers: ["x"] },
  });
  for (
    const patch of [
      [{ op: "test", path: "/metadata/finalizers", value: null }],
      [{ op: "remove", path: "/metadata/annotations/missing" }],
    ]
  ) {
    const res = await call(server, "PATCH", `${PV_PATH}/pv1`, patch, "application/json-patch+json");
    assert.equal(res.status, 422);
    assert.deepEqual(res.body, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "the server rejected our request due to an error in our request",
      reason: "Invalid",
      details: {},
      code: 422,
    });
  }
  assert.equal(
    server.get(PERSISTENT_VOLUMES, "pv1").metadata.resourceVersion,
    pv.metadata.resourceVersion,
  );
});

Deno.test("MemoryApiServer /status changes only status; the main resource ignores status", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("va1", { status: { attached: false } }));
  const statusPatch = await call(server, "PATCH", `${VA_PATH}/va1/status`, {
    metadata: { annotations: { a: "b" } },
    spec: { nodeName: "other" },
    status: { attached: true, attachmentMetadata: { k: "v" } },
  }, "application/merge-patch+json");
  assert.equal(statusPatch.status, 200);
  const after = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  assert.deepEqual(after.status, { attached: true, attachmentMetadata: { k: "v" } });
  assert.equal(after.spec.nodeName, "node1");
  assert.equal(after.metadata.annotations, undefined);

  await call(server, "PATCH", `${VA_PATH}/va1`, {
    metadata: { finalizers: ["f"] },
    status: { attached: false },
  }, "application/merge-patch+json");
  const main = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  assert.deepEqual(main.metadata.finalizers, ["f"]);
  assert.equal(main.status?.attached, true, "status is ignored on the main resource");

  const noStatus = await call(server, "GET", "/apis/storage.k8s.io/v1/csinodes/n1/status");
  assert.equal(noStatus.status, 404, "csinodes have no status subresource");
});

Deno.test("MemoryApiServer patches cannot change name or timestamps", async () => {
  await using server = await MemoryApiServer.start();
  const orig = server.create(VOLUME_ATTACHMENTS, va("va1"));
  const res = await call(server, "PATCH", `${VA_PATH}/va1`, {
    metadata: {
      name: "other",
      creationTimestamp: "2000-01-01T00:00:00Z",
      deletionTimestamp: "2000-01-01T00:00:00Z",
      labels: { l: "1" },
    },
  }, "application/merge-patch+json");
  const m = res.body.metadata as Record<string, unknown>;
  assert.equal(m.name, "va1");
  assert.equal(m.uid, orig.metadata.uid);
  assert.equal(m.creationTimestamp, orig.metadata.creationTimestamp);
  assert.equal(m.deletionTimestamp, undefined);
  assert.deepEqual(m.labels, { l: "1" });
});

Deno.test("MemoryApiServer merge patch with a stale resourceVersion gives 409", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("va1"));
  const res = await call(server, "PATCH", `${VA_PATH}/va1`, {
    metadata: { resourceVersion: "1", finalizers: ["f"] },
  }, "application/merge-patch+json");
  assert.equal(res.status, 409);
  assert.equal(server.get(VOLUME_ATTACHMENTS, "va1").metadata.finalizers, undefined);
});

Deno.test("MemoryApiServer a write that changes nothing keeps the resourceVersion and emits nothing", async () => {
  await using server = await MemoryApiServer.start();
  const orig = server.create(VOLUME_ATTACHMENTS, va("va1", { status: { attached: true } }));
  const events: ApiServerEvent[] = [];
  using _sub = { [Symbol.dispose]: server.onEvent((ev) => events.push(ev)) };
  const res = await call(
    server,
    "PATCH",
    `${VA_PATH}/va1/status`,
    {},
    "application/merge-patch+json",
  );
  assert.equal(res.status, 200);
  assert.equal(
    (res.body.metadata as Record<string, unknown>).resourceVersion,
    orig.metadata.resourceVersion,
  );
  server.patch(VOLUME_ATTACHMENTS, "va1", { type: "merge", body: { status: { attached: true } } }, {
    subresource: "status",
  });
  assert.deepEqual(events, []);
});

Deno.test("MemoryApiServer DELETE with finalizers marks, removing the last finalizer deletes", async () => {
  const clock = new FakeClock(Date.UTC(2024, 5, 1));
  await using server = await MemoryApiServer.start({ clock });
  const created = server.create(
    VOLUME_ATTACHMENTS,
    va("va1", { metadata: { name: "va1", finalizers: ["f1", "f2"] } }),
  );
  const events: ApiServerEvent[] = [];
  using _sub = { [Symbol.dispose]: server.onEvent((ev) => events.push(ev)) };

  const del = await call(server, "DELETE", `${VA_PATH}/va1`);
  assert.equal(del.status, 200);
  const marked = server.get(VOLUME_ATTACHMENTS, "va1");
  assert.equal(marked.metadata.deletionTimestamp, "2024-06-01T00:00:00Z");
  assert.equal(marked.metadata.deletionGracePeriodSeconds, 0);
  assert.deepEqual(events.map((e) => e.type), ["MODIFIED"]);

  const again = await call(server, "DELETE", `${VA_PATH}/va1`);
  assert.equal(again.status, 200);
  assert.equal(events.length, 1, "a second delete changes nothing");

  const adding = await call(server, "PATCH", `${VA_PATH}/va1`, {
    metadata: { finalizers: ["f1", "f2", "new"] },
  }, "application/merge-patch+json");
  assert.equal(adding.status, 422);
  assert.equal(
    adding.body.message,
    `VolumeAttachment.storage.k8s.io "va1" is invalid: metadata.finalizers: Forbidden: no new ` +
      `finalizers can be added if the object is being deleted, found new finalizers []string{"new"}`,
  );
  assert.deepEqual(adding.body.details, {
    name: "va1",
    group: "storage.k8s.io",
    kind: "VolumeAttachment",
    causes: [{
      reason: "FieldValueForbidden",
      field: "metadata.finalizers",
      message: `Forbidden: no new finalizers can be added if the object is being deleted, found ` +
        `new finalizers []string{"new"}`,
    }],
  });

  server.patch(VOLUME_ATTACHMENTS, "va1", {
    type: "json",
    body: [{ op: "remove", path: "/metadata/finalizers/0" }],
  });
  const stored = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  assert.deepEqual(stored.metadata.finalizers, ["f2"]);
  const storedRv = stored.metadata.resourceVersion;
  const last = await call(
    server,
    "PATCH",
    `${VA_PATH}/va1`,
    { metadata: { finalizers: null } },
    "application/merge-patch+json",
  );
  assert.equal(last.status, 200);
  assert.equal(server.find(VOLUME_ATTACHMENTS, "va1"), undefined);
  assert.deepEqual(events.map((e) => e.type), ["MODIFIED", "MODIFIED", "DELETED"]);
  const deleted = events[2]!;
  assert.equal(deleted.resourceVersion, server.resourceVersion);
  assert.deepEqual(deleted.object.metadata.finalizers, ["f2"], "the last stored state");
  assert.equal(deleted.object.metadata.uid, created.metadata.uid);
  // The real server (v1.34) answers this PATCH with the object without finalizers and the
  // resourceVersion it was stored with; its DELETED event carries the stored state instead.
  const { finalizers: _f, resourceVersion: _rv, ...deletedMeta } = deleted.object.metadata;
  const { managedFields, ...lastMeta } = last.body.metadata as KubeObject["metadata"];
  assert.deepEqual(lastMeta, { ...deletedMeta, resourceVersion: storedRv });
  assert.equal(managedFields?.length, 1);
  assert.equal(last.body.kind, "VolumeAttachment");
  assert.deepEqual(last.body.spec, stored.spec);
});

Deno.test("MemoryApiServer DELETE without finalizers removes the object", async () => {
  await using server = await MemoryApiServer.start();
  server.create(SECRETS, { metadata: { name: "s1", namespace: "default" }, data: {} });
  const del = await call(server, "DELETE", "/api/v1/namespaces/default/secrets/s1");
  assert.equal(del.status, 200);
  assert.equal(server.find(SECRETS, "s1", "default"), undefined);
  const gone = await call(server, "DELETE", "/api/v1/namespaces/default/secrets/s1");
  assert.equal(gone.status, 404);
});

Deno.test("MemoryApiServer stores objects as Go would serialize them", async () => {
  await using server = await MemoryApiServer.start();
  server.create(
    VOLUME_ATTACHMENTS,
    va("va1", { status: { attached: true, attachError: { message: "x" } } }),
  );
  await call(server, "PATCH", `${VA_PATH}/va1`, {
    metadata: { annotations: {}, finalizers: [] },
  }, "application/merge-patch+json");
  await call(server, "PATCH", `${VA_PATH}/va1/status`, {
    status: { attachError: null, attachmentMetadata: null },
  }, "application/merge-patch+json");
  const obj = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  assert.deepEqual(obj.status, { attached: true });
  assert.equal("annotations" in obj.metadata, false);
  assert.equal("finalizers" in obj.metadata, false);
});

Deno.test("MemoryApiServer serves namespaced objects per namespace", async () => {
  await using server = await MemoryApiServer.start();
  server.create(SECRETS, { metadata: { name: "s", namespace: "a" }, data: { k: "dg==" } });
  server.create(SECRETS, { metadata: { name: "s", namespace: "b" } });
  const inA = await call(server, "GET", "/api/v1/namespaces/a/secrets");
  assert.equal((inA.body.items as unknown[]).length, 1);
  const all = await call(server, "GET", "/api/v1/secrets");
  assert.equal((all.body.items as unknown[]).length, 2);
  const one = await call(server, "GET", "/api/v1/namespaces/a/secrets/s");
  assert.deepEqual(one.body.data, { k: "dg==" });
  const created = await call(server, "POST", "/api/v1/namespaces/c/secrets", {
    metadata: { generateName: "gen-" },
  });
  assert.equal(created.status, 201);
  const m = created.body.metadata as Record<string, unknown>;
  assert.match(String(m.name), /^gen-[a-z0-9]{5}$/);
  assert.equal(m.namespace, "c");
  const mismatch = await call(server, "POST", "/api/v1/namespaces/c/secrets", {
    metadata: { name: "x", namespace: "d" },
  });
  assert.equal(mismatch.status, 400);
  const clusterPath = await call(server, "GET", "/api/v1/namespaces/a/persistentvolumes");
  assert.equal(clusterPath.status, 404);
});

Deno.test("MemoryApiServer records requests", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("va1"));
  await call(server, "PATCH", `${VA_PATH}/va1/status?fieldManager=x`, {
    status: { attached: true },
  }, "application/merge-patch+json; charset=utf-8");
  await call(server, "GET", "/api/v1/namespaces/ns/secrets/s1");
  const [patch, get] = server.requests;
  assert.deepEqual(patch, {
    method: "PATCH",
    path: `${VA_PATH}/va1/status`,
    verb: "patch",
    resource: "volumeattachments",
    name: "va1",
    subresource: "status",
    namespace: "",
    query: { fieldManager: "x" },
    contentType: "application/merge-patch+json",
    body: { status: { attached: true } },
    watch: false,
    userAgent: patch?.userAgent ?? "",
    accept: "*/*",
    responseType: "application/json",
  });
  assert.equal(get?.verb, "get");
  assert.equal(get?.namespace, "ns");
  server.clearRequests();
  assert.deepEqual(server.requests, []);
});

Deno.test("MemoryApiServer failNext answers with the real error texts without applying", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("pv1-node1"));
  server.failNext({ verb: "patch", resource: "volumeattachments", status: 403 });
  const forbidden = await call(server, "PATCH", `${VA_PATH}/pv1-node1`, {
    metadata: { finalizers: ["f"] },
  }, "application/merge-patch+json");
  assert.equal(forbidden.status, 403);
  assert.equal(forbidden.body.reason, "Forbidden");
  assert.equal(
    forbidden.body.message,
    `volumeattachments.storage.k8s.io "pv1-node1" is forbidden: Mock error`,
  );
  assert.equal(server.get(VOLUME_ATTACHMENTS, "pv1-node1").metadata.finalizers, undefined);

  server.failNext({
    method: "PATCH",
    subresource: "status",
    status: 500,
    message: "boom",
    times: 2,
  });
  const main = await call(server, "PATCH", `${VA_PATH}/pv1-node1`, {
    metadata: { labels: { a: "1" } },
  }, "application/merge-patch+json");
  assert.equal(main.status, 200, "subresource does not match");
  for (let i = 0; i < 2; i++) {
    const res = await call(server, "PATCH", `${VA_PATH}/pv1-node1/status`, {
      status: { attached: true },
    }, "application/merge-patch+json");
    assert.equal(res.status, 500);
    assert.equal(res.body.message, "Internal error occurred: boom");
  }
  const third = await call(server, "PATCH", `${VA_PATH}/pv1-node1/status`, {
    status: { attached: true },
  }, "application/merge-patch+json");
  assert.equal(third.status, 200, "times is used up");

  server.failNext({ verb: "get", name: "other", status: 409 });
  assert.equal((await call(server, "GET", `${VA_PATH}/pv1-node1`)).status, 200);
  const conflict = await call(server, "GET", `${VA_PATH}/other`);
  assert.equal(conflict.body.reason, "Conflict");
  assert.throws(() => server.failNext({ verb: "get" }), TypeError);
});

Deno.test("MemoryApiServer failNext applyChange applies the write, then answers the error", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("va1"));
  server.failNext({ verb: "patch", status: 504, message: "lost", applyChange: true });
  const res = await call(
    server,
    "PATCH",
    `${VA_PATH}/va1`,
    { metadata: { labels: { a: "1" } } },
    "application/merge-patch+json",
  );
  assert.equal(res.status, 504);
  assert.equal(res.body.message, "Timeout: lost");
  assert.deepEqual(server.get(VOLUME_ATTACHMENTS, "va1").metadata.labels, { a: "1" });
});

Deno.test("MemoryApiServer failNext delayMs waits on the server's clock", async () => {
  const clock = new FakeClock();
  await using server = await MemoryApiServer.start({ clock });
  server.create(VOLUME_ATTACHMENTS, va("va1"));
  server.failNext({ verb: "get", delayMs: 5000 });
  // The compaction timer is pending from the start; the delay adds one.
  const before = clock.pendingTimers();
  let done = false;
  const pending = call(server, "GET", `${VA_PATH}/va1`).then((a) => {
    done = true;
    return a;
  });
  while (clock.pendingTimers() === before) await new Promise((r) => setTimeout(r, 1));
  clock.advance(4999);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(done, false);
  clock.advance(1);
  assert.equal((await pending).status, 200);
});

Deno.test("MemoryApiServer watch streams ADDED for rv 0, then live events", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("a"));
  server.create(PERSISTENT_VOLUMES, { metadata: { name: "pv1" }, spec: {} });
  const res = await fetch(`${server.url}${VA_PATH}?watch=true&resourceVersion=0`);
  assert.equal(res.headers.get("content-type"), "application/json");
  const it = lines(res);
  const [first] = await take(it, 1);
  assert.equal(first?.type, "ADDED");
  assert.equal(meta(first!).name, "a");
  server.create(VOLUME_ATTACHMENTS, va("b"));
  server.delete(VOLUME_ATTACHMENTS, "a");
  server.create(PERSISTENT_VOLUMES, { metadata: { name: "pv2" }, spec: {} });
  const evs = await take(it, 2);
  assert.deepEqual(evs.map((e) => [e.type, meta(e).name]), [["ADDED", "b"], ["DELETED", "a"]]);
  assert.equal(server.watchCount, 1);
  server.closeWatches();
  assert.deepEqual(await take(it, 1), [], "the stream ends");
  assert.equal(server.watchCount, 0);
});

Deno.test("MemoryApiServer watch from a resourceVersion replays the history", async () => {
  await using server = await MemoryApiServer.start();
  const a = server.create(VOLUME_ATTACHMENTS, va("a"));
  server.patch(VOLUME_ATTACHMENTS, "a", {
    type: "merge",
    body: { metadata: { labels: { x: "1" } } },
  });
  server.create(SECRETS, { metadata: { name: "s", namespace: "n" } });
  server.delete(VOLUME_ATTACHMENTS, "a");
  const res = await fetch(
    `${server.url}${VA_PATH}?watch=1&resourceVersion=${a.metadata.resourceVersion}&timeoutSeconds=300`,
  );
  const it = lines(res);
  const evs = await take(it, 2);
  assert.deepEqual(evs.map((e) => e.type), ["MODIFIED", "DELETED"]);
  assert.equal(server.requests.at(-1)?.watch, true);
  assert.equal(server.requests.at(-1)?.verb, "watch");
  server.closeWatches();
  await take(it, 1);
});

Deno.test("MemoryApiServer watch from a compacted resourceVersion gives a 410 ERROR event", async () => {
  await using server = await MemoryApiServer.start({ historyLimit: 2 });
  const first = server.create(VOLUME_ATTACHMENTS, va("a"));
  server.create(VOLUME_ATTACHMENTS, va("b"));
  server.create(VOLUME_ATTACHMENTS, va("c"));
  server.create(VOLUME_ATTACHMENTS, va("d"));
  const res = await fetch(
    `${server.url}${VA_PATH}?watch=true&resourceVersion=${first.metadata.resourceVersion}`,
  );
  // Real (v1.34.4): a 200 stream with one ERROR event carrying the 410 Expired Status.
  assert.equal(res.status, 200);
  const evs = await take(lines(res), 5);
  const rv = Number(first.metadata.resourceVersion);
  assert.deepEqual(evs, [{
    type: "ERROR",
    object: {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `too old resource version: ${rv} (${rv + 1})`,
      reason: "Expired",
      code: 410,
    },
  }]);

  server.compact();
  const res2 = await fetch(`${server.url}${VA_PATH}?watch=true&resourceVersion=${rv + 2}`);
  assert.equal((await take(lines(res2), 2))[0]?.type, "ERROR");
});

Deno.test("MemoryApiServer keeps the whole history until the periodic compaction, as etcd does", async () => {
  const clock = new FakeClock();
  await using server = await MemoryApiServer.start({ clock, compactionIntervalMs: 1000 });
  const created = server.create(VOLUME_ATTACHMENTS, va("a"));
  for (let i = 0; i < 1500; i++) {
    server.patch(VOLUME_ATTACHMENTS, "a", {
      type: "merge",
      body: { metadata: { labels: { i: `${i}` } } },
    });
  }
  const events = async (rv: string | number) => {
    const res = await fetch(`${server.url}${VA_PATH}?watch=true&resourceVersion=${rv}`);
    const it = lines(res);
    const out = await take(it, rv === 1 ? 1501 : 1);
    await it.return(undefined);
    return out;
  };
  // Real (v1.34.4): a watch from resourceVersion 1 on a fresh cluster replays every event.
  const all = await events(1);
  assert.equal(all.length, 1501);
  assert.equal(meta(all[0]!).resourceVersion, created.metadata.resourceVersion);
  // The first run only notes where it is; the second compacts to that.
  const seen = Number(server.resourceVersion);
  clock.advance(1000);
  const first = created.metadata.resourceVersion ?? "";
  assert.equal((await events(first))[0]?.type, "MODIFIED");
  server.patch(VOLUME_ATTACHMENTS, "a", {
    type: "merge",
    body: { metadata: { labels: { i: "x" } } },
  });
  clock.advance(1000);
  const expired = await events(first);
  assert.equal(expired[0]?.type, "ERROR");
  assert.equal((expired[0]?.object as { code: number }).code, 410);
  const kept = await events(seen);
  assert.equal(kept[0]?.type, "MODIFIED");
  assert.equal(meta(kept[0]!).resourceVersion, String(seen + 1));
});

Deno.test("MemoryApiServer watch sends bookmarks on demand and periodically, and times out", async () => {
  const clock = new FakeClock();
  await using server = await MemoryApiServer.start({ clock, bookmarkIntervalMs: 1000 });
  const rv = server.resourceVersion;
  const res = await fetch(
    `${server.url}${VA_PATH}?watch=true&resourceVersion=${rv}&allowWatchBookmarks=true&timeoutSeconds=10`,
  );
  const noBookmarks = await fetch(`${server.url}${VA_PATH}?watch=true&resourceVersion=${rv}`);
  const it = lines(res);
  await server.whenWatching(2);
  server.bookmark();
  // Real (v1.34.4): an empty VolumeAttachment as the Go type serializes it, with the
  // resourceVersion reached.
  assert.deepEqual(await take(it, 1), [{
    type: "BOOKMARK",
    object: {
      kind: "VolumeAttachment",
      apiVersion: "storage.k8s.io/v1",
      metadata: { resourceVersion: rv },
      spec: { attacher: "", source: {}, nodeName: "" },
      status: { attached: false },
    },
  }]);
  server.create(PERSISTENT_VOLUMES, { metadata: { name: "pv1" }, spec: {} });
  clock.advance(1000);
  const [periodic] = await take(it, 1);
  assert.equal(periodic?.type, "BOOKMARK");
  assert.equal(meta(periodic!).resourceVersion, server.resourceVersion);
  clock.advance(9000);
  const rest = await take(it, 20);
  // Bookmarks at 2 s … 9 s, then the stream ends at the 10 s timeout.
  assert.deepEqual(rest.map((e) => e.type), Array(8).fill("BOOKMARK"));
  assert.equal(server.watchCount, 1);
  server.closeWatches();
  assert.deepEqual(
    await take(lines(noBookmarks), 5),
    [],
    "no bookmarks without allowWatchBookmarks",
  );
});

Deno.test("MemoryApiServer answers a resourceVersion that is no number as the real server does", async () => {
  await using server = await MemoryApiServer.start();
  const parse = 'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": ' +
    "invalid syntax";
  // Real (v1.34.4): a watch answers 500 with no reason, a list 400.
  const watch = await call(server, "GET", `${VA_PATH}?watch=true&resourceVersion=abc`);
  assert.deepEqual(watch, {
    status: 500,
    body: {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: parse,
      code: 500,
    },
  });
  const list = await call(server, "GET", `${VA_PATH}?resourceVersion=abc`);
  assert.equal(list.status, 400);
  assert.equal(list.body.reason, "BadRequest");
  assert.equal(list.body.message, `invalid resource version: ${parse}`);
});

Deno.test("MemoryApiServer list from a resourceVersion not reached waits 3 s, then answers 504", async () => {
  const clock = new FakeClock();
  await using server = await MemoryApiServer.start({ clock });
  const current = Number(server.resourceVersion);
  const baseline = clock.pendingTimers();
  const late = fetch(`${server.url}${VA_PATH}?resourceVersion=${current + 5}`);
  while (clock.pendingTimers() === baseline) await new Promise((r) => setTimeout(r, 1));
  clock.advance(3000);
  const res = await late;
  // Real (v1.34.4), for resourceVersion=999999 at 405.
  assert.equal(res.status, 504);
  assert.equal(res.headers.get("retry-after"), "1");
  assert.deepEqual(await res.json(), {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: `Timeout: Too large resource version: ${current + 5}, current: ${current}`,
    reason: "Timeout",
    details: {
      causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
      retryAfterSeconds: 1,
    },
    code: 504,
  });
  // Reached in time: the list is served once the write lands.
  const soon = fetch(`${server.url}${VA_PATH}?resourceVersion=${current + 1}`);
  while (clock.pendingTimers() === baseline) await new Promise((r) => setTimeout(r, 1));
  server.create(VOLUME_ATTACHMENTS, va("a"));
  const served = await soon;
  assert.equal(served.status, 200);
  assert.equal(((await served.json()) as { items: unknown[] }).items.length, 1);
  assert.equal(clock.pendingTimers(), baseline);
});

Deno.test("MemoryApiServer a client that goes away closes its watch", async () => {
  await using server = await MemoryApiServer.start();
  const ac = new AbortController();
  const res = await fetch(`${server.url}${VA_PATH}?watch=true`, { signal: ac.signal });
  await server.whenWatching(1);
  ac.abort();
  await res.body?.cancel().catch((err: unknown) => err);
  while (server.watchCount > 0) await new Promise((r) => setTimeout(r, 1));
  assert.equal(server.watchCount, 0);
});

Deno.test("MemoryApiServer direct access has the HTTP semantics", async () => {
  await using server = await MemoryApiServer.start();
  const seeded = server.create<PersistentVolume>("persistentvolumes", {
    metadata: { name: "pv1", deletionTimestamp: "2024-01-01T00:00:00Z", finalizers: ["f"] },
    spec: {},
    status: { phase: "Bound" },
  });
  assert.equal(seeded.status?.phase, "Bound", "seeding keeps status");
  assert.equal(seeded.metadata.deletionTimestamp, "2024-01-01T00:00:00Z");
  assert.throws(
    () => server.get(VOLUME_ATTACHMENTS, "nope"),
    (err: unknown) =>
      err instanceof StatusError && err.code === 404 &&
      err.message === `volumeattachments.storage.k8s.io "nope" not found`,
  );
  assert.throws(
    () => server.create(PERSISTENT_VOLUMES, seeded),
    (err: unknown) => err instanceof StatusError && err.reason === "AlreadyExists",
  );
  const updated = server.update(PERSISTENT_VOLUMES, { ...seeded, spec: { storageClassName: "x" } });
  assert.equal(updated.spec.storageClassName, "x");
  assert.throws(
    () => server.update(PERSISTENT_VOLUMES, seeded),
    (err: unknown) => err instanceof StatusError && err.code === 409,
  );
  assert.deepEqual(server.list(PERSISTENT_VOLUMES).items.map((p) => p.metadata.name), ["pv1"]);
  const gone = server.update(PERSISTENT_VOLUMES, {
    ...updated,
    metadata: { ...updated.metadata, finalizers: [] },
  });
  assert.equal(gone.metadata.name, "pv1");
  assert.equal(server.find(PERSISTENT_VOLUMES, "pv1"), undefined);
  assert.throws(() => server.get("widgets", "x"), RangeError);
});

Deno.test("MemoryApiServer refuses a patch naming another uid, as metadata validation does", async () => {
  await using server = await MemoryApiServer.start();
  const stored = server.create(VOLUME_ATTACHMENTS, {
    ...va("va1"),
    metadata: { name: "va1", uid: "uid-new", finalizers: ["f"] },
  });
  assert.throws(
    () =>
      server.patch(VOLUME_ATTACHMENTS, "va1", {
        type: "merge",
        body: { metadata: { uid: "uid-old", finalizers: null } },
      }),
    (err: unknown) => {
      assert.ok(err instanceof StatusError);
      assert.equal(err.code, 422);
      assert.match(err.message, /metadata\.uid: Invalid value: "uid-old": field is immutable/);
      return true;
    },
  );
  assert.deepEqual(server.get(VOLUME_ATTACHMENTS, "va1").metadata.finalizers, ["f"]);
  // The same uid is no change: the patch applies.
  server.patch(VOLUME_ATTACHMENTS, "va1", {
    type: "merge",
    body: { metadata: { uid: stored.metadata.uid, finalizers: null } },
  });
  assert.equal(server.get(VOLUME_ATTACHMENTS, "va1").metadata.finalizers, undefined);
});

Deno.test("MemoryApiServer drops unknown fields with a warning, refuses them with fieldValidation=Strict", async () => {
  await using server = await MemoryApiServer.start();
  const body = { ...va("va1"), bogusTop: 1, spec: { ...va("x").spec, bogus: 1 } };
  // Real (v1.34.4): 201, `Warning: 299 - "unknown field \"spec.bogus\""`, field dropped.
  const res = await fetch(server.url + VA_PATH, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 201);
  assert.equal(
    res.headers.get("warning"),
    '299 - "unknown field \\"spec.bogus\\"", 299 - "unknown field \\"bogusTop\\""',
  );
  const created = await res.json();
  assert.equal(created.bogusTop, undefined);
  assert.deepEqual(created.spec, va("x").spec);
  assert.deepEqual(server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1").spec, va("x").spec);

  // Real: 400 `VolumeAttachment in version "v1" cannot be handled as a VolumeAttachment: strict
  // decoding error: unknown field "spec.bogus"`.
  const strict = await call(server, "POST", `${VA_PATH}?fieldValidation=Strict`, {
    ...va("va2"),
    spec: { ...va("x").spec, bogus: 1 },
  });
  assert.equal(strict.status, 400);
  assert.equal(strict.body.reason, "BadRequest");
  assert.equal(
    strict.body.message,
    'VolumeAttachment in version "v1" cannot be handled as a VolumeAttachment: ' +
      'strict decoding error: unknown field "spec.bogus"',
  );
  assert.equal(server.find(VOLUME_ATTACHMENTS, "va2"), undefined);

  // Status members are checked too, on PUT as on POST; Ignore drops without a warning.
  const current = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
  const put = await fetch(`${server.url}${VA_PATH}/va1/status?fieldValidation=Warn`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...current, status: { attached: true, extra: "x" } }),
  });
  assert.equal(put.status, 200);
  assert.equal(put.headers.get("warning"), '299 - "unknown field \\"status.extra\\""');
  assert.deepEqual((await put.json()).status, { attached: true });
  const ignored = await fetch(`${server.url}${VA_PATH}?fieldValidation=Ignore`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...va("va3"), spec: { ...va("x").spec, bogus: 1 } }),
  });
  assert.equal(ignored.status, 201);
  assert.equal(ignored.headers.get("warning"), null);
  await ignored.body?.cancel();
});

/** `IsDNS1123Subdomain`'s message, as kube-apiserver v1.37.2 words it. */
const SUBDOMAIN =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or " +
  "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used " +
  "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/** `IsDNS1123SubdomainCaseless`'s message (the declarative check of `spec.attacher`, v1.37). */
const SUBDOMAIN_CASELESS =
  "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start " +
  "and end with an alphanumeric character (e.g. 'Example.com', regex used for validation is " +
  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/** The causes of a 422 answer as `field: message` lines. */
function causesOf(answer: Answer): string[] {
  const details = answer.body.details as { causes?: { field: string; message: string }[] };
  return (details.causes ?? []).map((c) => `${c.field}: ${c.message}`);
}

Deno.test("MemoryApiServer validates a VolumeAttachment created over HTTP as kube-apiserver does", async () => {
  await using server = await MemoryApiServer.start();
  const post = (name: string, spec: Record<string, unknown>) =>
    call(server, "POST", VA_PATH, { ...va(name), spec });
  // Each expectation is the real server's answer (v1.37.2) to the same body: the handwritten
  // errors, less those of spec.attacher, then the declarative ones of spec.attacher.
  const noAttacher = await post("diff-invalid", {
    nodeName: "n",
    source: { persistentVolumeName: "p" },
  });
  assert.equal(noAttacher.status, 422);
  assert.equal(noAttacher.body.reason, "Invalid");
  assert.equal(
    noAttacher.body.message,
    'VolumeAttachment.storage.k8s.io "diff-invalid" is invalid: spec.attacher: Required value',
  );
  assert.deepEqual(causesOf(noAttacher), ["spec.attacher: Required value"]);
  const emptySpec = await post("v1", {});
  assert.deepEqual(causesOf(emptySpec), [
    "spec.source: Required value: must specify exactly one of inlineVolumeSpec and " +
    "persistentVolumeName",
    `spec.nodeName: Invalid value: "": ${SUBDOMAIN}`,
    "spec.attacher: Required value",
  ]);
  const slash = await post("v1", {
    attacher: "csi/test",
    nodeName: "n",
    source: { persistentVolumeName: "p" },
  });
  assert.equal(
    slash.body.message,
    `VolumeAttachment.storage.k8s.io "v1" is invalid: spec.attacher: Invalid value: "csi/test": ${SUBDOMAIN_CASELESS}`,
  );
  const badNode = await post("v1", {
    attacher: "a",
    nodeName: "Node_1",
    source: { persistentVolumeName: "p" },
  });
  assert.deepEqual(causesOf(badNode), [`spec.nodeName: Invalid value: "Node_1": ${SUBDOMAIN}`]);
  // The driver name's format is caseless: "A.B" passes, only the missing source is reported.
  const upper = await post("v1", { attacher: "A.B", nodeName: "n", source: {} });
  assert.deepEqual(causesOf(upper), [
    "spec.source: Required value: must specify exactly one of inlineVolumeSpec and " +
    "persistentVolumeName",
  ]);
  const long = await post("v1", {
    attacher: "a".repeat(260),
    nodeName: "b".repeat(260),
    source: { persistentVolumeName: "p" },
  });
  assert.deepEqual(causesOf(long), [
    `spec.nodeName: Invalid value: "${"b".repeat(260)}": must be no more than 253 characters`,
    `spec.attacher: Invalid value: "${"a".repeat(260)}": must be no more than 253 bytes`,
    "spec.attacher: Too long: may not be more than 63 characters",
  ]);
  const badName = await call(server, "POST", VA_PATH, va("Bad_Name"));
  assert.equal(
    badName.body.message,
    `VolumeAttachment.storage.k8s.io "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": ${SUBDOMAIN}`,
  );
  assert.equal(server.list(VOLUME_ATTACHMENTS).items.length, 0);
});

Deno.test("MemoryApiServer validates VolumeAttachment updates over HTTP: spec immutable, no v1 driver-name check", async () => {
  await using server = await MemoryApiServer.start();
  // Seeding is not validated: the Go attacher's scenarios' driver `csi/test` can be stored.
  server.create(VOLUME_ATTACHMENTS, {
    ...va("s1"),
    spec: { attacher: "csi/test", nodeName: "n", source: { persistentVolumeName: "p" } },
  });
  // An update that keeps the spec is not checked against the driver name a create would refuse
  // (the real server cannot hold such an object).
  const finalizer = await call(
    server,
    "PATCH",
    `${VA_PATH}/s1`,
    { metadata: { finalizers: ["external-attacher/csi-test"] } },
    "application/merge-patch+json",
  );
  assert.equal(finalizer.status, 200);
  server.create(VOLUME_ATTACHMENTS, {
    ...va("s2"),
    spec: { attacher: "a", nodeName: "n", source: { persistentVolumeName: "p" } },
  });
  // Real (v1.37.2) for a merge patch {"spec":{"nodeName":"m"}}: the declarative immutability
  // check, which prints no value (up to v1.36 the handwritten one printed the Go struct).
  const moved = await call(
    server,
    "PATCH",
    `${VA_PATH}/s2`,
    { spec: { nodeName: "m" } },
    "application/merge-patch+json",
  );
  assert.equal(moved.status, 422);
  assert.equal(
    moved.body.message,
    'VolumeAttachment.storage.k8s.io "s2" is invalid: spec: Invalid value: null: field is immutable',
  );
  // Real (v1.37.2), for {"spec":{"attacher":""}} on a VA of attacher "a": the handwritten
  // Required (the declarative check of the spec stops at its immutability), then the immutability.
  const emptied = await call(
    server,
    "PATCH",
    `${VA_PATH}/s2`,
    { spec: { attacher: "" } },
    "application/merge-patch+json",
  );
  assert.deepEqual(causesOf(emptied), [
    "spec.attacher: Required value",
    "spec: Invalid value: null: field is immutable",
  ]);
  const put = await call(server, "PUT", `${VA_PATH}/s1`, {
    ...server.get(VOLUME_ATTACHMENTS, "s1"),
    spec: { attacher: "csi/test", nodeName: "other", source: { persistentVolumeName: "p" } },
  });
  assert.equal(put.status, 422);
  // The status subresource is not checked against the spec.
  const status = await call(
    server,
    "PATCH",
    `${VA_PATH}/s1/status`,
    { status: { attached: true } },
    "application/merge-patch+json",
  );
  assert.equal(status.status, 200);
  assert.equal(server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "s1").spec.nodeName, "n");
});

Deno.test("MemoryApiServer watch with a timeoutSeconds that is no integer answers 400 as ParseInt", async () => {
  await using server = await MemoryApiServer.start();
  // Real (v1.34.4): 400 `strconv.ParseInt: parsing "abc": invalid syntax`.
  const res = await call(server, "GET", `${VA_PATH}?watch=true&timeoutSeconds=abc`);
  assert.equal(res.status, 400);
  assert.equal(res.body.message, 'strconv.ParseInt: parsing "abc": invalid syntax');
});

Deno.test("MemoryApiServer creates and updates from YAML bodies and answers in JSON", async () => {
  await using server = await MemoryApiServer.start();
  const yaml = (name: string, extra = "") =>
    [
      "apiVersion: storage.k8s.io/v1",
      "kind: VolumeAttachment",
      "metadata:",
      `  name: ${name}`,
      extra,
      "spec:",
      "  attacher: a.b",
      "  nodeName: node-1",
      "  source:",
      "    persistentVolumeName: pv1",
      "",
    ].join("\n");
  // Real (v1.34.4): 201, `application/json`, the stored object.
  const created = await fetch(`${server.url}${VA_PATH}`, {
    method: "POST",
    headers: { "content-type": "application/yaml" },
    body: yaml("y1"),
  });
  assert.equal(created.status, 201);
  assert.equal(created.headers.get("content-type"), "application/json");
  const body = await created.json() as VolumeAttachment;
  assert.deepEqual(body.spec, {
    attacher: "a.b",
    nodeName: "node-1",
    source: { persistentVolumeName: "pv1" },
  });
  assert.deepEqual(body.status, { attached: false });
  // Unknown fields in YAML get the same warning as in JSON.
  const warned = await fetch(`${server.url}${VA_PATH}`, {
    method: "POST",
    headers: { "content-type": "application/yaml" },
    body: yaml("y2", "  bogus: 1"),
  });
  assert.equal(warned.status, 201);
  assert.equal(warned.headers.get("warning"), '299 - "unknown field \\"metadata.bogus\\""');
  await warned.body?.cancel();
  const put = await fetch(`${server.url}${VA_PATH}/y1`, {
    method: "PUT",
    headers: { "content-type": "application/yaml" },
    body: yaml("y1", `  resourceVersion: "${body.metadata.resourceVersion}"\n  labels: {a: b}`),
  });
  assert.equal(put.status, 200);
  assert.deepEqual((await put.json() as VolumeAttachment).metadata.labels, { a: "b" });
});

Deno.test("MemoryApiServer serves watch lists: initial events, then the initial-events-end bookmark", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, va("a"));
  server.create(VOLUME_ATTACHMENTS, va("b"));
  const listRv = server.resourceVersion;
  const watchList = `${VA_PATH}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true` +
    "&resourceVersionMatch=NotOlderThan";
  const it = lines(await fetch(`${server.url}${watchList}`));
  const initial = await take(it, 3);
  assert.deepEqual(initial.map((e) => `${e.type} ${meta(e).name ?? ""}`), [
    "ADDED a",
    "ADDED b",
    "BOOKMARK ",
  ]);
  // Real (v1.34.4): an empty object of the kind, annotated, at the current resourceVersion.
  assert.deepEqual(initial[2]?.object, {
    kind: "VolumeAttachment",
    apiVersion: "storage.k8s.io/v1",
    metadata: { resourceVersion: listRv, annotations: { "k8s.io/initial-events-end": "true" } },
    spec: { attacher: "", source: {}, nodeName: "" },
    status: { attached: false },
  });
  server.create(VOLUME_ATTACHMENTS, va("c"));
  assert.deepEqual((await take(it, 1)).map((e) => `${e.type} ${meta(e).name}`), ["ADDED c"]);
  // A watch from "" or "0" without the watch-list options is defaulted to one (the WatchList
  // feature is on by default in v1.34): with bookmarks it ends the initial events the same way.
  const defaulted = lines(
    await fetch(`${server.url}${VA_PATH}?watch=true&resourceVersion=0&allowWatchBookmarks=true`),
  );
  assert.deepEqual((await take(defaulted, 4)).map((e) => e.type), [
    "ADDED",
    "ADDED",
    "ADDED",
    "BOOKMARK",
  ]);
  // sendInitialEvents=false from "": only what changes from now on.
  const fromNow = lines(
    await fetch(
      `${server.url}${VA_PATH}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan`,
    ),
  );
  await server.whenWatching(3);
  server.delete(VOLUME_ATTACHMENTS, "a");
  assert.deepEqual((await take(fromNow, 1)).map((e) => `${e.type} ${meta(e).name}`), [
    "DELETED a",
  ]);
  server.closeWatches();
});

Deno.test("MemoryApiServer validates list and watch options with the real texts", async () => {
  await using server = await MemoryApiServer.start();
  const answer = async (query: string) => {
    const res = await call(server, "GET", `${VA_PATH}?${query}`);
    assert.equal(res.status, 422, query);
    assert.equal(res.body.reason, "Invalid", query);
    return res.body;
  };
  // Real (v1.34.4), each with details {group: "meta.k8s.io", kind: "ListOptions", causes}.
  const noMatch = await answer("watch=true&sendInitialEvents=true");
  assert.deepEqual(noMatch.details, {
    group: "meta.k8s.io",
    kind: "ListOptions",
    causes: [{
      reason: "FieldValueForbidden",
      field: "resourceVersionMatch",
      message: "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
    }],
  });
  assert.equal(
    noMatch.message,
    'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents ' +
      "requires setting resourceVersionMatch to NotOlderThan",
  );
  assert.equal(
    (await answer(
      "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=Exact",
    ))
      .message,
    'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents ' +
      "requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported " +
      'value: "Exact": supported values: "NotOlderThan"]',
  );
  assert.equal(
    (await answer("watch=true&resourceVersionMatch=NotOlderThan")).message,
    'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: ' +
      "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
  );
  assert.equal(
    (await answer("resourceVersionMatch=NotOlderThan")).message,
    'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: ' +
      "resourceVersionMatch is forbidden unless resourceVersion is provided",
  );
  assert.equal(
    (await answer("sendInitialEvents=true")).message,
    'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is ' +
      "forbidden for list",
  );
  // Go's query booleans: only 0, f and false (any case) are false.
  const yes = lines(
    await fetch(
      `${server.url}${VA_PATH}?watch=yes&sendInitialEvents=yes&allowWatchBookmarks=TRUE` +
        "&resourceVersionMatch=NotOlderThan",
    ),
  );
  assert.deepEqual((await take(yes, 1)).map((e) => e.type), ["BOOKMARK"]);
  server.closeWatches();
});
