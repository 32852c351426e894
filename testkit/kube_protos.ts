/**
 * Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for the test kit: the
 * upstream `generated.proto` files of `k8s.io/api` and `k8s.io/apimachinery`, loaded with
 * protobufjs from the Go module cache, and a codec between an object's Kubernetes JSON form (what
 * `kubectl get -o json` shows) and its protobuf bytes. Nothing that ships uses it; it is the
 * independent reference the in-memory API server encodes with and decoders are checked against.
 *
 * The files come from the Go module cache (`go mod download k8s.io/api@v0.37.2
 * k8s.io/apimachinery@v0.37.2`, as `.ci/run` does; `$GOMODCACHE`, else `$GOPATH/pkg/mod`, else
 * `~/go/pkg/mod`), never from the network at test time. {@link kubeProtosMissing} names what is
 * absent; tests skip with that reason, unless `KUBE_PROTOS_REQUIRED=1` (CI) makes them fail.
 *
 * The envelope (apimachinery `runtime/serializer/protobuf/protobuf.go`, `Serializer.doEncode`, and
 * `runtime/types_proto.go`, `Unknown.NestedMarshalTo`): the 4 bytes `k8s\0`, then a
 * `runtime.Unknown` with `typeMeta` = 1 (`apiVersion` = 1, `kind` = 2), `raw` = 2 (the object's
 * message, which has no TypeMeta of its own), `contentEncoding` = 3 and `contentType` = 4, the
 * last two written empty. A watch stream (`;stream=watch`) is a sequence of frames, each a
 * 4-byte big-endian length then a bare `metav1.WatchEvent` (`type` = 1, `object` = 2, a
 * `RawExtension` whose `raw` = 1 holds the object in the envelope above): the stream serializer
 * is the raw one (`runtime/serializer/codec_factory.go`, `newSerializersForScheme`,
 * `protobuf.NewRawSerializer` with `LengthDelimitedFramer`).
 *
 * Where the JSON form and the message differ (each type's `MarshalJSON` and `ProtoTime` in
 * apimachinery):
 * - `metav1.Time`: RFC 3339 in seconds; the message `Timestamp{seconds = 1, nanos = 2}` with
 *   nanos never written (`time_proto.go`, `ProtoTime`); a zero time is an empty message, JSON
 *   `null`.
 * - `metav1.MicroTime`: RFC 3339 with 6 fraction digits; nanos truncated to microseconds.
 * - `resource.Quantity`: a string; the message `{string = 1}`.
 * - `intstr.IntOrString`: a number or a string; the message `{type = 1, intVal = 2, strVal = 3}`.
 * - `metav1.FieldsV1` (`managedFields[].fieldsV1`) and `runtime.RawExtension`: the JSON itself;
 *   the message holds its bytes.
 * - `bytes` fields (`Secret.data`): base64 in JSON.
 * - Fields Go embeds with `json:""` (`PersistentVolumeSpec.persistentVolumeSource`,
 *   `Volume.volumeSource`, …) are flattened into their parent in JSON.
 * - Presence: Go writes every field that is not a pointer, zero values included, where JSON's
 *   `omitempty` leaves them out; the decoder keeps what is on the wire, so `metadata.generateName`
 *   may decode as "". {@link withoutZeroValues} gives the form to compare across encoders. The
 *   encoder writes exactly the members the JSON form has (a member that is `null` is left out):
 *   what a Go decoder builds from it is the object the JSON describes.
 *
 * @module
 */

import protobuf from "protobufjs";

/** The media type. */
export const KUBE_PROTOBUF = "application/vnd.kubernetes.protobuf";

/** The 4 bytes every protobuf-encoded object starts with. */
export const KUBE_PROTOBUF_MAGIC: readonly number[] = [0x6b, 0x38, 0x73, 0x00];

/** Module versions of `k8s.io/api` and `k8s.io/apimachinery`: Kubernetes 1.37 and 1.35. */
export const KUBE_PROTO_VERSIONS = ["v0.37.2", "v0.35.4"] as const;

/** Environment variable that turns a missing module into a failure (CI sets it to `1`). */
export const KUBE_PROTOS_REQUIRED_ENV = "KUBE_PROTOS_REQUIRED";

/** An object in its Kubernetes JSON form. */
export type JsonObject = Record<string, unknown>;

/** The Go module cache directory. */
export function goModCache(): string {
  const env = (name: string) => {
    try {
      return Deno.env.get(name) ?? "";
    } catch {
      return "";
    }
  };
  if (env("GOMODCACHE") !== "") return env("GOMODCACHE");
  const gopath = env("GOPATH").split(":")[0] ?? "";
  if (gopath !== "") return `${gopath}/pkg/mod`;
  return `${env("HOME")}/go/pkg/mod`;
}

/** The module directories of one version. */
export interface KubeProtoDirs {
  version: string;
  api: string;
  apimachinery: string;
}

/** Where the modules of `version` are (whether or not they are there). */
export function kubeProtoDirs(version: string = KUBE_PROTO_VERSIONS[0]): KubeProtoDirs {
  const cache = goModCache();
  return {
    version,
    api: `${cache}/k8s.io/api@${version}`,
    apimachinery: `${cache}/k8s.io/apimachinery@${version}`,
  };
}

/** The files loaded, relative to their module (they import each other by these paths). */
const FILES = [
  "k8s.io/api/storage/v1/generated.proto",
  "k8s.io/api/core/v1/generated.proto",
  "k8s.io/api/coordination/v1/generated.proto",
  "k8s.io/api/events/v1/generated.proto",
  "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto",
];

/** The file of an import path inside `dirs`. */
function filePath(dirs: KubeProtoDirs, importPath: string): string {
  if (importPath.startsWith("k8s.io/api/")) {
    return `${dirs.api}/${importPath.slice("k8s.io/api/".length)}`;
  }
  if (importPath.startsWith("k8s.io/apimachinery/")) {
    return `${dirs.apimachinery}/${importPath.slice("k8s.io/apimachinery/".length)}`;
  }
  return importPath;
}

/**
 * Why the `.proto` files of `version` cannot be loaded (a sentence naming the missing file and
 * the command that fetches it), or undefined when they are all there.
 */
export function kubeProtosMissing(version: string = KUBE_PROTO_VERSIONS[0]): string | undefined {
  const dirs = kubeProtoDirs(version);
  for (
    const f of [...FILES, "k8s.io/apimachinery/pkg/runtime/generated.proto"]
  ) {
    const path = filePath(dirs, f);
    try {
      Deno.statSync(path);
    } catch {
      return `${path} is missing (go mod download k8s.io/api@${version} ` +
        `k8s.io/apimachinery@${version})`;
    }
  }
  return undefined;
}

/** True when a missing module must fail (CI), not skip. */
export function kubeProtosRequired(): boolean {
  try {
    return Deno.env.get(KUBE_PROTOS_REQUIRED_ENV) === "1";
  } catch {
    return false;
  }
}

const loaded = new Map<string, KubeProtos>();

/**
 * The codec of `version`, loaded once per process; undefined when the files are absent and
 * {@link kubeProtosRequired} is false.
 *
 * @throws {Error} when they are absent and required.
 */
export function loadKubeProtos(
  version: string = KUBE_PROTO_VERSIONS[0],
): KubeProtos | undefined {
  const cached = loaded.get(version);
  if (cached !== undefined) return cached;
  const missing = kubeProtosMissing(version);
  if (missing !== undefined) {
    if (kubeProtosRequired()) throw new Error(`${KUBE_PROTOS_REQUIRED_ENV}=1 but ${missing}`);
    return undefined;
  }
  const dirs = kubeProtoDirs(version);
  // Read here rather than with protobufjs' loadSync, which needs node's fs (absent in a bundle).
  const root = new protobuf.Root();
  const seen = new Set<string>();
  const load = (importPath: string) => {
    if (seen.has(importPath)) return;
    seen.add(importPath);
    const parsed = protobuf.parse(Deno.readTextFileSync(filePath(dirs, importPath)), root, {
      keepCase: true,
    });
    for (const dep of parsed.imports ?? []) load(dep);
  };
  for (const f of FILES) load(f);
  root.resolveAll();
  const codec = new KubeProtos(root, version);
  loaded.set(version, codec);
  return codec;
}

const META = "k8s.io.apimachinery.pkg.apis.meta.v1";
const TIME = `${META}.Time`;
const MICRO_TIME = `${META}.MicroTime`;
const FIELDS_V1 = `${META}.FieldsV1`;
const DURATION = `${META}.Duration`;
const QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension";

/**
 * Fields Go embeds with `json:""` (flattened into the parent in JSON), by message and field:
 * `k8s.io/api/core/v1/types.go` (`Volume.VolumeSource`, `PersistentVolumeSpec.
 * PersistentVolumeSource`, `Probe.ProbeHandler`, the `LocalObjectReference` of the key
 * selectors and projections).
 */
const INLINE_FIELDS = new Set([
  "k8s.io.api.core.v1.Volume.volumeSource",
  "k8s.io.api.core.v1.PersistentVolumeSpec.persistentVolumeSource",
  "k8s.io.api.core.v1.Probe.handler",
  "k8s.io.api.core.v1.ConfigMapKeySelector.localObjectReference",
  "k8s.io.api.core.v1.SecretKeySelector.localObjectReference",
  "k8s.io.api.core.v1.ConfigMapEnvSource.localObjectReference",
  "k8s.io.api.core.v1.SecretEnvSource.localObjectReference",
  "k8s.io.api.core.v1.ConfigMapVolumeSource.localObjectReference",
  "k8s.io.api.core.v1.ConfigMapProjection.localObjectReference",
  "k8s.io.api.core.v1.SecretProjection.localObjectReference",
]);

/** The types whose JSON form is not their message. */
const SPECIAL_TYPES = new Set([
  TIME,
  MICRO_TIME,
  FIELDS_V1,
  DURATION,
  QUANTITY,
  INT_OR_STRING,
  RAW_EXTENSION,
]);

/** How one field is converted. */
interface FieldPlan {
  name: string;
  field: protobuf.Field;
  /** The message type of the field (of the values, for a map). */
  message: protobuf.Type | undefined;
  /** Go embeds the field with `json:""`: its members are the parent's in JSON. */
  inline: boolean;
  /** One of {@link SPECIAL_TYPES}. */
  special: string | undefined;
  bytes: boolean;
}

/** The proto package of an apiVersion's group. */
function packageOf(apiVersion: string): string {
  const [group, version] = apiVersion.includes("/")
    ? apiVersion.split("/") as [string, string]
    : ["", apiVersion];
  if (group === "meta.k8s.io") return META;
  const short = group === "" ? "core" : group.replace(/\.k8s\.io$/, "");
  return `k8s.io.api.${short}.${version}`;
}

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder("utf-8", { fatal: true });

function base64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** The bytes as a plain Uint8Array (protobufjs gives node's Buffer), without a copy. */
function plain(b: Uint8Array): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.length);
}

/** A 64-bit value from protobufjs (a number or a Long) as a number. */
function toNumber(v: unknown): number {
  if (typeof v === "number") return v;
  return Number(String(v));
}

/** RFC 3339 of a Unix time in seconds, as Go's `time.RFC3339` in UTC. */
function rfc3339(seconds: number): string {
  return new Date(seconds * 1000).toISOString().slice(0, 19) + "Z";
}

/** Seconds and nanoseconds of an RFC 3339 time. @throws {RangeError} for anything else. */
function parseRfc3339(text: string): { seconds: number; nanos: number } {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (m === null) throw new RangeError(`not an RFC 3339 time: ${JSON.stringify(text)}`);
  const ms = Date.parse(`${m[1]}${m[3] === "Z" ? "Z" : m[3]}`);
  if (Number.isNaN(ms)) throw new RangeError(`not an RFC 3339 time: ${JSON.stringify(text)}`);
  return { seconds: Math.floor(ms / 1000), nanos: Number((m[2] ?? "").padEnd(9, "0")) };
}

/** The codec of one version of the `.proto` files. Get it with {@link loadKubeProtos}. */
export class KubeProtos {
  /** protobufjs reflection of every loaded file. */
  readonly root: protobuf.Root;
  /** The module version the files are from. */
  readonly version: string;

  constructor(root: protobuf.Root, version: string) {
    this.root = root;
    this.version = version;
  }

  /**
   * The message type of a kind, e.g. `("storage.k8s.io/v1", "VolumeAttachment")`; `Status`,
   * `WatchEvent` and the other meta kinds of any group resolve to `meta/v1`.
   *
   * @throws {Error} for a kind the files do not have.
   */
  typeOf(apiVersion: string, kind: string): protobuf.Type {
    const key = `${apiVersion} ${kind}`;
    const cached = this.#types.get(key);
    if (cached !== undefined) return cached;
    for (const pkg of [packageOf(apiVersion), META]) {
      const found = this.root.lookup(`${pkg}.${kind}`);
      if (found instanceof protobuf.Type) {
        this.#types.set(key, found);
        return found;
      }
    }
    throw new Error(`no protobuf message for ${apiVersion} ${kind}`);
  }

  readonly #types = new Map<string, protobuf.Type>();

  /** True when the files have a message for the kind. */
  hasKind(apiVersion: string, kind: string): boolean {
    try {
      this.typeOf(apiVersion, kind);
      return true;
    } catch {
      return false;
    }
  }

  /** The message bytes of `value` (JSON form, without kind and apiVersion) as `type`. */
  encodeMessage(type: protobuf.Type, value: JsonObject): Uint8Array {
    // encode() takes plain objects whose members have the wire types #toProto gives them.
    return plain(type.encode(this.#toProto(type, value, type.fullName)).finish());
  }

  /** The JSON form of message bytes of `type`. */
  decodeMessage(type: protobuf.Type, bytes: Uint8Array): JsonObject {
    return this.#fromProto(type, type.decode(bytes) as unknown as Record<string, unknown>);
  }

  /**
   * The envelope of an object in its JSON form (`apiVersion` and `kind` go to the `typeMeta`):
   * `k8s\0` + `runtime.Unknown`, as kube-apiserver writes a response body.
   */
  encode(object: JsonObject): Uint8Array {
    const { apiVersion, kind, ...rest } = object;
    if (typeof apiVersion !== "string" || typeof kind !== "string") {
      throw new Error("the object has no apiVersion and kind");
    }
    const raw = this.encodeMessage(this.typeOf(apiVersion, kind), rest);
    return wrapUnknown(apiVersion, kind, raw);
  }

  /** The JSON form of an envelope, `apiVersion` and `kind` first. */
  decode(bytes: Uint8Array): JsonObject {
    const unknown = unwrapUnknown(bytes);
    const object = this.decodeMessage(this.typeOf(unknown.apiVersion, unknown.kind), unknown.raw);
    return { apiVersion: unknown.apiVersion, kind: unknown.kind, ...object };
  }

  /** One watch event (`metav1.WatchEvent`) as its frame's payload, without the length. */
  encodeWatchEvent(type: string, object: JsonObject): Uint8Array {
    const event = this.typeOf("meta.k8s.io/v1", "WatchEvent");
    return plain(
      event.encode(event.fromObject({ type, object: { raw: this.encode(object) } })).finish(),
    );
  }

  /** A watch event from its frame's payload. */
  decodeWatchEvent(payload: Uint8Array): { type: string; object: JsonObject } {
    const event = this.typeOf("meta.k8s.io/v1", "WatchEvent");
    const m = event.decode(payload) as unknown as { type?: string; object?: { raw?: Uint8Array } };
    const raw = m.object?.raw;
    if (raw === undefined) throw new Error("watch event without an object");
    return { type: m.type ?? "", object: this.decode(raw) };
  }

  /** How each field of `type` is converted, computed once per type. */
  #plan(type: protobuf.Type): FieldPlan[] {
    let plan = this.#plans.get(type);
    if (plan !== undefined) return plan;
    plan = type.fieldsArray.map((field): FieldPlan => {
      field.resolve();
      const t = field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
      const inline = t !== undefined &&
        INLINE_FIELDS.has(`${type.fullName.slice(1)}.${field.name}`);
      const name = t?.fullName.slice(1) ?? "";
      return {
        name: field.name,
        field,
        message: t,
        inline,
        special: SPECIAL_TYPES.has(name) ? name : undefined,
        bytes: field.type === "bytes",
      };
    });
    this.#plans.set(type, plan);
    return plan;
  }

  readonly #plans = new Map<protobuf.Type, FieldPlan[]>();

  #toProto(type: protobuf.Type, value: JsonObject, where: string): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    let consumed = 0;
    for (const p of this.#plan(type)) {
      if (p.inline) {
        const inner = p.message!;
        const part: JsonObject = {};
        let any = false;
        for (const f of inner.fieldsArray) {
          if (f.name in value) {
            part[f.name] = value[f.name];
            consumed++;
            any = true;
          }
        }
        if (any) out[p.name] = this.#toProto(inner, part, where);
        continue;
      }
      if (!(p.name in value)) continue;
      consumed++;
      const v = value[p.name];
      if (v === null || v === undefined) continue;
      if (p.field.map) {
        const m: Record<string, unknown> = {};
        for (const k in v as JsonObject) {
          m[k] = this.#valueToProto(p, (v as JsonObject)[k], where);
        }
        out[p.name] = m;
      } else if (p.field.repeated) {
        if (!Array.isArray(v)) throw new TypeError(`${where}.${p.name}: not an array`);
        out[p.name] = v.map((e) => this.#valueToProto(p, e, where));
      } else {
        out[p.name] = this.#valueToProto(p, v, where);
      }
    }
    if (consumed !== Object.keys(value).length) {
      const known = new Set<string>();
      for (const p of this.#plan(type)) {
        if (p.inline) p.message!.fieldsArray.forEach((f) => known.add(f.name));
        else known.add(p.name);
      }
      const extra = Object.keys(value).find((k) => !known.has(k));
      throw new TypeError(`${where}: no field ${extra} in ${type.fullName}`);
    }
    return out;
  }

  #valueToProto(p: FieldPlan, v: unknown, where: string): unknown {
    const t = p.message;
    if (t === undefined) {
      if (p.bytes) {
        if (typeof v !== "string") throw new TypeError(`${where}.${p.name}: bytes not as base64`);
        return fromBase64(v);
      }
      return v;
    }
    switch (p.special) {
      case undefined:
        break;
      case TIME:
        return { seconds: parseRfc3339(String(v)).seconds };
      case MICRO_TIME: {
        const { seconds, nanos } = parseRfc3339(String(v));
        return { seconds, nanos: nanos - (nanos % 1000) };
      }
      case QUANTITY:
        return { string: String(v) };
      case INT_OR_STRING:
        return typeof v === "number" ? { type: 0, intVal: v } : { type: 1, strVal: String(v) };
      case FIELDS_V1:
      case RAW_EXTENSION:
        return { [t.fieldsArray[0]!.name]: utf8.encode(JSON.stringify(v)) };
      default:
        throw new TypeError(`${where}.${p.name}: ${p.special} is not converted`);
    }
    if (typeof v !== "object" || Array.isArray(v)) {
      throw new TypeError(`${where}.${p.name}: not an object`);
    }
    return this.#toProto(t, v as JsonObject, `${where}.${p.name}`);
  }

  #fromProto(type: protobuf.Type, m: Record<string, unknown>): JsonObject {
    const out: JsonObject = {};
    for (const field of type.fieldsArray) {
      if (!Object.hasOwn(m, field.name)) continue;
      const v = m[field.name];
      const key = `${type.fullName.slice(1)}.${field.name}`;
      if (INLINE_FIELDS.has(key) && field.resolvedType instanceof protobuf.Type) {
        Object.assign(out, this.#fromProto(field.resolvedType, v as Record<string, unknown>));
        continue;
      }
      // protobufjs gives every repeated and map field an own empty value; on the wire an empty
      // one is absent.
      if (field.map) {
        if (Object.keys(v as object).length === 0) continue;
        const o: JsonObject = {};
        for (const [k, e] of Object.entries(v as Record<string, unknown>)) {
          o[k] = this.#valueFromProto(field, e);
        }
        out[field.name] = o;
      } else if (field.repeated) {
        if ((v as unknown[]).length === 0) continue;
        out[field.name] = (v as unknown[]).map((e) => this.#valueFromProto(field, e));
      } else {
        out[field.name] = this.#valueFromProto(field, v);
      }
    }
    return out;
  }

  #valueFromProto(field: protobuf.Field, v: unknown): unknown {
    const t = field.resolvedType;
    if (!(t instanceof protobuf.Type)) {
      if (field.type === "bytes") return base64(v as Uint8Array);
      if (["int64", "uint64", "sint64", "fixed64", "sfixed64"].includes(field.type)) {
        return toNumber(v);
      }
      return v;
    }
    const msg = v as Record<string, unknown>;
    switch (t.fullName.slice(1)) {
      case TIME:
        // An empty message is the zero time, which Go's JSON writes as null.
        return Object.hasOwn(msg, "seconds") || Object.hasOwn(msg, "nanos")
          ? rfc3339(toNumber(msg.seconds ?? 0))
          : null;
      case MICRO_TIME: {
        if (!Object.hasOwn(msg, "seconds") && !Object.hasOwn(msg, "nanos")) return null;
        const micros = Math.floor(toNumber(msg.nanos ?? 0) / 1000);
        return `${rfc3339(toNumber(msg.seconds ?? 0)).slice(0, 19)}.${
          String(micros).padStart(6, "0")
        }Z`;
      }
      case QUANTITY:
        return msg.string ?? "";
      case INT_OR_STRING:
        return toNumber(msg.type ?? 0) === 1 ? msg.strVal ?? "" : msg.intVal ?? 0;
      case FIELDS_V1:
      case RAW_EXTENSION: {
        const raw = msg[t.fieldsArray[0]!.name] as Uint8Array | undefined;
        return raw === undefined || raw.length === 0 ? null : JSON.parse(fromUtf8.decode(raw));
      }
      case DURATION:
        throw new TypeError(`${field.name}: metav1.Duration is not converted`);
    }
    return this.#fromProto(t, msg);
  }
}

/** Appends a varint. */
function pushVarint(out: number[], n: number): void {
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
}

/** A length-delimited field. */
function lengthDelimited(no: number, data: Uint8Array): Uint8Array {
  const head: number[] = [];
  pushVarint(head, (no << 3) | 2);
  pushVarint(head, data.length);
  const out = new Uint8Array(head.length + data.length);
  out.set(head);
  out.set(data, head.length);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    out.set(p, i);
    i += p.length;
  }
  return out;
}

/**
 * `k8s\0` + `runtime.Unknown` around an object's message, byte for byte as Go writes it
 * (`Unknown.NestedMarshalTo`: typeMeta, raw, then contentEncoding and contentType empty).
 */
export function wrapUnknown(apiVersion: string, kind: string, raw: Uint8Array): Uint8Array {
  const typeMeta = concat([
    lengthDelimited(1, utf8.encode(apiVersion)),
    lengthDelimited(2, utf8.encode(kind)),
  ]);
  return concat([
    new Uint8Array(KUBE_PROTOBUF_MAGIC),
    lengthDelimited(1, typeMeta),
    lengthDelimited(2, raw),
    new Uint8Array([0x1a, 0x00, 0x22, 0x00]),
  ]);
}

/** The parts of an envelope. @throws {Error} when it is not one. */
export function unwrapUnknown(
  bytes: Uint8Array,
): {
  apiVersion: string;
  kind: string;
  raw: Uint8Array;
  contentEncoding: string;
  contentType: string;
} {
  if (bytes.length < 4 || KUBE_PROTOBUF_MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new Error("no k8s\\0 prefix: not a Kubernetes protobuf object");
  }
  const r = protobuf.Reader.create(bytes.subarray(4));
  let apiVersion = "";
  let kind = "";
  let raw: Uint8Array = new Uint8Array();
  let contentEncoding = "";
  let contentType = "";
  while (r.pos < r.len) {
    const tag = r.uint32();
    switch (tag >>> 3) {
      case 1: {
        const t = protobuf.Reader.create(r.bytes());
        while (t.pos < t.len) {
          const tt = t.uint32();
          if (tt >>> 3 === 1) apiVersion = t.string();
          else if (tt >>> 3 === 2) kind = t.string();
          else t.skipType(tt & 7);
        }
        break;
      }
      case 2:
        raw = plain(r.bytes());
        break;
      case 3:
        contentEncoding = r.string();
        break;
      case 4:
        contentType = r.string();
        break;
      default:
        r.skipType(tag & 7);
    }
  }
  return { apiVersion, kind, raw, contentEncoding, contentType };
}

/** A watch frame: the 4-byte big-endian length, then `payload`. */
export function watchFrame(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + payload.length);
  new DataView(out.buffer).setUint32(0, payload.length, false);
  out.set(payload, 4);
  return out;
}

/**
 * The payloads of a complete watch body's frames.
 *
 * @throws {Error} when the body ends inside a frame.
 */
export function splitWatchFrames(body: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let i = 0;
  while (i < body.length) {
    if (i + 4 > body.length) throw new Error("watch body ends inside a frame length");
    const len = new DataView(body.buffer, body.byteOffset + i, 4).getUint32(0, false);
    if (i + 4 + len > body.length) throw new Error("watch body ends inside a frame");
    out.push(body.subarray(i + 4, i + 4 + len));
    i += 4 + len;
  }
  return out;
}

/**
 * A copy without the members whose value is a zero value (`""`, `0`, `false`, `null`, an empty
 * array or object), recursively: the form in which an object written by Go (which writes every
 * field that is not a pointer) and the same object written from its JSON form compare equal.
 */
export function withoutZeroValues(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutZeroValues);
  if (value === null || typeof value !== "object") return value;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(value)) {
    const pruned = withoutZeroValues(v);
    if (
      pruned === "" || pruned === 0 || pruned === false || pruned === null ||
      pruned === undefined ||
      (Array.isArray(pruned) && pruned.length === 0) ||
      (typeof pruned === "object" && !Array.isArray(pruned) && Object.keys(pruned).length === 0)
    ) continue;
    out[k] = pruned;
  }
  return out;
}
