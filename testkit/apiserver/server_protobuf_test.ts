/**
 * The in-memory API server in Kubernetes protobuf: chosen by `Accept`, for gets, lists, watches,
 * watch lists, errors, and protobuf create and update bodies. Decoded with protobufjs reading the
 * upstream `.proto` files ({@link import("../kube_protos.ts")}); ignored, with the reason, where
 * they are absent (CI requires them).
 */

import assert from "node:assert/strict";
import { EVENTS, LEASES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import {
  KUBE_PROTOBUF,
  kubeProtosMissing,
  kubeProtosRequired,
  loadKubeProtos,
  unwrapUnknown,
  watchFrame,
} from "../kube_protos.ts";
import { MemoryApiServer } from "./server.ts";
import { plainVolumeAttachment } from "../harness/client_fixtures.ts";

const MISSING = kubeProtosMissing();
const IGNORE = MISSING !== undefined && !kubeProtosRequired();
const NOTE = IGNORE ? ` (ignored: ${MISSING})` : "";
const VA_PATH = "/apis/storage.k8s.io/v1/volumeattachments";
const LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

function codec() {
  const c = loadKubeProtos();
  assert.ok(c);
  return c;
}

function test(name: string, fn: () => Promise<void>): void {
  Deno.test({ name: name + NOTE, ignore: IGNORE, fn });
}

async function get(
  server: MemoryApiServer,
  path: string,
  accept: string,
): Promise<{ status: number; type: string; bytes: Uint8Array }> {
  const res = await fetch(server.url + path, { headers: { accept } });
  return {
    status: res.status,
    type: res.headers.get("content-type") ?? "",
    bytes: new Uint8Array(await res.arrayBuffer()),
  };
}

/** Frames of a protobuf watch body as they arrive, decoded. */
async function* frames(
  res: Response,
): AsyncGenerator<{ type: string; object: Record<string, unknown> }> {
  assert.ok(res.body);
  let buf = new Uint8Array();
  for await (const chunk of res.body) {
    const next = new Uint8Array(buf.length + chunk.length);
    next.set(buf);
    next.set(chunk, buf.length);
    buf = next;
    while (buf.length >= 4) {
      const len = new DataView(buf.buffer, buf.byteOffset).getUint32(0, false);
      if (buf.length < 4 + len) break;
      yield codec().decodeWatchEvent(buf.subarray(4, 4 + len));
      buf = buf.subarray(4 + len);
    }
  }
}

async function take<T>(it: AsyncGenerator<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  while (out.length < n) {
    const next = await it.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}

test("a get and a list answer protobuf to the Go client's Accept, JSON to */*", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, plainVolumeAttachment("a"));
  server.create(VOLUME_ATTACHMENTS, plainVolumeAttachment("b"));
  const json = await (await fetch(`${server.url}${VA_PATH}/a`)).json();
  const pb = await get(server, `${VA_PATH}/a`, `${KUBE_PROTOBUF}, */*`);
  assert.equal(pb.status, 200);
  assert.equal(pb.type, KUBE_PROTOBUF);
  assert.deepEqual([...pb.bytes.subarray(0, 4)], [0x6b, 0x38, 0x73, 0x00]);
  assert.deepEqual(codec().decode(pb.bytes), json);
  const star = await get(server, `${VA_PATH}/a`, "*/*");
  assert.equal(star.type, "application/json");

  assert.deepEqual(server.requests.map((r) => r.responseType), [
    "application/json",
    KUBE_PROTOBUF,
    "application/json",
  ]);
  const list = await get(server, `${VA_PATH}?limit=1`, `${KUBE_PROTOBUF},application/json`);
  assert.equal(list.type, KUBE_PROTOBUF);
  const decoded = codec().decode(list.bytes) as {
    kind: string;
    metadata: { continue?: string; remainingItemCount?: number };
    items: { metadata: { name: string } }[];
  };
  assert.equal(decoded.kind, "VolumeAttachmentList");
  assert.deepEqual(decoded.items.map((i) => i.metadata.name), ["a"]);
  assert.equal(decoded.metadata.remainingItemCount, 1);
  const rest = await get(
    server,
    `${VA_PATH}?limit=1&continue=${decoded.metadata.continue}`,
    KUBE_PROTOBUF,
  );
  assert.deepEqual(
    (codec().decode(rest.bytes).items as { metadata: { name: string } }[]).map((i) =>
      i.metadata.name
    ),
    ["b"],
  );
});

test("errors are a Status in the negotiated type; nothing acceptable is a 406 in JSON", async () => {
  await using server = await MemoryApiServer.start();
  const missing = await get(server, `${VA_PATH}/nope`, KUBE_PROTOBUF);
  assert.equal(missing.status, 404);
  assert.equal(missing.type, KUBE_PROTOBUF);
  assert.deepEqual(unwrapUnknown(missing.bytes).kind, "Status");
  const status = codec().decode(missing.bytes);
  assert.equal(status.apiVersion, "v1");
  assert.equal(status.reason, "NotFound");
  assert.equal(status.message, 'volumeattachments.storage.k8s.io "nope" not found');
  assert.deepEqual(status.details, {
    name: "nope",
    group: "storage.k8s.io",
    kind: "volumeattachments",
  });

  // go-restful's router: no clause names a type the route produces.
  const res = await fetch(`${server.url}${VA_PATH}`, { headers: { accept: "text/html" } });
  assert.equal(res.status, 406);
  assert.equal(res.headers.get("content-type"), "application/json");
  assert.deepEqual(await res.json(), {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: "406: Not Acceptable\n\nAvailable representations: application/json, " +
      `application/yaml, ${KUBE_PROTOBUF}, application/json;stream=watch, ` +
      `${KUBE_PROTOBUF};stream=watch`,
    reason: "NotAcceptable",
    details: {},
    code: 406,
  });
  // Written by WriteRawJSON: indented, in metav1.Status' field order.
  const raw = await fetch(`${server.url}${VA_PATH}/a`, { headers: { accept: "text/html" } });
  assert.equal(
    await raw.text(),
    '{\n  "kind": "Status",\n  "apiVersion": "v1",\n  "metadata": {},\n  "status": "Failure",\n' +
      '  "message": "406: Not Acceptable\\n\\nAvailable representations: application/json, ' +
      `application/yaml, ${KUBE_PROTOBUF}",\n  "reason": "NotAcceptable",\n  "details": {},\n` +
      '  "code": 406\n}',
  );
  // The handler's negotiation: the type passes the router, its parameters do not.
  const handler = await fetch(`${server.url}${VA_PATH}/a`, {
    headers: { accept: `${KUBE_PROTOBUF};stream=other` },
  });
  assert.equal(handler.status, 406);
  assert.equal(
    (await handler.json()).message,
    "only the following media types are accepted: application/json, application/yaml, " +
      KUBE_PROTOBUF,
  );
  const yamlWatch = await fetch(`${server.url}${VA_PATH}?watch=true`, {
    headers: { accept: "application/yaml" },
  });
  // The stream form is negotiated after the response type: the 406 is written as YAML.
  assert.equal(yamlWatch.status, 406);
  assert.equal(yamlWatch.headers.get("content-type"), "application/yaml");
  assert.match(await yamlWatch.text(), /message: .*application\/json;stream=watch/);
});

test("a watch list streams length-prefixed WatchEvents, the end bookmark annotated", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, plainVolumeAttachment("a"));
  const rv = server.resourceVersion;
  const res = await fetch(
    `${server.url}${VA_PATH}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true` +
      "&resourceVersionMatch=NotOlderThan",
    { headers: { accept: `${KUBE_PROTOBUF};stream=watch, application/json;stream=watch` } },
  );
  assert.equal(res.headers.get("content-type"), `${KUBE_PROTOBUF};stream=watch`);
  assert.equal(server.requests.at(-1)?.responseType, `${KUBE_PROTOBUF};stream=watch`);
  const it = frames(res);
  const initial = await take(it, 2);
  assert.deepEqual(initial.map((e) => e.type), ["ADDED", "BOOKMARK"]);
  assert.equal((initial[0]!.object.metadata as { name: string }).name, "a");
  assert.deepEqual(initial[1]!.object, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { resourceVersion: rv, annotations: { "k8s.io/initial-events-end": "true" } },
    spec: { attacher: "", source: {}, nodeName: "" },
    status: { attached: false },
  });
  server.delete(VOLUME_ATTACHMENTS, "a");
  const [deleted] = await take(it, 1);
  assert.equal(deleted?.type, "DELETED");
  await it.return(undefined);

  // A resourceVersion that is gone: one ERROR event holding a Status, then the end.
  server.compact();
  const expired = await fetch(`${server.url}${VA_PATH}?watch=true&resourceVersion=1`, {
    headers: { accept: KUBE_PROTOBUF },
  });
  const events = await take(frames(expired), 5);
  assert.deepEqual(events.map((e) => [e.type, e.object.kind, e.object.code]), [
    ["ERROR", "Status", 410],
  ]);
});

test("a Lease and an Event created and updated with protobuf bodies", async () => {
  await using server = await MemoryApiServer.start();
  const lease = {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    // Go writes ObjectMeta's zero values, which the server drops as JSON's omitempty does.
    metadata: { name: "leader", namespace: "default", generateName: "", generation: 0 },
    spec: { holderIdentity: "replica-a", leaseDurationSeconds: 15 },
  };
  const created = await fetch(`${server.url}${LEASE_PATH}`, {
    method: "POST",
    headers: { "content-type": KUBE_PROTOBUF, accept: `${KUBE_PROTOBUF}, */*` },
    body: codec().encode(lease) as Uint8Array<ArrayBuffer>,
  });
  assert.equal(created.status, 201);
  const back = codec().decode(new Uint8Array(await created.arrayBuffer())) as typeof lease & {
    metadata: { resourceVersion: string; uid: string };
  };
  assert.equal(back.spec.holderIdentity, "replica-a");
  assert.equal(back.metadata.generateName, undefined);
  const stored = server.get(LEASES, "leader", "default") as unknown as typeof lease;
  assert.deepEqual(stored.spec, lease.spec);

  const update = { ...back, spec: { ...back.spec, holderIdentity: "replica-b" } };
  const updated = await fetch(`${server.url}${LEASE_PATH}/leader`, {
    method: "PUT",
    headers: { "content-type": KUBE_PROTOBUF },
    body: codec().encode(update) as Uint8Array<ArrayBuffer>,
  });
  assert.equal(updated.status, 200);
  assert.equal(updated.headers.get("content-type"), "application/json");
  assert.equal((await updated.json()).spec.holderIdentity, "replica-b");

  const event = {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: "va.1", namespace: "default" },
    involvedObject: { kind: "VolumeAttachment", name: "va", apiVersion: "storage.k8s.io/v1" },
    reason: "AttachFailed",
    message: "boom",
    type: "Warning",
    count: 1,
    firstTimestamp: "2026-11-18T11:06:40Z",
    lastTimestamp: "2026-11-18T11:06:40Z",
    source: { component: "csi-attacher" },
  };
  const ev = await fetch(`${server.url}/api/v1/namespaces/default/events`, {
    method: "POST",
    headers: { "content-type": KUBE_PROTOBUF, accept: KUBE_PROTOBUF },
    body: codec().encode(event) as Uint8Array<ArrayBuffer>,
  });
  assert.equal(ev.status, 201);
  const evBack = codec().decode(new Uint8Array(await ev.arrayBuffer()));
  assert.equal(evBack.reason, "AttachFailed");
  assert.equal(evBack.firstTimestamp, "2026-11-18T11:06:40Z");
  assert.equal(server.get(EVENTS, "va.1", "default").metadata.name, "va.1");

  // Not an object in protobuf: 400, a Status in protobuf.
  const bad = await fetch(`${server.url}${LEASE_PATH}`, {
    method: "POST",
    headers: { "content-type": KUBE_PROTOBUF, accept: KUBE_PROTOBUF },
    body: new Uint8Array([0x6b, 0x38, 0x73, 0x00, 0x0a, 0x7f]),
  });
  assert.equal(bad.status, 400);
  assert.equal(codec().decode(new Uint8Array(await bad.arrayBuffer())).reason, "BadRequest");
});

test("a patch in protobuf is refused with 415; patches stay JSON", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, plainVolumeAttachment("a"));
  const res = await fetch(`${server.url}${VA_PATH}/a`, {
    method: "PATCH",
    headers: { "content-type": KUBE_PROTOBUF, accept: KUBE_PROTOBUF },
    body: new Uint8Array([0x6b, 0x38, 0x73, 0x00]),
  });
  assert.equal(res.status, 415);
  await res.body?.cancel();
  const merge = await fetch(`${server.url}${VA_PATH}/a`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json", accept: KUBE_PROTOBUF },
    body: JSON.stringify({ metadata: { labels: { x: "y" } } }),
  });
  assert.equal(merge.status, 200);
  const patched = codec().decode(new Uint8Array(await merge.arrayBuffer()));
  assert.deepEqual((patched.metadata as { labels: unknown }).labels, { x: "y" });
});

test("with protobuf off the server answers JSON to the Go client's Accept", async () => {
  await using server = await MemoryApiServer.start({ protobuf: false });
  server.create(VOLUME_ATTACHMENTS, plainVolumeAttachment("a"));
  const res = await get(server, `${VA_PATH}/a`, `${KUBE_PROTOBUF}, application/json`);
  assert.equal(res.type, "application/json");
  assert.equal((await get(server, `${VA_PATH}/a`, KUBE_PROTOBUF)).status, 406);
});

test("a watch frame is the bytes protobufjs writes for the event, length first", async () => {
  await using server = await MemoryApiServer.start();
  server.create(VOLUME_ATTACHMENTS, plainVolumeAttachment("a"));
  const res = await fetch(`${server.url}${VA_PATH}?watch=true&resourceVersion=0`, {
    headers: { accept: KUBE_PROTOBUF },
  });
  assert.ok(res.body);
  const reader = res.body.getReader();
  const first = await reader.read();
  await reader.cancel();
  const stored = server.get(VOLUME_ATTACHMENTS, "a") as unknown as Record<string, unknown>;
  assert.deepEqual(first.value, watchFrame(codec().encodeWatchEvent("ADDED", stored)));
});
