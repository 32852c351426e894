/**
 * The protobuf wire format (https://protobuf.dev/programming-guides/encoding/) for messages
 * described by {@link import("./descriptor.ts")} (the CSI messages: `lib/csi/schema.ts`).
 *
 * Encoding takes the camelCase objects the attacher builds: proto3 default values (empty string,
 * false, 0, the enum's zero value) are left out as Go leaves them out; enums are given by name
 * (or number); int64 as a decimal string, bigint or safe integer; absent or `null` fields are
 * left out. Decoding gives the objects `@grpc/proto-loader` gives with `longs: String, enums:
 * String, defaults: true, oneofs: true`, with the same key order, so that logged responses read
 * as before: every field present (repeated `[]`, maps `{}`, absent messages `null`), int64 as
 * decimal strings, enums by name (a number the schema does not know stays a number), and each
 * set oneof named by a virtual property (`"type": "service"`). Unknown fields are skipped.
 *
 * Refused with {@link ProtoWireError}: truncated input, a varint longer than 10 bytes, a length
 * or tag above 2^32-1, field number 0, wire types 6 and 7, a known field with the wrong wire type,
 * an end-group without its start, messages or groups nested deeper than {@link MAX_NESTING} (100,
 * protobuf's default recursion limit). Decoding is linear in the input: a singular message field
 * repeated on the wire is merged in place, never rebuilt. Tested byte for byte against Go's encoding of the CSI messages
 * (`lib/csi/schema_test.ts`) and against protobufjs (`testkit/csi/proto_loader_test.ts`).
 *
 * @module
 */

import type { FieldDescriptor, MessageDescriptor } from "./descriptor.ts";
import {
  checkDepth,
  MAX_NESTING,
  ProtoWireError,
  Reader,
  WIRE_LEN,
  WIRE_VARINT,
} from "../protobuf/reader.ts";

export { MAX_NESTING, ProtoWireError };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// ---------------------------------------------------------------------------------------------
// Encoding

/**
 * The bytes of one message being encoded. Strings are written as UTF-8 straight into the buffer
 * and a nested message in place after a one-byte length that is widened when it turns out
 * longer, so that a message costs one buffer, not one per string, map entry and nested message.
 * {@link encodeMessage} reuses one writer (encoding is synchronous) and copies the result out.
 */
class Writer {
  buf = new Uint8Array(256);
  len = 0;

  ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
  }

  varint(value: number): void {
    this.ensure(10);
    while (value > 0x7f) {
      this.buf[this.len++] = (value % 0x80) | 0x80;
      value = Math.floor(value / 0x80);
    }
    this.buf[this.len++] = value;
  }

  /** A 64-bit two's complement varint. */
  bigVarint(value: bigint): void {
    this.ensure(10);
    let v = BigInt.asUintN(64, value);
    while (v > 0x7fn) {
      this.buf[this.len++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.len++] = Number(v);
  }

  /** A length-delimited string: its UTF-8 length, then its UTF-8 bytes. */
  string(text: string): void {
    const n = text.length;
    this.ensure(10 + n);
    let ascii = true;
    for (let i = 0; i < n; i++) {
      if (text.charCodeAt(i) >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) {
      this.varint(n);
      const buf = this.buf;
      let at = this.len;
      for (let i = 0; i < n; i++) buf[at++] = text.charCodeAt(i);
      this.len = at;
      return;
    }
    const bytes = encoder.encode(text);
    this.varint(bytes.length);
    this.ensure(bytes.length);
    this.buf.set(bytes, this.len);
    this.len += bytes.length;
  }

  /** Starts a length-delimited part written in place; {@link endLength} sets its length. */
  startLength(): number {
    this.ensure(1);
    return this.len++;
  }

  /** Ends the part begun at `at`: its length goes in front of it, as a varint. */
  endLength(at: number): void {
    const size = this.len - at - 1;
    if (size < 0x80) {
      this.buf[at] = size;
      return;
    }
    let width = 1;
    for (let v = size; v > 0x7f; v = Math.floor(v / 0x80)) width++;
    this.ensure(width - 1);
    this.buf.copyWithin(at + width, at + 1, this.len);
    this.len += width - 1;
    let v = size;
    for (let i = 0; i < width - 1; i++) {
      this.buf[at + i] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[at + width - 1] = v;
  }

  tag(number: number, wireType: number): void {
    this.varint(number * 8 + wireType);
  }

  /** A copy of what was written; the writer starts empty again. */
  finish(): Uint8Array {
    const out = this.buf.slice(0, this.len);
    this.len = 0;
    if (this.buf.length > MAX_KEPT_WRITER_BYTES) this.buf = new Uint8Array(256);
    return out;
  }
}

/** The largest buffer the shared writer keeps between messages. */
const MAX_KEPT_WRITER_BYTES = 64 * 1024;

/** The writer of {@link encodeMessage}: encoding never yields, so one serves every call. */
const SHARED_WRITER = new Writer();

/**
 * Encodes `value` as message `schema`.
 *
 * @throws {ProtoWireError} when a field has a value of the wrong type (naming the field).
 */
export function encodeMessage(schema: MessageDescriptor, value: object): Uint8Array {
  const w = SHARED_WRITER;
  w.len = 0;
  try {
    writeMessage(w, schema, value as Record<string, unknown>, schema.name);
  } catch (err) {
    w.len = 0;
    throw err;
  }
  return w.finish();
}

function writeMessage(
  w: Writer,
  schema: MessageDescriptor,
  value: Record<string, unknown>,
  path: string,
): void {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ProtoWireError(`${path}: expected a message object, got ${describe(value)}`);
  }
  for (const field of schema.fields) {
    const v = value[field.name];
    if (v === undefined || v === null) continue;
    const fieldPath = `${path}.${field.name}`;
    if (field.kind === "map") {
      if (typeof v !== "object" || Array.isArray(v)) {
        throw new ProtoWireError(`${fieldPath}: expected a string map, got ${describe(v)}`);
      }
      for (const [key, item] of Object.entries(v as Record<string, unknown>)) {
        if (typeof item !== "string") {
          // Neither key nor value is named: the map may hold secrets.
          throw new ProtoWireError(`${fieldPath}: expected string values, got a ${typeof item}`);
        }
        w.tag(field.number, WIRE_LEN);
        const entry = w.startLength();
        w.tag(1, WIRE_LEN);
        w.string(key);
        w.tag(2, WIRE_LEN);
        w.string(item);
        w.endLength(entry);
      }
    } else if (field.repeated) {
      if (!Array.isArray(v)) {
        throw new ProtoWireError(`${fieldPath}: expected an array, got ${describe(v)}`);
      }
      v.forEach((item, i) => writeValue(w, field, item, `${fieldPath}[${i}]`, true));
    } else {
      writeValue(w, field, v, fieldPath, field.kind === "message");
    }
  }
}

/** Writes one value; `always` writes a proto3 default too (repeated items, messages). */
function writeValue(
  w: Writer,
  field: FieldDescriptor,
  v: unknown,
  path: string,
  always: boolean,
): void {
  switch (field.kind) {
    case "string": {
      if (typeof v !== "string") {
        throw new ProtoWireError(`${path}: expected a string, got ${describe(v)}`);
      }
      if (v === "" && !always) return;
      w.tag(field.number, WIRE_LEN);
      w.string(v);
      return;
    }
    case "bool": {
      if (typeof v !== "boolean") {
        throw new ProtoWireError(`${path}: expected a boolean, got ${describe(v)}`);
      }
      if (!v && !always) return;
      w.tag(field.number, WIRE_VARINT);
      w.varint(v ? 1 : 0);
      return;
    }
    case "int32": {
      if (typeof v !== "number" || !Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) {
        throw new ProtoWireError(`${path}: expected a 32-bit integer, got ${describe(v)}`);
      }
      if (v === 0 && !always) return;
      w.tag(field.number, WIRE_VARINT);
      if (v >= 0) w.varint(v);
      else w.bigVarint(BigInt(v));
      return;
    }
    case "int64": {
      const big = toInt64(v, path);
      if (big === 0n && !always) return;
      w.tag(field.number, WIRE_VARINT);
      w.bigVarint(big);
      return;
    }
    case "enum": {
      // A name of the enum, or any int32: proto3 enums are open, and the decoder gives a number
      // the schema does not name as that number, negative ones included.
      const n = typeof v === "number"
        ? (Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31 ? v : -1)
        : typeof v === "string"
        ? field.enumValues!.indexOf(v)
        : -1;
      if (n === -1 && v !== -1) {
        throw new ProtoWireError(`${path}: unknown enum value ${describe(v)}`);
      }
      if (n === 0 && !always) return;
      w.tag(field.number, WIRE_VARINT);
      if (n >= 0) w.varint(n);
      else w.bigVarint(BigInt(n));
      return;
    }
    case "message": {
      w.tag(field.number, WIRE_LEN);
      const nested = w.startLength();
      writeMessage(w, field.message!, v as Record<string, unknown>, path);
      w.endLength(nested);
      return;
    }
    case "map":
      throw new ProtoWireError(`${path}: a map cannot be repeated`);
  }
}

function toInt64(v: unknown, path: string): bigint {
  try {
    if (typeof v === "bigint") return BigInt.asIntN(64, v);
    if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v);
    if (typeof v === "string" && /^-?\d+$/.test(v)) {
      const big = BigInt(v);
      if (big === BigInt.asIntN(64, big)) return big;
    }
  } catch {
    // fall through to the error
  }
  throw new ProtoWireError(`${path}: expected a 64-bit integer, got ${describe(v)}`);
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v);
  if (typeof v === "object") return "an object";
  return `${typeof v} ${String(v)}`;
}

// ---------------------------------------------------------------------------------------------
// Decoding

/**
 * Decodes message `schema` from `bytes` (see the module documentation for the form). A singular
 * message field that occurs more than once is merged into the first, in place (the encoding
 * guide's "Last One Wins" and merge rules, as protobuf-go does): repeated fields and maps append,
 * scalars present later replace earlier ones.
 *
 * @throws {ProtoWireError} on malformed bytes, a known field with the wrong wire type, or
 *   nesting deeper than {@link MAX_NESTING}.
 */
export function decodeMessage(
  schema: MessageDescriptor,
  bytes: Uint8Array,
): Record<string, unknown> {
  return readMessage(schema, new Reader(bytes, 0, bytes.length), 0, undefined);
}

/**
 * Walks the fields of the message in `bytes[start, end)` (at nesting `depth`) in wire order and
 * builds nothing: `visit(number, wireType, from, to)` gets each field's number and wire type and
 * the bounds of its value, for a length-delimited field (a string, bytes, a message) those of
 * its payload. For a decoder that reads one message with fewer objects than
 * {@link decodeMessage} makes, e.g. a ListVolumes page of 100 000 entries read straight into the
 * caller's table. A decoder built on it must refuse a known field of the wrong wire type itself.
 *
 * @throws {ProtoWireError} on malformed bytes (as {@link decodeMessage}: truncated input, field
 *   number 0, invalid wire types, nesting deeper than {@link MAX_NESTING}).
 */
export function visitFields(
  bytes: Uint8Array,
  start: number,
  end: number,
  depth: number,
  visit: (number: number, wireType: number, from: number, to: number) => void,
): void {
  checkDepth(depth);
  const r = new Reader(bytes, start, end);
  while (r.pos < r.end) {
    const tag = r.smallVarint();
    const number = tag >>> 3;
    const wireType = tag & 7;
    if (number === 0) throw new ProtoWireError("field number 0");
    if (wireType === WIRE_LEN) {
      const length = r.smallVarint();
      const from = r.pos;
      if (from + length > r.end) throw new ProtoWireError("truncated length-delimited field");
      r.pos += length;
      visit(number, wireType, from, from + length);
    } else {
      const from = r.pos;
      r.skip(wireType, number, depth);
      visit(number, wireType, from, r.pos);
    }
  }
}

/** The text of `bytes[from, to)`, decoded as {@link decodeMessage} decodes a string field. */
export function decodeText(bytes: Uint8Array, from: number, to: number): string {
  return decoder.decode(bytes.subarray(from, to));
}

/** The wire type of length-delimited fields (strings, bytes, messages). */
export const WIRE_TYPE_LEN = WIRE_LEN;

/** A message with every field at its default, keys in proto-loader's order. */
function newMessage(schema: MessageDescriptor): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // Key order as proto-loader gives it: repeated fields, maps, then the other non-oneof fields,
  // each group by field number; set oneof members come last.
  for (const f of schema.fields) if (f.repeated) out[f.name] = [];
  for (const f of schema.fields) if (f.kind === "map") out[f.name] = {};
  for (const f of schema.fields) {
    if (!f.repeated && f.kind !== "map" && f.oneof === undefined) out[f.name] = defaultValue(f);
  }
  return out;
}

/**
 * Reads the fields of one message (at nesting `depth`) into `into`, which holds what earlier
 * occurrences of the same message set, or into a new message.
 */
function readMessage(
  schema: MessageDescriptor,
  r: Reader,
  depth: number,
  into: Record<string, unknown> | undefined,
): Record<string, unknown> {
  checkDepth(depth);
  const out = into ?? newMessage(schema);
  const oneofs = new Map<string, [FieldDescriptor, unknown]>();
  if (into !== undefined) {
    for (const f of schema.fields) {
      if (f.oneof !== undefined && out[f.oneof] === f.name) oneofs.set(f.oneof, [f, out[f.name]]);
    }
  }
  while (r.pos < r.end) {
    const tag = r.smallVarint();
    const number = tag >>> 3;
    const wireType = tag & 7;
    if (number === 0) throw new ProtoWireError("field number 0");
    const field = schema.byNumber.get(number);
    if (field === undefined) {
      r.skip(wireType, number, depth);
      continue;
    }
    const expected = field.kind === "string" || field.kind === "message" || field.kind === "map"
      ? WIRE_LEN
      : WIRE_VARINT;
    if (wireType !== expected) {
      throw new ProtoWireError(
        `${schema.name}.${field.name}: wire type ${wireType}, expected ${expected}`,
      );
    }
    if (field.kind === "map") {
      const [key, value] = readMapEntry(r, depth);
      setOwn(out[field.name] as Record<string, string>, key, value);
    } else if (field.repeated) {
      (out[field.name] as unknown[]).push(readValue(field, r, depth, undefined));
    } else if (field.oneof !== undefined) {
      const previous = oneofs.get(field.oneof);
      const merge = field.kind === "message" && previous?.[0] === field;
      const value = readValue(field, r, depth, merge ? previous[1] : undefined);
      oneofs.set(field.oneof, [field, value]);
    } else if (field.kind === "message") {
      // A message field seen twice is merged (protobuf encoding rules).
      const previous = out[field.name];
      out[field.name] = readValue(field, r, depth, previous === null ? undefined : previous);
    } else {
      out[field.name] = readValue(field, r, depth, undefined);
    }
  }
  const set = [...oneofs.entries()].sort((a, b) => a[1][0].number - b[1][0].number);
  for (const [oneof, [field, value]] of set) {
    const before = out[oneof];
    if (typeof before === "string" && before !== field.name) delete out[before];
    // Set members come last, in field-number order, however often the message occurred.
    delete out[field.name];
    delete out[oneof];
    out[field.name] = value;
    out[oneof] = field.name;
  }
  return out;
}

function setOwn(target: Record<string, string>, key: string, value: string): void {
  if (key === "__proto__") {
    Object.defineProperty(target, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    target[key] = value;
  }
}

function readMapEntry(r: Reader, depth: number): [string, string] {
  const [start, end] = r.lengthDelimited();
  const entry = new Reader(r.buf, start, end);
  let key = "";
  let value = "";
  while (entry.pos < entry.end) {
    const tag = entry.smallVarint();
    const number = tag >>> 3;
    if ((number === 1 || number === 2) && (tag & 7) === WIRE_LEN) {
      const [s, e] = entry.lengthDelimited();
      const text = decoder.decode(r.buf.subarray(s, e));
      if (number === 1) key = text;
      else value = text;
    } else {
      entry.skip(tag & 7, number, depth + 1);
    }
  }
  return [key, value];
}

/**
 * Reads one value of `field` in a message at nesting `depth`; a message value is read into
 * `into` when given (a merge).
 */
function readValue(field: FieldDescriptor, r: Reader, depth: number, into: unknown): unknown {
  switch (field.kind) {
    case "string": {
      const [s, e] = r.lengthDelimited();
      return decoder.decode(r.buf.subarray(s, e));
    }
    case "message": {
      const [s, e] = r.lengthDelimited();
      const target = into as Record<string, unknown> | undefined;
      return readMessage(field.message!, new Reader(r.buf, s, e), depth + 1, target);
    }
    case "bool": {
      const v = r.varint();
      return typeof v === "bigint" ? v !== 0n : v !== 0;
    }
    case "int64": {
      const v = r.varint();
      return BigInt.asIntN(64, BigInt(v)).toString();
    }
    case "int32":
    case "enum": {
      const v = r.varint();
      const n = Number(BigInt.asIntN(32, BigInt(v)));
      if (field.kind === "int32") return n;
      return field.enumValues![n] ?? n;
    }
    case "map":
      throw new ProtoWireError("a map value outside a map");
  }
}

function defaultValue(field: FieldDescriptor): unknown {
  switch (field.kind) {
    case "string":
      return "";
    case "bool":
      return false;
    case "int32":
      return 0;
    case "int64":
      return "0";
    case "enum":
      return field.enumValues![0];
    case "message":
      return null;
    case "map":
      return {};
  }
}
