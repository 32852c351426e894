/**
 * The Go types of a resource's JSON fields, for what kube-apiserver's decoder checks in a request
 * body: an unknown field is dropped with a `Warning: 299 - "unknown field \"spec.x\""` header
 * (`fieldValidation=Warn`, the default), refused with 400 (`Strict`) or silently dropped
 * (`Ignore`); a value of the wrong JSON type fails the decoding (`json: cannot unmarshal string
 * into Go struct field VolumeAttachment.spec of type v1.VolumeAttachmentSpec`).
 *
 * Only the structure our resources' clients write is described; a member typed `ANY` takes any
 * content unchecked (times, owner references, inline volume specs).
 *
 * @module
 */

import type { OrderedNode } from "./ordered_json.ts";

/** The Go type of a JSON member. */
export type FieldType =
  | { kind: "struct"; go: string; fields: Readonly<Record<string, FieldType>> }
  | { kind: "scalar"; go: "string" | "bool" | "int64" | "int32" }
  | { kind: "map"; value: FieldType }
  | { kind: "slice"; item: FieldType }
  | { kind: "any" };

/** A Go struct type: its name as decode errors print it (`v1.ObjectMeta`) and its members. */
export type FieldSchema = Extract<FieldType, { kind: "struct" }>;

const ANY: FieldType = { kind: "any" };
const STRING: FieldType = { kind: "scalar", go: "string" };
const BOOL: FieldType = { kind: "scalar", go: "bool" };
const INT64: FieldType = { kind: "scalar", go: "int64" };
const INT32: FieldType = { kind: "scalar", go: "int32" };
const STRING_MAP: FieldType = { kind: "map", value: STRING };

function struct(go: string, fields: Record<string, FieldType>): FieldSchema {
  return { kind: "struct", go, fields };
}

/** `metav1.ObjectMeta`. */
export const OBJECT_META_FIELDS: FieldSchema = struct("v1.ObjectMeta", {
  name: STRING,
  generateName: STRING,
  namespace: STRING,
  selfLink: STRING,
  uid: STRING,
  resourceVersion: STRING,
  generation: INT64,
  creationTimestamp: ANY,
  deletionTimestamp: ANY,
  deletionGracePeriodSeconds: INT64,
  labels: STRING_MAP,
  annotations: STRING_MAP,
  ownerReferences: ANY,
  finalizers: { kind: "slice", item: STRING },
  managedFields: ANY,
});

/** `storagev1.VolumeError`. */
const VOLUME_ERROR = struct("v1.VolumeError", { time: ANY, message: STRING, errorCode: INT32 });

/** A VolumeAttachment (storage.k8s.io/v1). */
export const VOLUME_ATTACHMENT_FIELDS: FieldSchema = struct("v1.VolumeAttachment", {
  apiVersion: STRING,
  kind: STRING,
  metadata: OBJECT_META_FIELDS,
  spec: struct("v1.VolumeAttachmentSpec", {
    attacher: STRING,
    nodeName: STRING,
    source: struct("v1.VolumeAttachmentSource", {
      persistentVolumeName: STRING,
      inlineVolumeSpec: ANY,
    }),
  }),
  status: struct("v1.VolumeAttachmentStatus", {
    attached: BOOL,
    attachmentMetadata: STRING_MAP,
    attachError: VOLUME_ERROR,
    detachError: VOLUME_ERROR,
  }),
});

/** The Go name of a type, as `UnmarshalTypeError` prints it. */
function goName(t: FieldType): string {
  switch (t.kind) {
    case "struct":
    case "scalar":
      return t.go;
    case "map":
      return `map[string]${goName(t.value)}`;
    case "slice":
      return `[]${goName(t.item)}`;
    case "any":
      return "interface {}";
  }
}

/** The JSON type of a node as `encoding/json` names it (`number 1.5` for a fraction into an int). */
function jsonTypeName(node: OrderedNode, into: FieldType): string {
  if (node.type === "object") return "object";
  if (node.type === "array") return "array";
  const v = node.value;
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number") {
    return into.kind === "scalar" && into.go.startsWith("int") ? `number ${v}` : "number";
  }
  return typeof v;
}

/** True when `node` decodes into `t` at this level (null decodes into anything). */
function fits(node: OrderedNode, t: FieldType): boolean {
  if (node.type === "scalar" && node.value === null) return true;
  switch (t.kind) {
    case "any":
      return true;
    case "struct":
    case "map":
      return node.type === "object";
    case "slice":
      return node.type === "array";
    case "scalar": {
      if (node.type !== "scalar") return false;
      const v = node.value;
      if (t.go === "string") return typeof v === "string";
      if (t.go === "bool") return typeof v === "boolean";
      const max = t.go === "int32" ? 2 ** 31 : 2 ** 63;
      return typeof v === "number" && Number.isInteger(v) && v >= -max && v < max;
    }
  }
}

/** A member the strict decoder objects to: unknown to the schema, or given twice. */
export interface FieldFinding {
  type: "unknown" | "duplicate";
  /** Dot-separated path, array items as `[i]`: `spec.bogus`, `metadata.labels.a`. */
  path: string;
}

/** The outcome of {@link decodeFields}. */
export interface DecodedFields {
  /** The plain value without the unknown members; of duplicate members the last one counts. */
  value: unknown;
  /** Unknown and duplicate members in document order. */
  findings: FieldFinding[];
  /**
   * The first value of the wrong type, as `encoding/json` words it (`json: cannot unmarshal number
   * into Go struct field ObjectMeta.metadata.name of type string`); undefined when all fit.
   */
  typeError?: string;
}

/**
 * The plain value of `node` without the members `schema` does not name, the unknown and
 * duplicate members in the order a decoder meets them, and the first value of a wrong type.
 * Duplicates are found at every depth, also inside members typed `ANY` or when there is no schema.
 */
export function decodeFields(schema: FieldSchema | undefined, node: OrderedNode): DecodedFields {
  const findings: FieldFinding[] = [];
  let typeError: string | undefined;
  /** `owner`: the struct holding the member at `path` (named in a type error). */
  const walk = (
    t: FieldType | undefined,
    n: OrderedNode,
    path: string,
    owner: string,
    errorPath: string,
  ): unknown => {
    if (t !== undefined && !fits(n, t) && typeError === undefined) {
      typeError = `json: cannot unmarshal ${jsonTypeName(n, t)} into Go struct field ` +
        `${owner}.${errorPath} of type ${goName(t)}`;
    }
    if (n.type === "scalar") return n.value;
    if (n.type === "array") {
      const item = t?.kind === "slice" ? t.item : t === undefined ? undefined : ANY;
      return n.items.map((child, i) => walk(item, child, `${path}[${i}]`, owner, errorPath));
    }
    const out: Record<string, unknown> = {};
    const seen = new Set<string>();
    for (const [key, child] of n.members) {
      const childPath = path === "" ? key : `${path}.${key}`;
      let childType: FieldType | undefined | null;
      let childOwner = owner;
      let childErrorPath = errorPath;
      if (t === undefined || t.kind === "any" || (t.kind !== "struct" && t.kind !== "map")) {
        childType = t === undefined ? undefined : ANY;
      } else if (t.kind === "map") {
        // A map's values are reported at the map's own field.
        childType = t.value;
      } else {
        childType = Object.hasOwn(t.fields, key) ? t.fields[key] : null;
        childOwner = t.go.slice(t.go.indexOf(".") + 1);
        childErrorPath = childPath;
      }
      if (seen.has(key)) findings.push({ type: "duplicate", path: childPath });
      else if (childType === null) findings.push({ type: "unknown", path: childPath });
      seen.add(key);
      if (childType === null) continue;
      out[key] = walk(childType, child, childPath, childOwner, childErrorPath);
    }
    return out;
  };
  const value = walk(schema, node, "", "", "");
  return typeError === undefined ? { value, findings } : { value, findings, typeError };
}

/** The text kube-apiserver gives a finding, in a `Warning` header or a strict decoding error. */
export function findingText(finding: FieldFinding): string {
  return `${finding.type === "unknown" ? "unknown" : "duplicate"} field ${
    JSON.stringify(finding.path)
  }`;
}

/** A `Warning` header value: `299 - "<text>"`. */
export function warningHeader(text: string): string {
  return `299 - ${JSON.stringify(text)}`;
}
