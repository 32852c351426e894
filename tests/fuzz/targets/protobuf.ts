/**
 * Fuzz target `protobuf`: the protobuf wire codec (`lib/wire/grpc/protowire.ts`) on every CSI
 * message of the schema (`lib/csi/schema.ts`), against protobufjs reading the same descriptor
 * (`proto/csi_descriptor.json`), as `@grpc/proto-loader` converts its messages.
 *
 * The first input octet picks the message type, the rest is the message. When our decoder
 * accepts it (a `ProtoWireError` is a refusal, anything else a finding), the decoded object is
 * encoded again by our encoder, and that encoding must decode to the same object by ours and by
 * protobufjs (`longs: String, enums: String, defaults: true, oneofs: true`).
 *
 * Structured inputs are random objects of the message type encoded by protobufjs, sometimes
 * with unknown fields of every wire type appended.
 *
 * Compared as JSON with sorted keys and without `__proto__` map keys: protobufjs assigns map
 * entries with `obj[key] = value`, so a `__proto__` key sets the prototype there, where our
 * decoder keeps it as data.
 *
 * @module
 */

import protobuf from "protobufjs";
import descriptor from "../../../proto/csi_descriptor.json" with { type: "json" };
import type { FieldSchema, MessageSchema } from "../../../lib/csi/schema.ts";
import { csiMessages } from "../../../testkit/csi/schemas.ts";
import { decodeMessage, encodeMessage, ProtoWireError } from "../../../lib/wire/grpc/protowire.ts";
import type { FuzzTarget, Rng } from "../target.ts";

const MESSAGES: readonly MessageSchema[] = [...csiMessages().values()];
const ROOT = protobuf.Root.fromJSON(descriptor as protobuf.INamespace);
ROOT.resolveAll();
const CONVERSION: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** JSON with sorted keys and no `__proto__` keys. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) {
      if (k !== "__proto__") out[k] = (v as Record<string, unknown>)[k];
    }
    return out;
  });
}

const hex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));

/** Go-encoded CSI messages (spec v1.12.0, `Deterministic: true`), by message name. */
const GO_ENCODED: [string, string][] = [
  [
    "csi.v1.ControllerPublishVolumeRequest",
    "0a05766f6c2d3112066e6f64652d311a1f1a02080712190a04657874341202726f12076e6f6174696d651a04313030" +
    "3020012a120a0870617373776f72641206733363723374320c0a04706f6f6c120466617374",
  ],
  ["csi.v1.ControllerPublishVolumeRequest", "0a05766f6c2d3212066e6f64652d321a061a0208060a00"],
  ["csi.v1.ControllerUnpublishVolumeRequest", "0a05766f6c2d3112066e6f64652d311a060a016b120176"],
  ["csi.v1.ControllerPublishVolumeResponse", "0a140a0a6465766963655061746812062f6465762f78"],
  ["csi.v1.ListVolumesRequest", "080512027431"],
  [
    "csi.v1.ListVolumesResponse",
    "0a370a150880808080041205766f6c2d311a060a0161120162121e0a066e6f64652d310a066e6f64652d32120c08" +
    "011208646567726164656412046e657874",
  ],
  ["csi.v1.ProbeResponse", "0a00"],
  [
    "csi.v1.GetPluginInfoResponse",
    "0a126578616d706c652e6373692e6b38732e696f1205312e302e301a060a016d12016e",
  ],
  ["csi.v1.GetPluginCapabilitiesResponse", "0a040a0208010a0412020801"],
  ["csi.v1.ControllerGetCapabilitiesResponse", "0a040a0208020a040a02080a0a040a02080f"],
];

function randomString(rng: Rng): string {
  const pick = rng.int(5);
  if (pick === 0) return "";
  if (pick === 1) return "__proto__";
  if (pick === 2) return new TextDecoder().decode(rng.bytes(rng.int(12)));
  return "s" + rng.int(1000);
}

/** A random value for `field`, as protobufjs' `fromObject` takes it. */
function randomValue(rng: Rng, field: FieldSchema, depth: number): unknown {
  switch (field.kind) {
    case "string":
      return randomString(rng);
    case "bool":
      return rng.next() < 0.5;
    case "int32":
      return rng.int(2 ** 32) - 2 ** 31;
    case "int64":
      return String(BigInt(rng.int(2 ** 32)) * BigInt(rng.int(2 ** 32)) - (1n << 62n));
    case "enum":
      return rng.int(field.enumValues!.length + 2);
    case "message":
      return randomObject(rng, field.message!, depth + 1);
    case "map": {
      const out: Record<string, string> = {};
      for (let i = rng.int(4); i > 0; i--) out[randomString(rng)] = randomString(rng);
      return out;
    }
  }
}

/** A random object of `schema` (one member per oneof at most). */
function randomObject(rng: Rng, schema: MessageSchema, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const oneofs = new Set<string>();
  for (const field of schema.fields) {
    if (depth > 6 || rng.next() < 0.3) continue;
    if (field.oneof !== undefined) {
      if (oneofs.has(field.oneof)) continue;
      oneofs.add(field.oneof);
    }
    if (field.repeated) {
      const items: unknown[] = [];
      for (let i = rng.int(4); i > 0; i--) items.push(randomValue(rng, field, depth));
      out[field.name] = items;
    } else {
      out[field.name] = randomValue(rng, field, depth);
    }
  }
  return out;
}

/** Unknown fields (numbers above any CSI field) of every wire type, groups nested. */
function unknownFields(rng: Rng): number[] {
  const out: number[] = [];
  const tag = (n: number, wt: number) => {
    for (let v = n * 8 + wt;; v = Math.floor(v / 128)) {
      if (v < 128) {
        out.push(v);
        return;
      }
      out.push((v % 128) | 128);
    }
  };
  for (let i = 1 + rng.int(4); i > 0; i--) {
    const n = 900 + rng.int(100);
    switch (rng.int(5)) {
      case 0:
        tag(n, 0);
        out.push(0xff, 0xff, 0x03);
        break;
      case 1:
        tag(n, 1);
        out.push(...rng.bytes(8));
        break;
      case 2:
        tag(n, 2);
        out.push(3, ...rng.bytes(3));
        break;
      case 3:
        tag(n, 5);
        out.push(...rng.bytes(4));
        break;
      default: {
        const depth = 1 + rng.int(rng.next() < 0.1 ? 120 : 5);
        for (let d = 0; d < depth; d++) tag(n, 3);
        for (let d = 0; d < depth; d++) tag(n, 4);
      }
    }
  }
  return out;
}

export const target: FuzzTarget = {
  name: "protobuf",
  seeds(): Uint8Array[] {
    return GO_ENCODED.map(([name, h]) => {
      const index = MESSAGES.findIndex((m) => m.name === name);
      return Uint8Array.from([index, ...hex(h)]);
    });
  },
  generate(rng: Rng): Uint8Array {
    const index = rng.int(MESSAGES.length);
    const schema = MESSAGES[index]!;
    const type = ROOT.lookupType(schema.name);
    const bytes = type.encode(type.fromObject(randomObject(rng, schema, 0))).finish();
    const tail = rng.next() < 0.3 ? unknownFields(rng) : [];
    const repeat = rng.next() < 0.1 ? 2 : 1; // a message twice: merged by the decoder
    const out = [index];
    for (let i = 0; i < repeat; i++) out.push(...bytes, ...tail);
    return Uint8Array.from(out);
  },
  run(input: Uint8Array): void {
    if (input.length === 0) return;
    const schema = MESSAGES[input[0]! % MESSAGES.length]!;
    const bytes = input.subarray(1);
    let decoded: Record<string, unknown>;
    try {
      decoded = decodeMessage(schema, bytes);
    } catch (err) {
      if (err instanceof ProtoWireError) return;
      throw err;
    }
    const again = encodeMessage(schema, decoded);
    const ours = canonical(decodeMessage(schema, again));
    if (ours !== canonical(decoded)) {
      throw new Error(`${schema.name}: decode(encode(decode(x))) differs from decode(x)`);
    }
    const type = ROOT.lookupType(schema.name);
    const theirs = canonical(type.toObject(type.decode(again), CONVERSION));
    if (ours !== theirs) {
      throw new Error(
        `${schema.name}: ours ${ours.slice(0, 400)} protobufjs ${theirs.slice(0, 400)}`,
      );
    }
  },
};
