/**
 * Our protobuf codec (`lib/wire/grpc/protowire.ts` driven by `./schema.ts`) against an
 * independent implementation, protobufjs reading `proto/csi_descriptor.json`, on every CSI
 * message the attacher uses: the same object encodes to the same bytes in both, the bytes of
 * each decode in the other to the same object, unknown fields of every wire type are skipped
 * alike, and the `csi_secret` option marks the same fields in both.
 */

import assert from "node:assert/strict";
import protobuf from "protobufjs";
import type { FieldSchema, MessageSchema } from "./schema.ts";
import { csiMessages } from "../../testkit/csi/schemas.ts";
import { decodeMessage, encodeMessage } from "../wire/grpc/protowire.ts";
import { csiDescriptor } from "../../testkit/csi/proto_loader.ts";

const ROOT = protobuf.Root.fromJSON(csiDescriptor());
ROOT.resolveAll();

/** How `@grpc/proto-loader` converts, which our decoder's objects follow. */
const CONVERSION: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/**
 * A value for every field, none of them the proto3 default (which protobufjs would write and we
 * would not): negative and beyond-2^53 integers, the last enum value, a map with a non-ASCII
 * entry, two items in repeated fields. In each oneof, member `choice` (modulo the members).
 */
function fullObject(schema: MessageSchema, choice: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const members = new Map<string, FieldSchema[]>();
  for (const f of schema.fields) {
    if (f.oneof !== undefined) members.set(f.oneof, [...(members.get(f.oneof) ?? []), f]);
  }
  for (const field of schema.fields) {
    if (field.oneof !== undefined) {
      const all = members.get(field.oneof)!;
      if (all[choice % all.length] !== field) continue;
    }
    const one = () => value(field, choice);
    out[field.name] = field.repeated ? [one(), one()] : one();
  }
  return out;
}

function value(field: FieldSchema, choice: number): unknown {
  switch (field.kind) {
    case "string":
      return `${field.name}-ü`;
    case "bool":
      return true;
    case "int32":
      return -7;
    case "int64":
      return "-9007199254740993";
    case "enum":
      return field.enumValues!.at(-1);
    case "map":
      return { a: "1", "ü": "✓", "": "" };
    case "message":
      return fullObject(field.message!, choice);
  }
}

/** The most oneof members any message has: one object per member index covers them all. */
function variants(schema: MessageSchema): number {
  const counts = new Map<string, number>();
  for (const f of schema.fields) if (f.oneof) counts.set(f.oneof, (counts.get(f.oneof) ?? 0) + 1);
  let most = 1;
  for (const f of schema.fields) if (f.message) most = Math.max(most, variants(f.message));
  return Math.max(most, ...counts.values());
}

/** Unknown fields (numbers no CSI message uses) of wire types 0, 1, 2, 5 and a nested group. */
const UNKNOWN = Uint8Array.from([
  0xb8,
  0x3e,
  0x96,
  0x01, // 999 varint 150
  0xb9,
  0x3e,
  1,
  2,
  3,
  4,
  5,
  6,
  7,
  8, // 999 fixed64
  0xba,
  0x3e,
  3,
  0x61,
  0x62,
  0x63, // 999 length-delimited "abc"
  0xbd,
  0x3e,
  9,
  9,
  9,
  9, // 999 fixed32
  0xbb,
  0x3e,
  0xc3,
  0x3e,
  0x08,
  0x01,
  0xc4,
  0x3e,
  0xbc,
  0x3e, // 999 group { 1000 group { 1: 1 } }
]);

function withUnknown(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(UNKNOWN.length + bytes.length + UNKNOWN.length);
  out.set(UNKNOWN);
  out.set(bytes, UNKNOWN.length);
  out.set(UNKNOWN, UNKNOWN.length + bytes.length);
  return out;
}

const MESSAGES = [...csiMessages().values()];

Deno.test("every CSI message encodes to the same bytes in our codec and in protobufjs", () => {
  assert.ok(MESSAGES.length >= 25, `${MESSAGES.length} messages`);
  for (const schema of MESSAGES) {
    const type = ROOT.lookupType(schema.name);
    for (let choice = 0; choice < variants(schema); choice++) {
      const object = fullObject(schema, choice);
      const ours = encodeMessage(schema, object);
      const theirs = type.encode(type.fromObject(object)).finish();
      assert.equal(hex(ours), hex(theirs), `${schema.name} #${choice}`);
    }
  }
});

Deno.test("bytes of either codec decode to the same object in the other, unknown fields skipped", () => {
  for (const schema of MESSAGES) {
    const type = ROOT.lookupType(schema.name);
    for (let choice = 0; choice < variants(schema); choice++) {
      const object = fullObject(schema, choice);
      for (
        const bytes of [
          encodeMessage(schema, object),
          type.encode(type.fromObject(object)).finish(),
        ]
      ) {
        const where = `${schema.name} #${choice}`;
        const ours = decodeMessage(schema, bytes);
        const theirs = type.toObject(type.decode(bytes), CONVERSION);
        // Key order included: responses are logged as JSON, as proto-loader's objects were.
        assert.equal(JSON.stringify(ours), JSON.stringify(theirs), where);
        const unknown = withUnknown(bytes);
        assert.equal(
          JSON.stringify(decodeMessage(schema, unknown)),
          JSON.stringify(ours),
          `${where} + unknown`,
        );
        assert.equal(
          JSON.stringify(type.toObject(type.decode(unknown), CONVERSION)),
          JSON.stringify(theirs),
          `${where} + unknown, protobufjs`,
        );
        // Neither keeps unknown fields: both encode the decoded object to the known fields only.
        assert.equal(
          hex(encodeMessage(schema, decodeMessage(schema, unknown))),
          hex(encodeMessage(schema, ours)),
        );
      }
    }
  }
});

Deno.test("the csi_secret option marks the same fields in our schema and in protobufjs' reflection", () => {
  const secret: string[] = [];
  for (const schema of MESSAGES) {
    const type = ROOT.lookupType(schema.name);
    for (const field of schema.fields) {
      const reflected = type.fields[field.name];
      assert.ok(reflected !== undefined, `${schema.name}.${field.name}`);
      assert.equal(reflected.id, field.number, `${schema.name}.${field.name}: number`);
      assert.equal(
        reflected.options?.["(csi_secret)"] === true,
        field.secret,
        `${schema.name}.${field.name}: csi_secret`,
      );
      if (field.secret) secret.push(`${schema.name}.${field.name}`);
    }
    assert.deepEqual(
      Object.keys(type.fields).sort(),
      schema.fields.map((f) => f.name).sort(),
      `${schema.name}: the same fields`,
    );
  }
  assert.deepEqual(secret, [
    "csi.v1.ControllerPublishVolumeRequest.secrets",
    "csi.v1.ControllerUnpublishVolumeRequest.secrets",
  ]);
});
