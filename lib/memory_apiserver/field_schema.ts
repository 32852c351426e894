/**
 * Known field names per resource, for the field validation kube-apiserver does while decoding a
 * request body: an unknown field is dropped with a `Warning: 299 - "unknown field \"spec.x\""`
 * header (`fieldValidation=Warn`, the default), refused with 400 (`Strict`) or silently dropped
 * (`Ignore`).
 *
 * Only the structure our resources' clients write is described; a subtree given as `true` takes
 * any content.
 *
 * @module
 */

import type { OrderedNode } from "./ordered_json.ts";

/** Known members of a JSON object: a nested schema, or `true` for any content. */
export type FieldSchema = { readonly [field: string]: FieldSchema | true };

/** Members of `metav1.ObjectMeta`; their contents are not checked. */
export const OBJECT_META_FIELDS: FieldSchema = {
  name: true,
  generateName: true,
  namespace: true,
  selfLink: true,
  uid: true,
  resourceVersion: true,
  generation: true,
  creationTimestamp: true,
  deletionTimestamp: true,
  deletionGracePeriodSeconds: true,
  labels: true,
  annotations: true,
  ownerReferences: true,
  finalizers: true,
  managedFields: true,
};

/** The known fields of a VolumeAttachment (storage.k8s.io/v1). */
export const VOLUME_ATTACHMENT_FIELDS: FieldSchema = {
  apiVersion: true,
  kind: true,
  metadata: OBJECT_META_FIELDS,
  spec: {
    attacher: true,
    nodeName: true,
    source: { persistentVolumeName: true, inlineVolumeSpec: true },
  },
  status: {
    attached: true,
    attachmentMetadata: true,
    attachError: true,
    detachError: true,
  },
};

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
}

/**
 * The plain value of `node` without the members `schema` does not name, with the unknown and
 * duplicate members in the order a decoder meets them. Duplicates are found at every depth, also
 * inside subtrees the schema leaves open (`true`) or when there is no schema; values that are not
 * objects where the schema expects one are kept as they are (type errors are not checked).
 */
export function decodeFields(schema: FieldSchema | undefined, node: OrderedNode): DecodedFields {
  const findings: FieldFinding[] = [];
  const walk = (sub: FieldSchema | true | undefined, n: OrderedNode, prefix: string): unknown => {
    if (n.type === "scalar") return n.value;
    if (n.type === "array") {
      return n.items.map((item, i) =>
        walk(sub === undefined ? undefined : true, item, `${prefix}[${i}]`)
      );
    }
    const out: Record<string, unknown> = {};
    const seen = new Set<string>();
    for (const [key, child] of n.members) {
      const path = prefix === "" ? key : `${prefix}.${key}`;
      const childSchema = sub === true || sub === undefined
        ? sub
        : Object.hasOwn(sub, key)
        ? sub[key]
        : null;
      if (seen.has(key)) findings.push({ type: "duplicate", path });
      else if (childSchema === null) findings.push({ type: "unknown", path });
      seen.add(key);
      if (childSchema === null) continue;
      out[key] = walk(childSchema, child, path);
    }
    return out;
  };
  return { value: walk(schema, node, ""), findings };
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
