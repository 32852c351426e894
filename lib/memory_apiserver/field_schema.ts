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

/** The outcome of {@link dropUnknownFields}. */
export interface PrunedBody {
  /** A copy of the body without the unknown fields. */
  value: unknown;
  /** Paths of the unknown fields, dot-separated (`spec.bogus`), in body order. */
  unknown: string[];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A copy of `body` without the members `schema` does not name, and the paths of those members.
 * Values that are not objects where the schema expects one are kept as they are (type errors are
 * not this function's concern).
 */
export function dropUnknownFields(schema: FieldSchema, body: unknown): PrunedBody {
  const unknown: string[] = [];
  const walk = (node: FieldSchema, value: unknown, prefix: string): unknown => {
    if (!isObject(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) {
      const sub = Object.hasOwn(node, key) ? node[key] : undefined;
      const path = prefix === "" ? key : `${prefix}.${key}`;
      if (sub === undefined) unknown.push(path);
      else out[key] = sub === true ? child : walk(sub, child, path);
    }
    return out;
  };
  return { value: walk(schema, body, ""), unknown };
}

/** The `Warning` header value kube-apiserver sends for one unknown field. */
export function unknownFieldWarning(path: string): string {
  return `299 - ${JSON.stringify(`unknown field ${JSON.stringify(path)}`)}`;
}
