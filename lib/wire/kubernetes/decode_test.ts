import assert from "node:assert/strict";
import { decodeObject, decodeWatchEvent, KubeProtobufError } from "./decode.ts";
import { KINDS, OBJECT_META, VOLUME_ATTACHMENT } from "./tables.ts";
import {
  envelope,
  ProtoWriter,
  writeMessage,
  writeObject,
  writeUnknown,
  writeWatchEvent,
} from "../../../testkit/kube_protobuf_writer.ts";
import {
  azureFilePersistentVolume,
  csiNode,
  expiredStatus,
  failingVolumeAttachment,
  lease,
  notFoundStatus,
  persistentVolume,
  volumeAttachment,
  withoutManagedFields,
} from "../../../testkit/kube_protobuf_fixtures.ts";

const FIXTURES: [string, () => Record<string, unknown>][] = [
  ["attached VolumeAttachment", volumeAttachment],
  ["failing VolumeAttachment", failingVolumeAttachment],
  ["CSI PersistentVolume", persistentVolume],
  ["Azure File PersistentVolume", azureFilePersistentVolume],
  ["CSINode", csiNode],
  ["Lease", lease],
  ["Status", notFoundStatus],
];

/** Unknown fields of every wire type, and managed fields (17) as the server writes them. */
const META_EXTRA = new ProtoWriter()
  .raw(writeUnknown())
  .bytes(17, new ProtoWriter().string(1, "kube-controller-manager").string(2, "Update").finish())
  .bytes(4, new TextEncoder().encode("/selfLink"))
  .finish();

for (const [name, make] of FIXTURES) {
  Deno.test(`decodeObject: ${name} decodes to its JSON form without managedFields`, () => {
    const json = make();
    const bytes = writeObject(json, { [OBJECT_META.proto]: META_EXTRA });
    assert.deepStrictEqual(decodeObject(bytes), withoutManagedFields(json));
  });
}

Deno.test("decodeObject: a list gives items without kind, metadata from ListMeta", () => {
  const items = [volumeAttachment("a"), volumeAttachment("b")].map(withoutManagedFields);
  const list = {
    kind: "VolumeAttachmentList",
    apiVersion: "storage.k8s.io/v1",
    metadata: { resourceVersion: "77", continue: "next", remainingItemCount: 5 },
    items: items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest),
  };
  assert.deepStrictEqual(decodeObject(writeObject(list)), list);
  const empty = { kind: "PersistentVolumeList", apiVersion: "v1", metadata: {}, items: [] };
  assert.deepStrictEqual(decodeObject(writeObject(empty)), empty);
});

Deno.test("decodeObject: fields absent on the wire take Go's JSON presence", () => {
  // An empty VolumeAttachment: gogo writes nothing, JSON has the non-omitempty fields.
  assert.deepStrictEqual(
    decodeObject(envelope("storage.k8s.io/v1", "VolumeAttachment", new Uint8Array(0))),
    {
      kind: "VolumeAttachment",
      apiVersion: "storage.k8s.io/v1",
      metadata: {},
      spec: { attacher: "", source: {}, nodeName: "" },
      status: { attached: false },
    },
  );
  assert.deepStrictEqual(decodeObject(envelope("v1", "PersistentVolume", new Uint8Array(0))), {
    kind: "PersistentVolume",
    apiVersion: "v1",
    metadata: {},
    spec: {},
    status: {},
  });
  assert.deepStrictEqual(
    decodeObject(envelope("storage.k8s.io/v1", "CSINode", new Uint8Array(0))),
    {
      kind: "CSINode",
      apiVersion: "storage.k8s.io/v1",
      metadata: {},
      spec: { drivers: null },
      status: {},
    },
  );
  assert.deepStrictEqual(
    decodeObject(envelope("coordination.k8s.io/v1", "Lease", new Uint8Array(0))),
    { kind: "Lease", apiVersion: "coordination.k8s.io/v1", metadata: {}, spec: {} },
  );
});

Deno.test("decodeObject: zero values as gogo writes them (omitempty vs pointers)", () => {
  // name "", generation 0, a zero creationTimestamp (an empty Time), finalizers none; a
  // pointer deletionGracePeriodSeconds 0 stays.
  const meta = new ProtoWriter().string(1, "").tag(7, 0).varint(0).bytes(8, new Uint8Array(0))
    .tag(10, 0).varint(0).finish();
  const va = new ProtoWriter().bytes(1, meta)
    .bytes(2, new ProtoWriter().string(1, "").string(3, "").finish())
    .bytes(3, new ProtoWriter().tag(1, 0).varint(0).finish())
    .finish();
  assert.deepStrictEqual(decodeObject(envelope("storage.k8s.io/v1", "VolumeAttachment", va)), {
    kind: "VolumeAttachment",
    apiVersion: "storage.k8s.io/v1",
    metadata: { deletionGracePeriodSeconds: 0 },
    spec: { attacher: "", source: {}, nodeName: "" },
    status: { attached: false },
  });
});

Deno.test("decodeObject: times as Go's Time and MicroTime MarshalJSON write them", () => {
  const time = (seconds: number | bigint, nanos?: number) => {
    const w = new ProtoWriter().tag(1, 0).varint(seconds);
    if (nanos !== undefined) w.tag(2, 0).varint(nanos);
    return w.finish();
  };
  const leaseWith = (acquire: Uint8Array) =>
    decodeObject(
      envelope(
        "coordination.k8s.io/v1",
        "Lease",
        new ProtoWriter().bytes(2, new ProtoWriter().bytes(3, acquire).finish()).finish(),
      ),
    ).spec as Record<string, unknown>;
  assert.equal(leaseWith(time(1764655205, 123456789)).acquireTime, "2025-12-02T06:00:05.123456Z");
  assert.equal(leaseWith(time(0)).acquireTime, "1970-01-01T00:00:00.000000Z");
  // Nanoseconds past a second carry into it, as time.Unix does.
  assert.equal(leaseWith(time(0, 1_500_000_000)).acquireTime, "1970-01-01T00:00:01.500000Z");
  // A present pointer to the zero time is null, as Time.MarshalJSON writes it.
  assert.equal(leaseWith(new Uint8Array(0)).acquireTime, null);
  assert.equal(leaseWith(time(-62135596800)).acquireTime, null);
  assert.throws(() => leaseWith(time(253402300800)), /outside the years 0 to 9999/);
  assert.throws(() => leaseWith(time(-(2n ** 63n))), KubeProtobufError);
  // A Time keeps whole seconds (metav1 Time.Unmarshal drops the nanoseconds).
  const meta = new ProtoWriter().bytes(8, time(1764655205, 999_999_999)).finish();
  const pv = decodeObject(
    envelope("v1", "PersistentVolume", new ProtoWriter().bytes(1, meta).finish()),
  );
  assert.equal((pv.metadata as Record<string, unknown>).creationTimestamp, "2025-12-02T06:00:05Z");
});

Deno.test("decodeObject: repeated singular messages merge, map keys are own data", () => {
  const meta1 = new ProtoWriter().string(1, "first").string(3, "ns").finish();
  const meta2 = new ProtoWriter().string(1, "second")
    .bytes(11, new ProtoWriter().string(1, "__proto__").string(2, "x").finish())
    .bytes(11, new ProtoWriter().string(1, "k").string(2, "1").finish())
    .bytes(11, new ProtoWriter().string(1, "k").string(2, "2").finish())
    .finish();
  const obj = decodeObject(
    envelope("v1", "PersistentVolume", new ProtoWriter().bytes(1, meta1).bytes(1, meta2).finish()),
  );
  const meta = obj.metadata as Record<string, unknown>;
  assert.equal(meta.name, "second");
  assert.equal(meta.namespace, "ns");
  const labels = meta.labels as Record<string, string>;
  assert.deepStrictEqual(Object.keys(labels), ["__proto__", "k"]);
  assert.equal(labels.k, "2");
  assert.equal(Object.getPrototypeOf(labels), Object.prototype);
});

Deno.test("decodeObject: refuses what it cannot read, with a named error", () => {
  const cases: [string, Uint8Array, RegExp][] = [
    ["no magic", Uint8Array.of(1, 2, 3, 4, 5), /k8s\\x00 prefix is missing/],
    ["JSON", new TextEncoder().encode('{"kind":"Status"}'), /prefix is missing/],
    ["unknown kind", envelope("v1", "Secret", new Uint8Array(0)), /unexpected object kind/],
    [
      "truncated varint",
      envelope("v1", "PersistentVolume", Uint8Array.of(0x98, 0x06, 0x80)),
      /truncated varint/,
    ],
    [
      "11-byte varint",
      envelope("v1", "PersistentVolume", Uint8Array.of(0x78, ...new Array(10).fill(0xff), 1)),
      /varint longer than 10 bytes/,
    ],
    [
      "length past the end",
      envelope("v1", "PersistentVolume", Uint8Array.of(0x0a, 0x05, 0x0a)),
      /truncated length-delimited/,
    ],
    [
      "wrong wire type",
      envelope("v1", "PersistentVolume", Uint8Array.of(0x08, 0x01)),
      /PersistentVolume field 1 \(metadata\) has wire type 0/,
    ],
    [
      "wire type 7",
      envelope("v1", "PersistentVolume", Uint8Array.of(0x7f)),
      /invalid wire type 7/,
    ],
    [
      "unterminated group",
      envelope("v1", "PersistentVolume", new ProtoWriter().tag(99, 3).finish()),
      /truncated varint/,
    ],
    [
      "content encoding",
      Uint8Array.of(0x6b, 0x38, 0x73, 0x00, 0x1a, 0x04, 0x67, 0x7a, 0x69, 0x70),
      /contentEncoding/,
    ],
  ];
  for (const [what, bytes, message] of cases) {
    assert.throws(() => decodeObject(bytes), (err: unknown) => {
      assert.ok(err instanceof KubeProtobufError, `${what}: ${err}`);
      assert.match(err.message, message, what);
      return true;
    });
  }
});

Deno.test("decodeObject: groups nested past the limit are refused before the stack runs out", () => {
  const w = new ProtoWriter();
  for (let i = 0; i < 200; i++) w.tag(99, 3);
  for (let i = 0; i < 200; i++) w.tag(99, 4);
  assert.throws(
    () => decodeObject(envelope("v1", "PersistentVolume", w.finish())),
    /nested deeper than 100/,
  );
});

Deno.test("decodeWatchEvent: type and enveloped object; an ERROR event's Status", () => {
  const va = volumeAttachment();
  const event = decodeWatchEvent(writeWatchEvent("MODIFIED", writeObject(va)));
  assert.deepStrictEqual(event, { type: "MODIFIED", object: withoutManagedFields(va) });
  const error = decodeWatchEvent(writeWatchEvent("ERROR", writeObject(expiredStatus())));
  assert.deepStrictEqual(error, { type: "ERROR", object: expiredStatus() });
  assert.throws(
    () => decodeWatchEvent(new ProtoWriter().string(1, "ADDED").finish()),
    /watch event without an object/,
  );
  // An object that switched to JSON inside a protobuf stream.
  assert.throws(
    () => decodeWatchEvent(writeWatchEvent("ADDED", new TextEncoder().encode(JSON.stringify(va)))),
    /prefix is missing/,
  );
});

Deno.test("tables: every kind decodes an object of its own table only", () => {
  assert.equal(KINDS.get("storage.k8s.io/v1 VolumeAttachment"), VOLUME_ATTACHMENT);
  const bytes = writeMessage(VOLUME_ATTACHMENT, withoutManagedFields(volumeAttachment()));
  assert.throws(() => decodeObject(envelope("storage.k8s.io/v1", "Volumeattachment", bytes)));
});
