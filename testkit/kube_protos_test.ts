import assert from "node:assert/strict";
import { decodeKubeProtobuf } from "./apiserver/protobuf_body.ts";
import {
  KUBE_PROTO_VERSIONS,
  kubeProtosMissing,
  kubeProtosRequired,
  loadKubeProtos,
  splitWatchFrames,
  unwrapUnknown,
  watchFrame,
  withoutZeroValues,
  wrapUnknown,
} from "./kube_protos.ts";

const MISSING = KUBE_PROTO_VERSIONS.map(kubeProtosMissing).find((m) => m !== undefined);
const IGNORE = MISSING !== undefined && !kubeProtosRequired();
const NOTE = IGNORE ? ` (ignored: ${MISSING})` : "";

const enc = new TextEncoder();
const bytes = (...parts: (number[] | string)[]) =>
  new Uint8Array(parts.flatMap((p) => typeof p === "string" ? [...enc.encode(p)] : p));

function codec(version: string = KUBE_PROTO_VERSIONS[0]) {
  const c = loadKubeProtos(version);
  assert.ok(c, `the .proto files of ${version}`);
  return c;
}

function test(name: string, fn: () => void): void {
  Deno.test({ name: name + NOTE, ignore: IGNORE, fn });
}

Deno.test("wrapUnknown() writes the envelope as Go's Unknown.NestedMarshalTo does", () => {
  const out = wrapUnknown("v1", "Status", new Uint8Array([0x08, 0x01]));
  assert.deepEqual(
    out,
    bytes(
      [0x6b, 0x38, 0x73, 0x00],
      [0x0a, 0x0c, 0x0a, 0x02],
      "v1",
      [0x12, 0x06],
      "Status",
      [0x12, 0x02, 0x08, 0x01],
      [0x1a, 0x00, 0x22, 0x00],
    ),
  );
  assert.deepEqual(unwrapUnknown(out), {
    apiVersion: "v1",
    kind: "Status",
    raw: new Uint8Array([0x08, 0x01]),
    contentEncoding: "",
    contentType: "",
  });
  assert.throws(() => unwrapUnknown(enc.encode("{}")), /no k8s\\0 prefix/);
});

Deno.test("watchFrame() prefixes a 4-byte big-endian length; splitWatchFrames() undoes it", () => {
  const payload = new Uint8Array(300).fill(7);
  const frame = watchFrame(payload);
  assert.deepEqual([...frame.subarray(0, 4)], [0x00, 0x00, 0x01, 0x2c]);
  const two = new Uint8Array([...frame, ...watchFrame(new Uint8Array([1]))]);
  assert.deepEqual(splitWatchFrames(two), [payload, new Uint8Array([1])]);
  assert.throws(() => splitWatchFrames(two.subarray(0, 10)), /inside a frame/);
  assert.throws(() => splitWatchFrames(new Uint8Array([0, 0])), /inside a frame length/);
});

test("a Lease encodes to the bytes Go writes and decodes back", () => {
  const lease = {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: "l" },
    spec: { holderIdentity: "a", leaseDurationSeconds: 15 },
  };
  const out = codec().encode(lease);
  assert.deepEqual(
    out,
    bytes(
      [0x6b, 0x38, 0x73, 0x00, 0x0a, 0x1f, 0x0a, 0x16],
      "coordination.k8s.io/v1",
      [0x12, 0x05],
      "Lease",
      // raw: metadata (1) {name (1) "l"}, spec (2) {holderIdentity (1) "a", duration (2) 15}
      [0x12, 0x0c, 0x0a, 0x03, 0x0a, 0x01, 0x6c, 0x12, 0x05, 0x0a, 0x01, 0x61, 0x10, 0x0f],
      [0x1a, 0x00, 0x22, 0x00],
    ),
  );
  assert.deepEqual(codec().decode(out), lease);
});

test("metav1.Time is written in seconds, MicroTime truncated to microseconds", () => {
  const meta = codec().typeOf("meta.k8s.io/v1", "ObjectMeta");
  // creationTimestamp = 8: Timestamp {seconds = 1: 1795000000}, no nanos (ProtoTime).
  assert.deepEqual(
    codec().encodeMessage(meta, { creationTimestamp: "2026-11-18T11:06:40.9Z" }),
    new Uint8Array([0x42, 0x06, 0x08, 0xc0, 0x8d, 0xf6, 0xd7, 0x06]),
  );
  assert.deepEqual(
    codec().decodeMessage(meta, new Uint8Array([0x42, 0x06, 0x08, 0xc0, 0x8d, 0xf6, 0xd7, 0x06])),
    { creationTimestamp: "2026-11-18T11:06:40Z" },
  );
  // A zero time is an empty message, null in Go's JSON.
  assert.deepEqual(codec().decodeMessage(meta, new Uint8Array([0x42, 0x00])), {
    creationTimestamp: null,
  });
  const spec = codec().typeOf("coordination.k8s.io/v1", "LeaseSpec");
  // renewTime = 4: {seconds 1795000000, nanos = 2: 425668000}
  const renew = [
    0x22,
    0x0c,
    0x08,
    0xc0,
    0x8d,
    0xf6,
    0xd7,
    0x06,
    0x10,
    0xa0,
    0xdb,
    0xfc,
    0xca,
    0x01,
  ];
  assert.deepEqual(
    codec().encodeMessage(spec, { renewTime: "2026-11-18T11:06:40.425668999Z" }),
    new Uint8Array(renew),
  );
  assert.deepEqual(codec().decodeMessage(spec, new Uint8Array(renew)), {
    renewTime: "2026-11-18T11:06:40.425668Z",
  });
  assert.throws(() => codec().encodeMessage(spec, { renewTime: "yesterday" }), /RFC 3339/);
});

test("Quantity, IntOrString, bytes and FieldsV1 keep their JSON forms", () => {
  const c = codec();
  const port = c.typeOf("v1", "ServicePort");
  // targetPort = 4: IntOrString {type = 1: 1, strVal = 3: "http"}
  assert.deepEqual(
    c.encodeMessage(port, { targetPort: "http" }),
    bytes([0x22, 0x08, 0x08, 0x01, 0x1a, 0x04], "http"),
  );
  assert.deepEqual(
    c.encodeMessage(port, { targetPort: 8080 }),
    new Uint8Array([0x22, 0x05, 0x08, 0x00, 0x10, 0x90, 0x3f]),
  );
  assert.deepEqual(c.decodeMessage(port, c.encodeMessage(port, { targetPort: 8080 })), {
    targetPort: 8080,
  });
  const pv = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: "pv1",
      managedFields: [{
        manager: "kubectl",
        operation: "Update",
        fieldsType: "FieldsV1",
        fieldsV1: { "f:spec": { "f:capacity": {} } },
      }],
    },
    spec: { capacity: { storage: "1Gi" }, csi: { driver: "d", volumeHandle: "h" } },
  };
  assert.deepEqual(c.decode(c.encode(pv)), pv);
  const secret = { apiVersion: "v1", kind: "Secret", metadata: { name: "s" }, data: { k: "AAEC" } };
  assert.deepEqual(c.decode(c.encode(secret)), secret);
  const raw = unwrapUnknown(c.encode(secret)).raw;
  // metadata = 1 {name "s"}, data = 2: map entry {key = 1 "k", value = 2 bytes 00 01 02}
  assert.deepEqual(
    raw,
    bytes([0x0a, 0x03, 0x0a, 0x01], "s", [0x12, 0x08, 0x0a, 0x01], "k", [0x12, 0x03, 0, 1, 2]),
  );
});

test("a PersistentVolume's source is flattened into its spec, as Go's json:\"\" embeds it", () => {
  const c = codec();
  const raw = unwrapUnknown(c.encode({
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv1" },
    spec: { csi: { driver: "d", volumeHandle: "h" } },
  })).raw;
  const m = c.typeOf("v1", "PersistentVolume").decode(raw).toJSON();
  assert.deepEqual(m.spec, { persistentVolumeSource: { csi: { driver: "d", volumeHandle: "h" } } });
});

test("encode() refuses a member the message does not have", () => {
  assert.throws(
    () =>
      codec().encode({
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name: "a" },
        spec: { attacher: "x", node: "n1" },
      }),
    /no field node in .k8s.io.api.storage.v1.VolumeAttachmentSpec/,
  );
  assert.throws(() => codec().typeOf("example.com/v1", "Widget"), /no protobuf message/);
});

test("a watch event holds its object in the envelope; both versions write the same bytes", () => {
  const va = {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: "va1", resourceVersion: "7", finalizers: ["f"] },
    spec: { attacher: "csi.example", nodeName: "n1", source: { persistentVolumeName: "pv1" } },
    status: { attached: true, attachmentMetadata: { dev: "/dev/x" } },
  };
  const payload = codec().encodeWatchEvent("MODIFIED", va);
  // type = 1 "MODIFIED", object = 2 RawExtension {raw = 1: the envelope}
  assert.deepEqual([...payload.subarray(0, 10)], [0x0a, 0x08, ...enc.encode("MODIFIED")]);
  assert.equal(payload[10], 0x12);
  assert.deepEqual(codec().decodeWatchEvent(payload), { type: "MODIFIED", object: va });
  assert.deepEqual(codec("v0.35.4").encodeWatchEvent("MODIFIED", va), payload);
});

test("a Lease from this encoder reads the same in the server's own request decoder", () => {
  const lease = {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: "ext", namespace: "default", resourceVersion: "42", labels: { a: "b" } },
    spec: {
      holderIdentity: "replica-b",
      leaseDurationSeconds: 15,
      acquireTime: "2026-11-18T11:06:40.425668Z",
      renewTime: "2026-11-18T11:06:40.425668Z",
      leaseTransitions: 3,
    },
  };
  assert.deepEqual(decodeKubeProtobuf(codec().encode(lease)), lease);
});

Deno.test("withoutZeroValues() drops what Go writes and JSON's omitempty leaves out", () => {
  assert.deepEqual(
    withoutZeroValues({ a: "", b: 0, c: false, d: null, e: [], f: {}, g: { h: "" }, i: [0, "x"] }),
    { i: [0, "x"] },
  );
});
