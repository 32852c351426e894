import assert from "node:assert/strict";
import { decodeKubeProtobuf } from "./protobuf_body.ts";

// A minimal protobuf writer for the test's messages.
function varint(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return out;
}
const enc = new TextEncoder();
function bytesField(no: number, value: number[] | string): number[] {
  const data = typeof value === "string" ? [...enc.encode(value)] : value;
  return [...varint((no << 3) | 2), ...varint(data.length), ...data];
}
function intField(no: number, value: number): number[] {
  return [...varint(no << 3), ...varint(value)];
}

function leaseBody(kind = "Lease"): Uint8Array {
  const meta = [
    ...bytesField(1, "external-attacher-leader-example-csi-k8s-io"),
    ...bytesField(3, "default"),
    ...bytesField(6, "42"),
    ...bytesField(11, [...bytesField(1, "app"), ...bytesField(2, "attacher")]),
  ];
  const time = [...intField(1, 1_795_000_000), ...intField(2, 425_668_000)];
  const spec = [
    ...bytesField(1, "replica-b"),
    ...intField(2, 15),
    ...bytesField(3, time),
    ...bytesField(4, time),
    ...intField(5, 3),
  ];
  const raw = [...bytesField(1, meta), ...bytesField(2, spec)];
  const typeMeta = [...bytesField(1, "coordination.k8s.io/v1"), ...bytesField(2, kind)];
  return new Uint8Array([
    0x6b,
    0x38,
    0x73,
    0x00,
    ...bytesField(1, typeMeta),
    ...bytesField(2, raw),
  ]);
}

Deno.test("decodeKubeProtobuf() reads a Lease as its JSON form", () => {
  assert.deepEqual(decodeKubeProtobuf(leaseBody()), {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name: "external-attacher-leader-example-csi-k8s-io",
      namespace: "default",
      resourceVersion: "42",
      labels: { app: "attacher" },
    },
    spec: {
      holderIdentity: "replica-b",
      leaseDurationSeconds: 15,
      acquireTime: "2026-11-18T11:06:40.425668Z",
      renewTime: "2026-11-18T11:06:40.425668Z",
      leaseTransitions: 3,
    },
  });
});

Deno.test("decodeKubeProtobuf() leaves other kinds and other bodies undecoded", () => {
  assert.equal(decodeKubeProtobuf(leaseBody("Event")), undefined);
  assert.equal(decodeKubeProtobuf(enc.encode('{"kind":"Lease"}')), undefined);
  assert.equal(decodeKubeProtobuf(new Uint8Array([0x6b, 0x38, 0x73, 0x00, 0x0a, 0x7f])), undefined);
});
