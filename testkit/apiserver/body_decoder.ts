/**
 * The body of a create or update (POST, PUT) decoded as kube-apiserver v1.37.2 decodes it: JSON or
 * YAML by `Content-Type`, the kind and API version checked against the resource, field validation
 * (unknown and duplicate fields as `Warning` headers, or refused with `fieldValidation=Strict`),
 * and the real server's error texts for each failure.
 *
 * YAML is read as Kubernetes reads it (through JSON, YAML 1.1 booleans such as `yes`/`no`/`on`/
 * `off`, the first document only); its syntax errors carry js-yaml's wording, not go-yaml's, and
 * merge keys (`<<`) and YAML 1.1 octals are not understood. Types of field values are checked
 * where the resource describes its fields (VolumeAttachments).
 *
 * @module
 */

import yaml from "js-yaml";
import { goJsonSyntaxError } from "./go_json_error.ts";
import { decodeFields, findingText, warningHeader } from "./field_schema.ts";
import { orderedFromValue, type OrderedNode, parseOrderedJson } from "./ordered_json.ts";
import { apiVersionOf, SERVED_RESOURCES, type ServedResource } from "./resources.ts";
import { badRequest, StatusError, unsupportedMediaType } from "./status_errors.ts";

/** A decoded body and the `Warning` headers its field validation gives. */
export interface DecodedBody {
  body: Record<string, unknown>;
  warnings: string[];
}

/** Media types a create or update body may have (the real server also takes protobuf). */
const OBJECT_MEDIA_TYPES = [
  "application/json",
  "application/yaml",
  "application/vnd.kubernetes.protobuf",
];

/** The anonymous struct client-go's `DefaultMetaFactory` decodes the kind into. */
const GVK_STRUCT = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; ' +
  'Kind string "json:\\"kind,omitempty\\"" }';

/** YAML 1.1 booleans, as go-yaml v2 (behind sigs.k8s.io/yaml) resolves them. */
const YAML11_BOOL = new yaml.Type("tag:yaml.org,2002:bool", {
  kind: "scalar",
  resolve: (data: string | null) =>
    data !== null &&
    /^(y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$/
      .test(data),
  construct: (data: string) => /^(y|Y|yes|Yes|YES|true|True|TRUE|on|On|ON)$/.test(data),
  predicate: (v: unknown) => typeof v === "boolean",
});

/** YAML's core schema with the YAML 1.1 booleans in place of its own (same tag: replaced). */
const YAML_SCHEMA = yaml.CORE_SCHEMA.extend({ implicit: [YAML11_BOOL] });

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Go's `summarizeData(body, 30)`: the start of a JSON object as text, anything else in hex. */
function summarize(text: string): string {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length === 0) return "<empty>";
  const cut = bytes.length > 30;
  const head = bytes.subarray(0, 30);
  if (bytes[0] === 0x7b) return new TextDecoder().decode(head) + (cut ? " ..." : "");
  return Array.from(head, (b) => b.toString(16).padStart(2, "0")).join("") + (cut ? " ..." : "");
}

/** 400 `the object provided is unrecognized (must be of type K): <err> (<summary>)`. */
function unrecognized(res: ServedResource, err: string, text: string): StatusError {
  return badRequest(
    `the object provided is unrecognized (must be of type ${res.kind}): ${err} (${
      summarize(text)
    })`,
  );
}

/** The name `encoding/json` gives the JSON type of a value in an `UnmarshalTypeError`. */
function goJsonType(value: unknown): string {
  if (Array.isArray(value)) return "array";
  if (typeof value === "boolean") return "bool";
  if (isObject(value)) return "object";
  return typeof value;
}

/** A YAML body as JSON-like nodes, and go-yaml's texts for its duplicate keys. */
function parseYaml(res: ServedResource, text: string): { node: OrderedNode; duplicates: string[] } {
  const duplicates: string[] = [];
  // js-yaml refuses duplicate keys where go-yaml reports them and keeps the last one: find each
  // one, and make it unique to read on. The value itself is read with duplicates allowed.
  let scan = text;
  for (let n = 0; n < 1000; n++) {
    try {
      yaml.loadAll(scan, undefined, { schema: YAML_SCHEMA });
      break;
    } catch (err) {
      if (!(err instanceof yaml.YAMLException) || err.reason !== "duplicated mapping key") break;
      const at = err.mark.position;
      const key = (/^[^:\n]*/.exec(scan.slice(at))?.[0] ?? "").trim().replace(/^["']|["']$/g, "");
      duplicates.push(`line ${err.mark.line + 1}: key ${JSON.stringify(key)} already set in map`);
      scan = `${scan.slice(0, at)}zzdup${n}zz${scan.slice(at)}`;
    }
  }
  let docs: unknown[];
  try {
    docs = yaml.loadAll(text, undefined, { schema: YAML_SCHEMA, json: true });
  } catch (err) {
    if (!(err instanceof yaml.YAMLException)) throw err;
    throw unrecognized(res, `yaml: line ${err.mark.line + 1}: ${err.reason}`, text);
  }
  return { node: orderedFromValue(JSON.parse(JSON.stringify(docs[0] ?? null))), duplicates };
}

/**
 * Why the body's kind and API version cannot be stored as `res`, or undefined when they can.
 * Only the served kinds are known here (the real scheme knows every built-in kind).
 */
function kindError(res: ServedResource, kind: string, apiVersion: string): StatusError | undefined {
  const expected = apiVersionOf(res);
  if (kind === res.kind && apiVersion === expected) return undefined;
  const group = apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "";
  const version = apiVersion.slice(apiVersion.indexOf("/") + 1);
  if (kind === res.kind && group === res.group) {
    return badRequest(
      `the API version in the data (${apiVersion}) does not match the expected API version ` +
        `(${expected})`,
    );
  }
  const prefix = `${kind} in version ${JSON.stringify(version)} cannot be handled as a ${res.kind}`;
  const known = SERVED_RESOURCES.some((r) => r.kind === kind && apiVersionOf(r) === apiVersion);
  if (known) {
    const internal = res.group === "" ? "core" : res.group.split(".")[0];
    return badRequest(
      `${prefix}: converting (${version}.${kind}) to (${internal}.${res.kind}): unknown conversion`,
    );
  }
  return badRequest(
    `${prefix}: no kind ${JSON.stringify(kind)} is registered for version ` +
      `${JSON.stringify(apiVersion)} in scheme "pkg/runtime/scheme.go:111"`,
  );
}

/**
 * Decodes the body of a create or update of `res`.
 *
 * @param contentType media type without parameters ("" is JSON).
 * @param fieldValidation the request's `fieldValidation`: `Strict` refuses unknown and duplicate
 *   fields, `Ignore` drops them silently, anything else (`Warn`) drops them with a warning each.
 * @throws {StatusError} 415 for another media type; 400 for a body that does not decode.
 */
export function decodeObjectBody(
  res: ServedResource,
  contentType: string,
  text: string,
  fieldValidation: string,
): DecodedBody {
  const yamlBody = contentType === "application/yaml";
  if (!yamlBody && contentType !== "" && contentType !== "application/json") {
    throw unsupportedMediaType(OBJECT_MEDIA_TYPES);
  }
  if (text.length === 0) {
    throw unrecognized(
      res,
      "couldn't get version/kind; json parse error: unexpected end of JSON input",
      text,
    );
  }
  let node: OrderedNode;
  let yamlDuplicates: string[] = [];
  if (yamlBody) {
    ({ node, duplicates: yamlDuplicates } = parseYaml(res, text));
  } else {
    const syntax = goJsonSyntaxError(text);
    if (syntax !== undefined) {
      throw unrecognized(res, `couldn't get version/kind; json parse error: ${syntax}`, text);
    }
    node = parseOrderedJson(text);
  }
  if (node.type === "scalar" && node.value === null) node = { type: "object", members: [] };
  if (node.type !== "object") {
    const type = node.type === "array" ? "array" : goJsonType(node.value);
    throw unrecognized(
      res,
      `couldn't get version/kind; json parse error: json: cannot unmarshal ${type} into Go ` +
        `value of type ${GVK_STRUCT}`,
      text,
    );
  }
  const meta: Record<string, string> = {};
  for (const field of ["apiVersion", "kind"]) {
    const member = node.members.findLast(([k]) => k === field)?.[1];
    if (member === undefined || (member.type === "scalar" && member.value === null)) continue;
    if (member.type !== "scalar" || typeof member.value !== "string") {
      const type = member.type === "scalar" ? goJsonType(member.value) : member.type;
      throw unrecognized(
        res,
        `couldn't get version/kind; json parse error: json: cannot unmarshal ${type} into Go ` +
          `struct field .${field} of type string`,
        text,
      );
    }
    meta[field] = member.value;
  }
  const kind = meta.kind || res.kind;
  const apiVersion = meta.apiVersion || apiVersionOf(res);
  const mismatch = kindError(res, kind, apiVersion);
  if (mismatch !== undefined) throw mismatch;

  const decoded = decodeFields(res.fields, node);
  if (decoded.typeError !== undefined) {
    throw badRequest(
      `${res.kind} in version "${res.version}" cannot be handled as a ${res.kind}: ` +
        decoded.typeError,
    );
  }
  const texts = decoded.findings.map(findingText);
  if (fieldValidation === "Strict" && (texts.length > 0 || yamlDuplicates.length > 0)) {
    const all = yamlDuplicates.length > 0
      ? [`yaml: unmarshal errors:\n  ${yamlDuplicates.join("\n  ")}`, ...texts]
      : texts;
    throw badRequest(
      `${res.kind} in version "${res.version}" cannot be handled as a ${res.kind}: ` +
        `strict decoding error: ${all.join(", ")}`,
    );
  }
  const warnings = fieldValidation === "Ignore"
    ? []
    : [...yamlDuplicates, ...texts].map(warningHeader);
  return { body: decoded.value as Record<string, unknown>, warnings };
}
