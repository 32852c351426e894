/**
 * Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), as far
 * as the attachers send them: the Go sidecar's leader election creates and updates its Lease
 * that way (csi-lib-utils `leaderelection`, a clientset with `ContentType` protobuf).
 *
 * The envelope (apimachinery `runtime/serializer/protobuf/protobuf.go`): the 4 bytes `k8s\0`,
 * then a `runtime.Unknown` (`typeMeta` = 1 with `apiVersion` = 1 and `kind` = 2, `raw` = 2). The
 * kinds decoded here, with their field numbers from `k8s.io/api/coordination/v1/generated.proto`
 * and `k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`: `Lease` (metadata = 1, spec = 2),
 * `LeaseSpec` (holderIdentity = 1, leaseDurationSeconds = 2, acquireTime = 3, renewTime = 4,
 * leaseTransitions = 5, strategy = 6, preferredHolder = 7), `MicroTime` (seconds = 1,
 * nanos = 2) and `ObjectMeta` (name = 1, generateName = 2, namespace = 3, uid = 5,
 * resourceVersion = 6, labels = 11, annotations = 12; others are left out).
 *
 * @module
 */

/** The media type. */
export const KUBE_PROTOBUF = "application/vnd.kubernetes.protobuf";

const MAGIC = [0x6b, 0x38, 0x73, 0x00];

/** A field of a message: its number and its value (a number for varints, else the bytes). */
interface Field {
  no: number;
  varint?: bigint;
  bytes?: Uint8Array;
}

function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new RangeError("truncated varint");
      const b = buf[i++]!;
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    switch (key & 7) {
      case 0:
        out.push({ no, varint: varint() });
        break;
      case 1:
        i += 8;
        break;
      case 2: {
        const len = Number(varint());
        if (i + len > buf.length) throw new RangeError("truncated field");
        out.push({ no, bytes: buf.subarray(i, i + len) });
        i += len;
        break;
      }
      case 5:
        i += 4;
        break;
      default:
        throw new RangeError(`unsupported wire type ${key & 7}`);
    }
  }
  return out;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function text(f: Field): string {
  return utf8.decode(f.bytes ?? new Uint8Array());
}

function int(f: Field): number {
  return Number(BigInt.asIntN(64, f.varint ?? 0n));
}

function stringMap(entries: Field[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of entries) {
    let key = "";
    let value = "";
    for (const f of fields(e.bytes ?? new Uint8Array())) {
      if (f.no === 1) key = text(f);
      if (f.no === 2) value = text(f);
    }
    out[key] = value;
  }
  return out;
}

/** `MicroTime` as the JSON encoding writes it: RFC 3339 with microseconds. */
function microTime(bytes: Uint8Array): string {
  let seconds = 0;
  let nanos = 0;
  for (const f of fields(bytes)) {
    if (f.no === 1) seconds = int(f);
    if (f.no === 2) nanos = int(f);
  }
  const iso = new Date(seconds * 1000).toISOString().slice(0, 19);
  return `${iso}.${String(Math.floor(nanos / 1000)).padStart(6, "0")}Z`;
}

function objectMeta(bytes: Uint8Array): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  const labels: Field[] = [];
  const annotations: Field[] = [];
  for (const f of fields(bytes)) {
    if (f.no === 1) meta.name = text(f);
    else if (f.no === 2) meta.generateName = text(f);
    else if (f.no === 3) meta.namespace = text(f);
    else if (f.no === 5) meta.uid = text(f);
    else if (f.no === 6) meta.resourceVersion = text(f);
    else if (f.no === 11) labels.push(f);
    else if (f.no === 12) annotations.push(f);
  }
  if (labels.length > 0) meta.labels = stringMap(labels);
  if (annotations.length > 0) meta.annotations = stringMap(annotations);
  return meta;
}

function leaseSpec(bytes: Uint8Array): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  for (const f of fields(bytes)) {
    if (f.no === 1) spec.holderIdentity = text(f);
    else if (f.no === 2) spec.leaseDurationSeconds = int(f);
    else if (f.no === 3) spec.acquireTime = microTime(f.bytes!);
    else if (f.no === 4) spec.renewTime = microTime(f.bytes!);
    else if (f.no === 5) spec.leaseTransitions = int(f);
    else if (f.no === 6) spec.strategy = text(f);
    else if (f.no === 7) spec.preferredHolder = text(f);
  }
  return spec;
}

/**
 * The object of a protobuf request body as its JSON form, or undefined for a body that is not a
 * Kubernetes protobuf envelope of a kind decoded here.
 */
export function decodeKubeProtobuf(body: Uint8Array): Record<string, unknown> | undefined {
  if (body.length < 4 || MAGIC.some((b, i) => body[i] !== b)) return undefined;
  let apiVersion = "";
  let kind = "";
  let raw: Uint8Array | undefined;
  try {
    for (const f of fields(body.subarray(4))) {
      if (f.no === 1) {
        for (const t of fields(f.bytes!)) {
          if (t.no === 1) apiVersion = text(t);
          if (t.no === 2) kind = text(t);
        }
      } else if (f.no === 2) raw = f.bytes;
    }
    if (apiVersion !== "coordination.k8s.io/v1" || kind !== "Lease" || raw === undefined) {
      return undefined;
    }
    const lease: Record<string, unknown> = { apiVersion, kind };
    for (const f of fields(raw)) {
      if (f.no === 1) lease.metadata = objectMeta(f.bytes!);
      if (f.no === 2) lease.spec = leaseSpec(f.bytes!);
    }
    lease.metadata ??= {};
    return lease;
  } catch {
    return undefined;
  }
}
