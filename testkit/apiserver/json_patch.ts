/**
 * RFC 6902 JSON Patch, applied the way kube-apiserver applies `application/json-patch+json`.
 *
 * The API server uses evanphx/json-patch v4, which differs from a strict RFC 6902 reading in
 * two places that matter to controllers, and this module copies both:
 * - `test` with value `null` succeeds when the member is missing (Go drops empty fields with
 *   `omitempty`, so "missing" and "null" are the same thing on the server);
 * - `replace` of a missing object member succeeds and adds it (only an array index out of range
 *   fails).
 *
 * @module
 */

import { jsonEqual } from "../../lib/kube/patches.ts";

/** Why a patch was refused. */
export type JsonPatchErrorKind =
  /** The patch document itself is malformed (not an array of objects): HTTP 400 on a server. */
  | "invalid"
  /** An operation could not be applied (failed `test`, missing path, bad index): HTTP 422. */
  | "failed";

/** A JSON patch that is malformed or could not be applied. */
export class JsonPatchError extends Error {
  /** Malformed document or failed operation. */
  readonly kind: JsonPatchErrorKind;

  constructor(kind: JsonPatchErrorKind, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "JsonPatchError";
    this.kind = kind;
  }
}

/** One operation as received: the fields are checked when it is applied. */
export type JsonPatchOperation = Record<string, unknown>;

type Container = Record<string, unknown> | unknown[];

/** True for a JSON object (not an array, not null). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Checks that `body` is a JSON patch document: an array of objects. The fields of each operation
 * are checked only when it is applied, as the API server does.
 *
 * @throws {JsonPatchError} kind `invalid` when `body` is not an array of objects.
 */
export function parseJsonPatch(body: unknown): JsonPatchOperation[] {
  if (!Array.isArray(body)) {
    throw new JsonPatchError(
      "invalid",
      "json: cannot unmarshal into Go value of type jsonpatch.Patch",
    );
  }
  const ops: JsonPatchOperation[] = [];
  for (const op of body) {
    if (!isObject(op)) {
      throw new JsonPatchError(
        "invalid",
        "json: cannot unmarshal into Go value of type jsonpatch.Operation",
      );
    }
    ops.push(op);
  }
  return ops;
}

/** Decodes one RFC 6901 reference token. */
function decodeToken(token: string): string {
  return token.replaceAll("~1", "/").replaceAll("~0", "~");
}

/** Splits a pointer into its parent tokens and last token; undefined for the root or a bad one. */
function splitPointer(path: string): { parents: string[]; key: string } | undefined {
  if (!path.startsWith("/")) return undefined;
  const tokens = path.slice(1).split("/").map(decodeToken);
  const key = tokens.pop();
  if (key === undefined) return undefined;
  return { parents: tokens, key };
}

/** Parses an array index token: decimal digits only, no sign, no leading zeros. */
function parseIndex(token: string): number | undefined {
  if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
  return Number(token);
}

/** The container that holds the member `path` points at, plus the member's key. */
function locate(doc: unknown, path: string): { parent: Container; key: string } | undefined {
  const split = splitPointer(path);
  if (split === undefined) return undefined;
  let cur: unknown = doc;
  for (const token of split.parents) {
    if (Array.isArray(cur)) {
      const i = parseIndex(token);
      if (i === undefined || i >= cur.length) return undefined;
      cur = cur[i];
    } else if (isObject(cur)) {
      cur = cur[token];
    } else {
      return undefined;
    }
    if (cur === null || cur === undefined) return undefined;
  }
  if (!Array.isArray(cur) && !isObject(cur)) return undefined;
  return { parent: cur, key: split.key };
}

/** Reads a member; `undefined` when missing. Throws for a bad array index. */
function getMember(parent: Container, key: string, path: string): unknown {
  if (Array.isArray(parent)) {
    const i = parseIndex(key);
    if (i === undefined || i >= parent.length) {
      throw new JsonPatchError("failed", `Unable to access invalid index: ${key} (${path})`);
    }
    return parent[i];
  }
  return parent[key];
}

/** Adds a member (inserting into arrays, `-` appends). */
function addMember(parent: Container, key: string, value: unknown, path: string): void {
  if (Array.isArray(parent)) {
    if (key === "-") {
      parent.push(value);
      return;
    }
    const i = parseIndex(key);
    if (i === undefined || i > parent.length) {
      throw new JsonPatchError("failed", `Unable to access invalid index: ${key} (${path})`);
    }
    parent.splice(i, 0, value);
    return;
  }
  parent[key] = value;
}

/** Removes a member that must exist. */
function removeMember(parent: Container, key: string, path: string): void {
  if (Array.isArray(parent)) {
    const i = parseIndex(key);
    if (i === undefined || i >= parent.length) {
      throw new JsonPatchError("failed", `Unable to access invalid index: ${key} (${path})`);
    }
    parent.splice(i, 1);
    return;
  }
  if (!Object.hasOwn(parent, key)) {
    throw new JsonPatchError("failed", `Unable to remove nonexistent key: ${key} (${path})`);
  }
  delete parent[key];
}

/** A string field of an operation, or a `failed` error. */
function stringField(op: JsonPatchOperation, field: "path" | "from"): string {
  const v = op[field];
  if (typeof v !== "string") {
    throw new JsonPatchError("failed", `operation missing ${field} field`);
  }
  return v;
}

/** The container for `path`, or a `failed` error worded as the Go library words it. */
function mustLocate(
  doc: unknown,
  path: string,
  opName: string,
): { parent: Container; key: string } {
  const loc = locate(doc, path);
  if (loc === undefined) {
    throw new JsonPatchError(
      "failed",
      `${opName} operation does not apply: doc is missing path: ${path}`,
    );
  }
  return loc;
}

/**
 * Applies `ops` to a deep copy of `doc` and returns the copy; `doc` is never modified. The
 * operations run in order and the whole patch fails on the first operation that fails.
 *
 * @example
 * ```ts
 * applyJsonPatch({ metadata: {} }, [
 *   { op: "test", path: "/metadata/finalizers", value: null },
 *   { op: "add", path: "/metadata/finalizers", value: ["f"] },
 * ]); // { metadata: { finalizers: ["f"] } }
 * ```
 * @throws {JsonPatchError} kind `failed` when an operation does not apply.
 */
export function applyJsonPatch(doc: unknown, ops: readonly JsonPatchOperation[]): unknown {
  const out: unknown = structuredClone(doc);
  for (const op of ops) {
    const kind = op.op;
    switch (kind) {
      case "add": {
        const path = stringField(op, "path");
        const { parent, key } = mustLocate(out, path, "add");
        addMember(parent, key, structuredClone(op.value ?? null), path);
        break;
      }
      case "remove": {
        const path = stringField(op, "path");
        const { parent, key } = mustLocate(out, path, "remove");
        removeMember(parent, key, path);
        break;
      }
      case "replace": {
        const path = stringField(op, "path");
        const { parent, key } = mustLocate(out, path, "replace");
        const value = structuredClone(op.value ?? null);
        if (Array.isArray(parent)) {
          getMember(parent, key, path); // index must exist
          parent[Number(key)] = value;
        } else {
          parent[key] = value;
        }
        break;
      }
      case "move":
      case "copy": {
        const from = stringField(op, "from");
        const src = mustLocate(out, from, kind);
        const value = getMember(src.parent, src.key, from);
        if (value === undefined) {
          throw new JsonPatchError(
            "failed",
            `${kind} operation does not apply: doc is missing from path: ${from}`,
          );
        }
        if (kind === "move") removeMember(src.parent, src.key, from);
        const path = stringField(op, "path");
        const dst = mustLocate(out, path, kind);
        addMember(dst.parent, dst.key, kind === "copy" ? structuredClone(value) : value, path);
        break;
      }
      case "test": {
        const path = stringField(op, "path");
        const loc = locate(out, path);
        if (loc === undefined) {
          throw new JsonPatchError(
            "failed",
            `test operation does not apply: is missing path: ${path}`,
          );
        }
        const actual = getMember(loc.parent, loc.key, path);
        const expected = op.value;
        const ok = actual === undefined || actual === null
          ? expected === null || expected === undefined
          : jsonEqual(actual, expected);
        if (!ok) throw new JsonPatchError("failed", `testing value ${path} failed`);
        break;
      }
      default:
        throw new JsonPatchError("failed", `Unexpected kind: ${String(kind)}`);
    }
  }
  return out;
}
