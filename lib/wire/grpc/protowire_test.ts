import assert from "node:assert/strict";
import { decodeMessage, encodeMessage, MAX_NESTING, ProtoWireError } from "./protowire.ts";
import type { FieldDescriptor, MessageDescriptor } from "./descriptor.ts";

/** A message type from its fields (numbers in order). */
function message(name: string, fields: FieldDescriptor[]): MessageDescriptor {
  return { name, fields, byNumber: new Map(fields.map((f) => [f.number, f])) };
}

/** `Inner { repeated string items = 1; map<string,string> labels = 2; string name = 3; bool on = 4; Inner child = 5; }` */
const INNER: MessageDescriptor = (() => {
  const fields: FieldDescriptor[] = [
    { name: "items", number: 1, kind: "string", repeated: true },
    { name: "labels", number: 2, kind: "map", repeated: false },
    { name: "name", number: 3, kind: "string", repeated: false },
    { name: "on", number: 4, kind: "bool", repeated: false },
  ];
  const inner = message("t.Inner", fields);
  fields.push({ name: "child", number: 5, kind: "message", repeated: false, message: inner });
  (inner.byNumber as Map<number, FieldDescriptor>).set(5, fields[4]!);
  return inner;
})();

/** `Outer { Inner inner = 1; oneof choice { Inner a = 2; Inner b = 3; } }` */
const OUTER = message("t.Outer", [
  { name: "inner", number: 1, kind: "message", repeated: false, message: INNER },
  { name: "a", number: 2, kind: "message", repeated: false, message: INNER, oneof: "choice" },
  { name: "b", number: 3, kind: "message", repeated: false, message: INNER, oneof: "choice" },
]);

function cat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** Field `number` of `outer` holding the encoding of `inner`. */
function wrap(number: number, inner: Uint8Array): Uint8Array {
  return encodeMessage(
    OUTER,
    { [OUTER.byNumber.get(number)!.name]: decodeMessage(INNER, inner) },
  );
}

Deno.test("decodeMessage() merges a singular message field that occurs again, in place", () => {
  const first = encodeMessage(INNER, {
    items: ["a"],
    labels: { k: "1", x: "x" },
    name: "first",
    on: true,
    child: { items: ["c1"], name: "child" },
  });
  const second = encodeMessage(INNER, {
    items: ["b"],
    labels: { k: "2" },
    child: { items: ["c2"] },
  });
  const merged = decodeMessage(OUTER, cat(wrap(1, first), wrap(1, second)));
  assert.deepEqual(merged.inner, {
    items: ["a", "b"],
    labels: { k: "2", x: "x" },
    name: "first",
    on: true,
    child: { items: ["c1", "c2"], labels: {}, name: "child", on: false, child: null },
  });
});

Deno.test("decodeMessage() merges a oneof member that occurs again and replaces it by another", () => {
  const one = encodeMessage(INNER, { items: ["1"] });
  const two = encodeMessage(INNER, { items: ["2"] });
  const same = decodeMessage(OUTER, cat(wrap(2, one), wrap(2, two)));
  assert.deepEqual(same, {
    inner: null,
    a: { items: ["1", "2"], labels: {}, name: "", on: false, child: null },
    choice: "a",
  });
  const other = decodeMessage(OUTER, cat(wrap(2, one), wrap(3, two)));
  assert.deepEqual(Object.keys(other), ["inner", "b", "choice"]);
  assert.deepEqual((other.b as { items: string[] }).items, ["2"]);
});

Deno.test("decodeMessage() merges 200 000 occurrences of a message field in linear time", () => {
  const occurrence = wrap(1, encodeMessage(INNER, { items: ["x"], labels: { k: "v" } }));
  const count = 200_000;
  const bytes = new Uint8Array(occurrence.length * count);
  for (let i = 0; i < count; i++) bytes.set(occurrence, i * occurrence.length);
  const started = performance.now();
  const decoded = decodeMessage(OUTER, bytes) as { inner: { items: string[] } };
  const ms = performance.now() - started;
  assert.equal(decoded.inner.items.length, count);
  // Linear: well under a second here. Rebuilding the arrays per occurrence took hours.
  assert.ok(ms < 5_000, `${ms.toFixed(0)} ms`);
});

/** `depth` unknown groups (field 9) nested in each other, inside `Inner`. */
function nestedGroups(depth: number): Uint8Array {
  const start = 9 * 8 + 3;
  const end = 9 * 8 + 4;
  return Uint8Array.from([...new Array(depth).fill(start), ...new Array(depth).fill(end)]);
}

/** `depth` levels of `child` messages below an `Inner`. */
function nestedChildren(depth: number): Uint8Array {
  let bytes: Uint8Array = new Uint8Array();
  for (let i = 0; i < depth; i++) {
    const length = bytes.length;
    const prefix: number[] = [5 * 8 + 2];
    for (let v = length;; v = Math.floor(v / 128)) {
      if (v < 128) {
        prefix.push(v);
        break;
      }
      prefix.push((v % 128) | 128);
    }
    bytes = cat(Uint8Array.from(prefix), bytes);
  }
  return bytes;
}

Deno.test("nesting deeper than MAX_NESTING fails with ProtoWireError, not a stack overflow", () => {
  assert.equal(MAX_NESTING, 100);
  assert.doesNotThrow(() => decodeMessage(INNER, nestedGroups(MAX_NESTING)));
  assert.doesNotThrow(() => decodeMessage(INNER, nestedChildren(MAX_NESTING)));
  for (const bytes of [nestedGroups(MAX_NESTING + 1), nestedChildren(MAX_NESTING + 1)]) {
    assert.throws(() => decodeMessage(INNER, bytes), /nested deeper than 100 levels/);
  }
  for (const bytes of [nestedGroups(200_000), nestedChildren(20_000)]) {
    assert.throws(
      () => decodeMessage(INNER, bytes),
      (err: unknown) => err instanceof ProtoWireError && /nested deeper/.test(err.message),
    );
  }
});

Deno.test("an enum number the schema does not name round-trips, negative ones too", () => {
  const mode: FieldDescriptor = {
    name: "mode",
    number: 1,
    kind: "enum",
    repeated: false,
    enumValues: ["UNKNOWN", "ONE"],
  };
  const schema = message("t.E", [mode]);
  for (const n of [1, 7, -1, -16877699, 2 ** 31 - 1, -(2 ** 31)]) {
    const bytes = encodeMessage(schema, { mode: n });
    assert.deepEqual(decodeMessage(schema, bytes), { mode: n === 1 ? "ONE" : n }, String(n));
  }
  assert.equal(encodeMessage(schema, { mode: -1 }).length, 11, "a negative int32 takes 10 octets");
  for (const bad of [2 ** 31, 1.5, "TWO", true]) {
    assert.throws(() => encodeMessage(schema, { mode: bad }), ProtoWireError, String(bad));
  }
});

Deno.test("encodeMessage() writes nested messages, map entries and strings in place, any length", () => {
  const utf8 = (s: string) => new TextEncoder().encode(s);
  const varint = (n: number): Uint8Array => {
    const out: number[] = [];
    for (; n > 0x7f; n = Math.floor(n / 0x80)) out.push((n % 0x80) | 0x80);
    out.push(n);
    return new Uint8Array(out);
  };
  /** A length-delimited field: tag, length, bytes. */
  const ld = (field: number, bytes: Uint8Array) =>
    cat(varint(field * 8 + 2), varint(bytes.length), bytes);
  // Lengths around the one-byte varint limit and past two bytes, ASCII and not.
  for (const size of [1, 60, 127, 128, 200, 16_383, 16_384, 70_000]) {
    const long = "x".repeat(size);
    const wide = "é😀".repeat(Math.ceil(size / 3));
    const value = {
      inner: {
        items: [long, wide],
        labels: { [long]: wide, k: "v" },
        name: wide,
        child: { name: long, on: true },
      },
    };
    const child = cat(ld(3, utf8(long)), new Uint8Array([4 * 8, 1]));
    const inner = cat(
      ld(1, utf8(long)),
      ld(1, utf8(wide)),
      ld(2, cat(ld(1, utf8(long)), ld(2, utf8(wide)))),
      ld(2, cat(ld(1, utf8("k")), ld(2, utf8("v")))),
      ld(3, utf8(wide)),
      ld(5, child),
    );
    const want = ld(1, inner);
    assert.deepEqual(encodeMessage(OUTER, value), want, `size ${size}`);
    // The writer is shared: a second message, after a failed one, is not mixed with either.
    assert.throws(() => encodeMessage(OUTER, { inner: { name: 5 } }), ProtoWireError);
    assert.deepEqual(encodeMessage(OUTER, value), want, `size ${size}, again`);
    const decoded = decodeMessage(OUTER, want) as { inner: typeof value.inner };
    assert.deepEqual(decoded.inner.labels, value.inner.labels);
    assert.deepEqual(decoded.inner.items, value.inner.items);
  }
});
