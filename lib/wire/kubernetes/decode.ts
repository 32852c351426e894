/**
 * Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) decoded into the JSON form of the
 * same object: what `JSON.parse` gives for the JSON kube-apiserver would send, for the fields
 * that `./tables.ts` reads (the module doc there says which, and how presence follows the Go
 * struct tags). `metadata.managedFields` and every other field not in a table is skipped by its
 * wire type, never decoded.
 *
 * The envelope (k8s.io/apimachinery `pkg/runtime/serializer/protobuf/protobuf.go`,
 * `Serializer.Decode`): the 4 bytes `k8s\x00`, then a `runtime.Unknown` whose `typeMeta` names the
 * object's `apiVersion` and `kind` and whose `raw` is the object's message. A watch event
 * (`decodeWatchEvent`) is a bare `metav1.WatchEvent` (the stream serializer adds no envelope)
 * whose `object.raw` is an enveloped object.
 *
 * Refused with {@link KubeProtobufError}: input without the magic, an object kind that is not in
 * `./tables.ts`, a `contentEncoding` (the API server sets none), malformed protobuf (the bounds
 * of `../protobuf/reader.ts`), a known field of the wrong wire type, and a time outside the years
 * 0 to 9999 (Go's `Time.MarshalJSON` fails there too). The decoder's own nesting is bounded by the
 * tables (at most 7 levels: a VA's inline PV spec's CSI source's secret reference); an unknown
 * field is skipped without recursion, a group to {@link MAX_NESTING} levels.
 *
 * The size limits are the caller's: client-go's 16 MiB per watch event (`./framing.ts`) and the
 * client's body limit.
 *
 * @module
 */

import {
  checkDepth,
  MAX_NESTING,
  ProtoWireError,
  Reader,
  toInt32,
  toInt64,
  utf8Text,
  WIRE_LEN,
  WIRE_VARINT,
} from "../protobuf/reader.ts";
import {
  type FieldTable,
  KINDS,
  type MessageTable,
  UNKNOWN_FIELDS,
  WATCH_EVENT_FIELDS,
} from "./tables.ts";

export { MAX_NESTING };

/** Bytes that are not a Kubernetes protobuf object this decoder reads. */
export class KubeProtobufError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "KubeProtobufError";
  }
}

/** The 4 bytes every Kubernetes protobuf object starts with (`protobuf.go` `protoEncodingPrefix`). */
export const PROTOBUF_MAGIC: Uint8Array = Uint8Array.of(0x6b, 0x38, 0x73, 0x00);

/** The media type of Kubernetes protobuf (`runtime.ContentTypeProtobuf`). */
export const PROTOBUF_MEDIA_TYPE = "application/vnd.kubernetes.protobuf";

type Json = Record<string, unknown>;

/** The seconds of 0001-01-01T00:00:00Z, Go's zero `time.Time` (`Time.IsZero`). */
const ZERO_TIME_SECONDS = -62135596800;
/** The seconds of 0000-01-01T00:00:00Z and of 9999-12-31T23:59:59Z, the years JSON can hold. */
const MIN_SECONDS = -62167219200;
const MAX_SECONDS = 253402300799;

/**
 * The object in `bytes` (magic and `runtime.Unknown`), in its JSON form with `kind` and
 * `apiVersion` from the envelope.
 *
 * @throws {KubeProtobufError} for anything it cannot read (see the module doc).
 */
export function decodeObject(bytes: Uint8Array, from = 0, to = bytes.length): Json {
  try {
    return readEnveloped(bytes, from, to);
  } catch (err) {
    throw asDecodeError(err);
  }
}

/**
 * One watch event frame (a bare `metav1.WatchEvent`): its `type` and its object's JSON form.
 * The type is checked by the caller, as for JSON events.
 *
 * @throws {KubeProtobufError} for anything it cannot read, or an event without an object.
 */
export function decodeWatchEvent(bytes: Uint8Array): { type: string; object: Json } {
  try {
    const r = new Reader(bytes, 0, bytes.length);
    let type = "";
    let object: Json | undefined;
    while (r.pos < r.end) {
      const tag = r.smallVarint();
      const number = tag >>> 3;
      const wireType = tag & 7;
      if (number === WATCH_EVENT_FIELDS.type && wireType === WIRE_LEN) {
        const [s, e] = r.lengthDelimited();
        type = utf8Text(bytes, s, e);
      } else if (number === WATCH_EVENT_FIELDS.object && wireType === WIRE_LEN) {
        const [s, e] = r.lengthDelimited();
        const raw = new Reader(bytes, s, e);
        while (raw.pos < raw.end) {
          const t = raw.smallVarint();
          if (t >>> 3 === WATCH_EVENT_FIELDS.raw && (t & 7) === WIRE_LEN) {
            const [rs, re] = raw.lengthDelimited();
            object = readEnveloped(bytes, rs, re);
          } else {
            skipField(raw, t, 1);
          }
        }
      } else if (number === WATCH_EVENT_FIELDS.type || number === WATCH_EVENT_FIELDS.object) {
        throw new KubeProtobufError(`WatchEvent field ${number} has wire type ${wireType}`);
      } else {
        skipField(r, tag, 0);
      }
    }
    if (object === undefined) throw new KubeProtobufError("watch event without an object");
    return { type, object };
  } catch (err) {
    throw asDecodeError(err);
  }
}

function asDecodeError(err: unknown): unknown {
  if (err instanceof ProtoWireError) {
    return new KubeProtobufError(`malformed protobuf: ${err.message}`, { cause: err });
  }
  if (err instanceof RangeError) {
    // A stack overflow cannot happen (the depth is bounded), but a string too long for V8 can.
    return new KubeProtobufError(`cannot decode: ${err.message}`, { cause: err });
  }
  return err;
}

function hasMagic(bytes: Uint8Array, from: number, to: number): boolean {
  return to - from >= 4 && bytes[from] === 0x6b && bytes[from + 1] === 0x38 &&
    bytes[from + 2] === 0x73 && bytes[from + 3] === 0x00;
}

function readEnveloped(bytes: Uint8Array, from: number, to: number): Json {
  if (!hasMagic(bytes, from, to)) {
    throw new KubeProtobufError("not Kubernetes protobuf: the k8s\\x00 prefix is missing");
  }
  const r = new Reader(bytes, from + 4, to);
  let apiVersion = "";
  let kind = "";
  let raw: [number, number] | undefined;
  while (r.pos < r.end) {
    const tag = r.smallVarint();
    const number = tag >>> 3;
    if ((tag & 7) !== WIRE_LEN) {
      if (number >= 1 && number <= 4) {
        throw new KubeProtobufError(`runtime.Unknown field ${number} has wire type ${tag & 7}`);
      }
      skipField(r, tag, 0);
      continue;
    }
    const [s, e] = r.lengthDelimited();
    if (number === UNKNOWN_FIELDS.typeMeta) {
      const t = new Reader(bytes, s, e);
      while (t.pos < t.end) {
        const tt = t.smallVarint();
        const n = tt >>> 3;
        if (
          (tt & 7) === WIRE_LEN && (n === UNKNOWN_FIELDS.apiVersion || n === UNKNOWN_FIELDS.kind)
        ) {
          const [ts, te] = t.lengthDelimited();
          if (n === UNKNOWN_FIELDS.apiVersion) apiVersion = utf8Text(bytes, ts, te);
          else kind = utf8Text(bytes, ts, te);
        } else {
          skipField(t, tt, 1);
        }
      }
    } else if (number === UNKNOWN_FIELDS.raw) {
      raw = [s, e];
    } else if (number === UNKNOWN_FIELDS.contentEncoding && e > s) {
      throw new KubeProtobufError("runtime.Unknown with a contentEncoding is not supported");
    }
  }
  const table = KINDS.get(`${apiVersion} ${kind}`);
  if (table === undefined) {
    throw new KubeProtobufError(
      `unexpected object kind ${JSON.stringify(`${apiVersion} ${kind}`.slice(0, 100))}`,
    );
  }
  const out: Json = { kind, apiVersion };
  if (raw === undefined) return readMessage(table, EMPTY, 0, 1, out);
  return readMessage(table, new Reader(bytes, raw[0], raw[1]), raw[1], 1, out);
}

/** Skips the field whose tag was just read. */
function skipField(r: Reader, tag: number, depth: number): void {
  if (tag >>> 3 === 0) throw new ProtoWireError("field number 0");
  r.skip(tag & 7, tag >>> 3, depth);
}

/** A reader of nothing: the defaults of a message absent on the wire. */
const EMPTY = new Reader(new Uint8Array(0), 0, 0);

/**
 * Reads the message from `r.pos` to `end` of `table` into `out` (a fresh object, or the one a
 * repeated singular field merges into), then gives the fields absent on the wire their JSON
 * presence. One reader serves a whole object: its `end` is the message's while it is read.
 */
function readMessage(table: MessageTable, r: Reader, end: number, depth: number, out: Json): Json {
  checkDepth(depth);
  const outer = r.end;
  r.end = end;
  const byNumber = table.byNumber;
  while (r.pos < end) {
    const tag = r.smallVarint();
    const f = byNumber[tag >>> 3];
    if (f === undefined) {
      skipField(r, tag, depth);
      continue;
    }
    if ((tag & 7) !== f.wireType) {
      throw new KubeProtobufError(
        `${table.proto} field ${tag >>> 3} (${f.name}) has wire type ${tag & 7}`,
      );
    }
    readField(f, r, depth, out);
  }
  r.end = outer;
  const filled = table.filled;
  for (let i = 0; i < filled.length; i++) {
    const f = filled[i]!;
    if (out[f.name] === undefined) out[f.name] = absentValue(f, depth);
  }
  return out;
}

/** The JSON value of a field absent on the wire that JSON always has. */
function absentValue(f: FieldTable, depth: number): unknown {
  if (f.presence === "nullable") return null;
  if (f.presence === "empty") return [];
  switch (f.kind) {
    case "string":
      return "";
    case "bool":
      return false;
    case "int32":
    case "int64":
      return 0;
    case "message":
      return readMessage(f.message!, EMPTY, 0, depth + 1, {});
    default:
      // time (a zero metav1.Time), and nil lists and maps.
      return null;
  }
}

function readField(f: FieldTable, r: Reader, depth: number, out: Json): void {
  const bytes = r.buf;
  switch (f.kind) {
    case "string": {
      const e = r.lengthEnd();
      const s = r.pos;
      r.pos = e;
      if (s === e && f.presence === "omitempty") {
        if (out[f.name] !== undefined) delete out[f.name];
        return;
      }
      out[f.name] = utf8Text(bytes, s, e);
      return;
    }
    case "bool": {
      const v = r.varint() !== 0;
      if (!v && f.presence === "omitempty") {
        if (out[f.name] !== undefined) delete out[f.name];
      } else out[f.name] = v;
      return;
    }
    case "int32":
    case "int64": {
      const raw = r.varint();
      const v = f.kind === "int32" ? toInt32(raw) : toInt64(raw);
      if (v === 0 && f.presence === "omitempty") {
        if (out[f.name] !== undefined) delete out[f.name];
      } else out[f.name] = v;
      return;
    }
    case "time":
    case "microTime": {
      const text = readTime(r, r.lengthEnd(), f.kind === "microTime");
      if (text === null && f.presence === "omitzero") {
        if (out[f.name] !== undefined) delete out[f.name];
      } else out[f.name] = text;
      return;
    }
    case "map":
    case "quantityMap": {
      const e = r.lengthEnd();
      let map = out[f.name] as Record<string, string> | undefined;
      if (map === undefined || map === null) map = out[f.name] = {};
      readMapEntry(r, e, depth + 1, map, f.kind === "quantityMap");
      return;
    }
    case "strings": {
      const e = r.lengthEnd();
      const s = r.pos;
      r.pos = e;
      let list = out[f.name] as string[] | undefined | null;
      if (list === undefined || list === null) list = out[f.name] = [];
      list.push(utf8Text(bytes, s, e));
      return;
    }
    case "messages": {
      const e = r.lengthEnd();
      let list = out[f.name] as Json[] | undefined | null;
      if (list === undefined || list === null) list = out[f.name] = [];
      list.push(readMessage(f.message!, r, e, depth + 1, {}));
      return;
    }
    case "message": {
      const e = r.lengthEnd();
      const into = out[f.name];
      out[f.name] = readMessage(
        f.message!,
        r,
        e,
        depth + 1,
        typeof into === "object" && into !== null ? into as Json : {},
      );
      return;
    }
    case "inline": {
      readMessage(f.message!, r, r.lengthEnd(), depth + 1, out);
      return;
    }
  }
}

/** Reads a string field's value (its tag read, wire type checked). */
function readString(r: Reader): string {
  const e = r.lengthEnd();
  const s = r.pos;
  r.pos = e;
  return utf8Text(r.buf, s, e);
}

/** One map entry (`key` 1, `value` 2) into `map`; the last of equal keys wins, as in Go. */
function readMapEntry(
  r: Reader,
  end: number,
  depth: number,
  map: Record<string, string>,
  quantity: boolean,
): void {
  checkDepth(depth);
  const outer = r.end;
  r.end = end;
  let key = "";
  let value = "";
  while (r.pos < end) {
    const tag = r.smallVarint();
    const number = tag >>> 3;
    if ((number === 1 || number === 2) && (tag & 7) !== WIRE_LEN) {
      throw new KubeProtobufError(`map entry field ${number} has wire type ${tag & 7}`);
    }
    if (number === 1) key = readString(r);
    else if (number === 2) {
      value = quantity ? readQuantity(r, r.lengthEnd(), depth + 1) : readString(r);
    } else skipField(r, tag, depth);
  }
  r.end = outer;
  if (key === "__proto__") {
    // An own data property, as JSON.parse makes one, not the prototype.
    Object.defineProperty(map, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  } else {
    map[key] = value;
  }
}

/** `resource.Quantity` (`string` 1): its canonical text, as its `MarshalJSON` writes it. */
function readQuantity(r: Reader, end: number, depth: number): string {
  checkDepth(depth);
  const outer = r.end;
  r.end = end;
  let text = "";
  while (r.pos < end) {
    const tag = r.smallVarint();
    if (tag >>> 3 === 1) {
      if ((tag & 7) !== WIRE_LEN) {
        throw new KubeProtobufError("Quantity field 1 has wire type " + (tag & 7));
      }
      text = readString(r);
    } else {
      skipField(r, tag, depth);
    }
  }
  r.end = outer;
  return text;
}

/**
 * A `metav1.Time` (`seconds` 1, `nanos` 2) as its JSON: `null` when zero (no fields, as gogo
 * writes a zero Time, or Go's zero instant), else RFC 3339 in UTC, whole seconds for a Time
 * (`Time.Unmarshal` drops the nanoseconds), 6 fraction digits for a MicroTime.
 */
function readTime(r: Reader, end: number, micro: boolean): string | null {
  const from = r.pos;
  const outer = r.end;
  r.end = end;
  let seconds = 0;
  let nanos = 0;
  while (r.pos < end) {
    const tag = r.smallVarint();
    const number = tag >>> 3;
    if ((number === 1 || number === 2) && (tag & 7) !== WIRE_VARINT) {
      throw new KubeProtobufError(`Time field ${number} has wire type ${tag & 7}`);
    }
    if (number === 1) seconds = toInt64(r.varint());
    else if (number === 2) nanos = toInt32(r.varint());
    else skipField(r, tag, 1);
  }
  r.end = outer;
  if (from === end) return null;
  if (!micro) nanos = 0;
  // time.Unix normalises nanoseconds outside [0, 1e9).
  if (nanos < 0 || nanos >= 1e9) {
    seconds += Math.floor(nanos / 1e9);
    nanos = ((nanos % 1e9) + 1e9) % 1e9;
  }
  if (seconds === ZERO_TIME_SECONDS && nanos === 0) return null;
  if (!(seconds >= MIN_SECONDS && seconds <= MAX_SECONDS)) {
    throw new KubeProtobufError(`time ${seconds}s is outside the years 0 to 9999`);
  }
  // Objects of one burst share their second: the last text of each kind is kept.
  const last = micro ? lastMicroTime : lastTime;
  if (last.seconds === seconds && last.nanos === nanos) return last.text;
  const iso = new Date(seconds * 1000).toISOString(); // 2006-01-02T15:04:05.000Z
  const base = iso.slice(0, 19);
  const text = micro
    ? base + "." + String(Math.floor(nanos / 1000)).padStart(6, "0") + "Z"
    : base + "Z";
  last.seconds = seconds;
  last.nanos = nanos;
  last.text = text;
  return text;
}

/** The last Time and MicroTime formatted, and their text. */
const lastTime = { seconds: NaN, nanos: 0, text: "" };
const lastMicroTime = { seconds: NaN, nanos: 0, text: "" };
