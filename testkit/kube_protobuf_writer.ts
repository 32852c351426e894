/**
 * Test kit: the JSON form of a Kubernetes object written as Kubernetes protobuf by the tables of
 * `lib/wire/kubernetes/tables.ts`, as gogo-protobuf writes it (strings, bools and numbers of
 * non-pointer fields written even when zero; maps and lists entry by entry), with the `k8s\x00`
 * envelope, as watch events and as length-delimited frames. For the decoder's round-trip tests,
 * the fuzz target's structured inputs and the adversarial tables; the independent check is
 * protobufjs on the upstream `.proto` files.
 *
 * Fields not in the tables are not written; {@link writeUnknown} appends unknown fields.
 *
 * @module
 */

import { type FieldTable, KINDS, type MessageTable } from "../lib/wire/kubernetes/tables.ts";

const UTF8 = new TextEncoder();

/** A growing byte buffer with the protobuf primitives. */
export class ProtoWriter {
  #buf = new Uint8Array(256);
  #len = 0;

  #ensure(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.#len + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.#buf.subarray(0, this.#len));
    this.#buf = grown;
  }

  /** Raw bytes. */
  raw(bytes: Uint8Array): this {
    this.#ensure(bytes.length);
    this.#buf.set(bytes, this.#len);
    this.#len += bytes.length;
    return this;
  }

  /** An unsigned varint of up to 64 bits; negative numbers as 10-byte two's complement. */
  varint(value: number | bigint): this {
    let v = BigInt.asUintN(64, BigInt(value));
    const out: number[] = [];
    while (v > 0x7fn) {
      out.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    out.push(Number(v));
    return this.raw(Uint8Array.from(out));
  }

  tag(number: number, wireType: number): this {
    return this.varint(number * 8 + wireType);
  }

  /** A length-delimited field. */
  bytes(number: number, bytes: Uint8Array): this {
    return this.tag(number, 2).varint(bytes.length).raw(bytes);
  }

  string(number: number, text: string): this {
    return this.bytes(number, UTF8.encode(text));
  }

  finish(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }
}

/** Parses RFC 3339 text into Time seconds and nanoseconds. */
function timeParts(text: string): [number, number] {
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new TypeError(`not a time: ${text}`);
  const fraction = /\.(\d+)/.exec(text)?.[1] ?? "";
  const nanos = fraction === "" ? 0 : Number(fraction.padEnd(9, "0").slice(0, 9));
  return [Math.floor(ms / 1000), nanos];
}

/** Bytes appended to every message of a proto name (e.g. unknown fields in each ObjectMeta). */
export type Extra = Readonly<Record<string, Uint8Array>>;

/** `value` (a JSON object of `table`) as the message's bytes. */
export function writeMessage(
  table: MessageTable,
  value: Record<string, unknown>,
  extra: Extra = {},
): Uint8Array {
  const w = new ProtoWriter();
  for (const f of table.fields) writeField(w, f, value, extra);
  const more = extra[table.proto];
  if (more !== undefined) w.raw(more);
  return w.finish();
}

function writeField(
  w: ProtoWriter,
  f: FieldTable,
  value: Record<string, unknown>,
  extra: Extra,
): void {
  if (f.kind === "inline") {
    w.bytes(f.number, writeMessage(f.message!, value, extra));
    return;
  }
  const v = value[f.name];
  if (v === null && (f.kind === "time" || f.kind === "microTime")) {
    // A zero Time present on the wire (a pointer to it): an empty message, as gogo writes it.
    w.bytes(f.number, new Uint8Array(0));
    return;
  }
  if (v === undefined || v === null) return;
  switch (f.kind) {
    case "string":
      w.string(f.number, v as string);
      return;
    case "bool":
      w.tag(f.number, 0).varint(v ? 1 : 0);
      return;
    case "int32":
    case "int64":
      w.tag(f.number, 0).varint(v as number);
      return;
    case "time":
    case "microTime": {
      const [seconds, nanos] = timeParts(v as string);
      const t = new ProtoWriter().tag(1, 0).varint(seconds);
      if (nanos !== 0) t.tag(2, 0).varint(nanos);
      w.bytes(f.number, t.finish());
      return;
    }
    case "map":
    case "quantityMap":
      for (const [key, item] of Object.entries(v as Record<string, string>)) {
        const entry = new ProtoWriter().string(1, key);
        if (f.kind === "map") entry.string(2, item);
        else entry.bytes(2, new ProtoWriter().string(1, item).finish());
        w.bytes(f.number, entry.finish());
      }
      return;
    case "strings":
      for (const item of v as string[]) w.string(f.number, item);
      return;
    case "messages":
      for (const item of v as Record<string, unknown>[]) {
        w.bytes(f.number, writeMessage(f.message!, item, extra));
      }
      return;
    case "message":
      w.bytes(f.number, writeMessage(f.message!, v as Record<string, unknown>, extra));
      return;
  }
}

/** The enveloped object: `k8s\x00` and a `runtime.Unknown` naming its kind. */
export function writeObject(
  obj: Record<string, unknown>,
  extra: Extra = {},
): Uint8Array {
  const apiVersion = obj.apiVersion as string;
  const kind = obj.kind as string;
  const table = KINDS.get(`${apiVersion} ${kind}`);
  if (table === undefined) throw new TypeError(`no table for ${apiVersion} ${kind}`);
  return envelope(apiVersion, kind, writeMessage(table, obj, extra));
}

/** `k8s\x00` and a `runtime.Unknown` of `raw`. */
export function envelope(apiVersion: string, kind: string, raw: Uint8Array): Uint8Array {
  const typeMeta = new ProtoWriter().string(1, apiVersion).string(2, kind).finish();
  const unknown = new ProtoWriter().bytes(1, typeMeta).bytes(2, raw).string(3, "").string(4, "")
    .finish();
  return concat(Uint8Array.of(0x6b, 0x38, 0x73, 0x00), unknown);
}

/** A bare `metav1.WatchEvent` of `type` and the enveloped `object`. */
export function writeWatchEvent(type: string, object: Uint8Array): Uint8Array {
  const raw = new ProtoWriter().bytes(1, object).finish();
  return new ProtoWriter().string(1, type).bytes(2, raw).finish();
}

/** `frame` behind its 4-byte big-endian length. */
export function lengthFrame(frame: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + frame.length);
  new DataView(out.buffer).setUint32(0, frame.length);
  out.set(frame, 4);
  return out;
}

/** One field of each wire type under field numbers no table uses (900 to 904). */
export function writeUnknown(): Uint8Array {
  return new ProtoWriter()
    .tag(900, 0).varint(2n ** 63n)
    .tag(901, 1).raw(new Uint8Array(8))
    .string(902, "unknown")
    .tag(903, 3).tag(1, 0).varint(1).tag(903, 4)
    .tag(904, 5).raw(new Uint8Array(4))
    .finish();
}

function concat(a: Uint8Array, b?: Uint8Array): Uint8Array {
  if (b === undefined || b.length === 0) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
